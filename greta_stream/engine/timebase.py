"""Event time: parsing, and window/pane arithmetic on exact numbers.

Numeric times are seconds (int or float) and stay as given. ISO-8601
timestamps become integer microseconds since the Unix epoch (UTC when no
offset is given). Window k covers [k*slide, k*slide + within) in the same
unit (docs/QUERY_LANGUAGE.md section 3); comparisons mix ints, floats and Fractions
exactly, so no window boundary is rounded: a bound that is no int is the first
float at or after it (`_as_time`), for comparisons and in result rows alike.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any, NamedTuple

import numpy as np

from greta_stream.compiler.compiled import fraction_gcd

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
US_PER_S = 1_000_000
_NUMERIC = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")

NUMERIC = "seconds"
TIMESTAMP = "timestamp"
# Numeric times are placed exactly below this (float64 window arithmetic, int64
# kernels): about 35.7 million years of seconds. Beyond it an event is a bad_time
# on every engine, never an overflow.
MAX_TIME_S = 2**50


class TimeError(ValueError):
    """A time value that is not a number of seconds or an ISO-8601 timestamp."""


def parse_time(value: Any) -> tuple[str, int | float]:
    """(kind, value): seconds as given, or timestamps as int microseconds."""
    if isinstance(value, bool) or value is None:
        raise TimeError(f"time must be a number or an ISO-8601 timestamp, got {value!r}")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise TimeError(f"time must be finite, got {value!r}")
        if not -MAX_TIME_S < value < MAX_TIME_S:
            raise TimeError(f"time {_short(value)} is out of range: numeric times lie strictly between "
                            f"-2**50 and 2**50 seconds")
        return NUMERIC, value
    if hasattr(value, "item") and not isinstance(value, (str, datetime)):  # numpy scalars
        return parse_time(value.item())
    if isinstance(value, str):
        if _NUMERIC.match(value):
            text = value.strip()
            digits = text.lstrip("+-")
            if not digits.isdigit():
                return parse_time(float(text))
            if len(digits.lstrip("0")) > 20:  # out of range; and int() refuses 4,300 digits
                return parse_time(-(2**64) if text[0] == "-" else 2**64)
            return parse_time(int(text))
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise TimeError(f"time {value!r} is neither a number nor an ISO-8601 timestamp") from None
    if isinstance(value, datetime):
        if value != value:  # noqa: PLR0124 - pandas' NaT, a datetime that is no time
            raise TimeError("time must be a number or an ISO-8601 timestamp, got NaT")
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return TIMESTAMP, (value - EPOCH) // timedelta(microseconds=1)
    raise TimeError(f"time must be a number or an ISO-8601 timestamp, got {type(value).__name__}")


def _short(value: int | float) -> str:
    """A number for a message: a 400-digit int is not repeated in full."""
    if isinstance(value, float) or abs(value) < 2**64:
        return repr(value)
    return f"{'-' if value < 0 else ''}2**{abs(value).bit_length() - 1} or more"


def exact(t: int | float | Fraction) -> int | Fraction:
    """The exact value of a time: a float counts as the decimal it prints as.

    `0.3` means 3/10, not the binary float just below it, so an event at
    time 0.3 falls in the window [0.3, 0.6) as its author meant. Distinct
    floats keep their order under this reading.
    """
    if isinstance(t, float):
        return Fraction(repr(t))
    return t


@dataclass(frozen=True)
class Timebase:  # noqa: D101
    """Windows and panes in the unit of the event times of one stream."""

    kind: str
    within: Fraction
    slide: Fraction

    @classmethod
    def create(cls, kind: str, within_s: Fraction, slide_s: Fraction) -> Timebase:
        scale = US_PER_S if kind == TIMESTAMP else 1
        return cls(kind, within_s * scale, slide_s * scale)

    @cached_property
    def pane(self) -> Fraction:
        """gcd(within, slide): every window bound is a pane bound."""
        return fraction_gcd(self.within, self.slide)

    @cached_property
    def _memo(self) -> tuple[dict[Any, int], dict[Any, int], dict[Any, int], dict[int, Any], dict[int, Any]]:
        """Memos of first_window, last_window, pane_index (by time; equal
        times such as 1 and 1.0 have one exact value, so one entry) and of
        start, end (by k): events of one time stamp ask several times."""
        return {}, {}, {}, {}, {}

    def first_window(self, t: int | float | Fraction) -> int:
        """The smallest k whose window contains t."""
        memo = self._memo[0]
        k = memo.get(t)
        if k is None:
            if len(memo) > 65536:
                memo.clear()
            k = memo[t] = self._first_window(t)
        return k

    def last_window(self, t: int | float | Fraction) -> int:
        """The largest k whose window contains t."""
        memo = self._memo[1]
        k = memo.get(t)
        if k is None:
            if len(memo) > 65536:
                memo.clear()
            k = memo[t] = self._last_window(t)
        return k

    def pane_index(self, t: int | float) -> int:
        memo = self._memo[2]
        k = memo.get(t)
        if k is None:
            if len(memo) > 65536:
                memo.clear()
            k = memo[t] = self._pane_index(t)
        return k

    def start(self, k: int) -> int | float:
        """Start of window k as an event-time value: an int when whole, else the
        first float at or after it as `exact()` reads floats (`_as_time`). Times
        compare with it exactly and a row shows it, so an event lies in a row's
        window exactly when window_start <= time < window_end, as floats too."""
        memo = self._memo[3]
        x = memo.get(k)
        if x is None:
            if len(memo) > 65536:
                memo.clear()
            x = memo[k] = _as_time(k * self.slide)
        return x

    def end(self, k: int) -> int | float:
        """End of window k as an event-time value, as `start`."""
        memo = self._memo[4]
        x = memo.get(k)
        if x is None:
            if len(memo) > 65536:
                memo.clear()
            x = memo[k] = _as_time(k * self.slide + self.within)
        return x

    def window_start_pane(self, k: int) -> int:
        """The index of the pane that starts where window k starts (exact)."""
        return k * int(self.slide / self.pane)

    def _last_window(self, t: int | float | Fraction) -> int:
        if isinstance(t, int) and self.slide.denominator == 1:
            return t // self.slide.numerator
        num, den = _ratio(t)
        s = self.slide
        return (num * s.denominator) // (den * s.numerator)

    def _first_window(self, t: int | float | Fraction) -> int:
        if isinstance(t, int) and self.slide.denominator == 1 and self.within.denominator == 1:
            return (t - self.within.numerator) // self.slide.numerator + 1
        num, den = _ratio(t)
        w, s = self.within, self.slide
        # floor((num/den - w) / s) + 1, in integers
        return ((num * w.denominator - w.numerator * den) * s.denominator) // (den * w.denominator * s.numerator) + 1

    def _pane_index(self, t: int | float) -> int:
        num, den = _ratio(t)
        p = self.pane
        return (num * p.denominator) // (den * p.numerator)

    def export(self, x: int | float) -> int | float | datetime:
        """A window bound in the input's unit: seconds, or a UTC datetime."""
        if self.kind == TIMESTAMP:
            return EPOCH + timedelta(microseconds=x)
        return x


@lru_cache(maxsize=4096)
def _decimal(t: float) -> tuple[int, int]:
    """`exact(t)` of a float as (numerator, positive denominator), fast."""
    text = repr(t)
    if "e" in text or "n" in text:  # exponent form (or inf/nan): the slow exact path
        f = Fraction(text)
        return f.numerator, f.denominator
    whole, _, frac = text.partition(".")
    return int(whole + frac), 10 ** len(frac)


def _ratio(t: int | float | Fraction) -> tuple[int, int]:
    if isinstance(t, float):
        return _decimal(t)
    if isinstance(t, int):
        return t, 1
    return t.numerator, t.denominator


def _as_time(x: Fraction) -> int | float:
    """A bound x as an event-time value that times compare with exactly: the
    first float that `exact()` reads as x or more (the int when x is whole). A
    float time t is before it exactly when `exact(t) < x`, an int time (below
    2**53) exactly when t < x. Below 15 significant digits that is the float
    nearest x, which prints as x; past them the nearest float can read below x
    (2**49 + 0.3 rounds to 2**49 + 0.25, which prints as 2**49 + 0.2, a time
    inside [2**49 + 0.2, 2**49 + 0.3)) and the next float up is the first.
    Rounding is monotone, so one step is enough: no float below the nearest
    reads as x or more, and the one above it does."""
    if x.denominator == 1:
        return x.numerator
    f = float(x)
    num, den = _decimal(f)
    return f if num * x.denominator >= x.numerator * den else math.nextafter(f, math.inf)


# The vectorized bounds take WITHIN and SLIDE of any common denominator D (in
# seconds): window k covers [k*slide/D, (k*slide + within)/D). The window
# indices of a time must fit int64: `max_window_time` says up to which time
# they do (every numeric time below MAX_TIME_S up to D = 8000, every time of
# this era down to windows of a nanosecond); past it, `WindowRangeError`.
_INDEX_LIMIT = 0.98 * 2.0**63  # window indices (and t * D of int times) stay below this, within int64


class WindowRangeError(ValueError):
    """Times whose window indices do not fit int64 at the window's resolution."""


class Window(NamedTuple):
    """A window spec in the unit of some times: window k covers
    [k*slide/den, (k*slide + within)/den) (ints; den 1 for whole numbers)."""

    within: int
    slide: int
    den: int = 1


def max_window_time(window: Window) -> float:
    """The largest |t| whose window indices `window_bounds` keeps within int64 where the window is not
    whole (den > 1; whole windows take every time below MAX_TIME_S): t * den / slide and
    (t * den + within) / slide below 0.98 * 2**63."""
    return _INDEX_LIMIT * window.slide / window.den - window.within / window.den


def window_in_unit(within: Fraction | int, slide: Fraction | int, scale: int) -> Window:
    """The window spec of `within` and `slide` seconds in a unit of 1/scale seconds."""
    w, s = Fraction(within) * scale, Fraction(slide) * scale
    den = math.lcm(w.denominator, s.denominator)
    return Window(int(w * den), int(s * den), den)


def window_bounds(t: np.ndarray, window: Window, ints: bool) -> tuple[np.ndarray, np.ndarray]:
    """First and last window of each time, vectorized: [k*slide/den, (k*slide +
    within)/den) holds t (`window` in the unit of `t`; times below 2**50, where
    this arithmetic is exact). `Timebase.first_window` and `last_window` answer
    the same for one time: a float time counts as the decimal it prints as."""
    within, slide, den = window
    if den != 1:
        if len(t) and float(np.abs(t).max()) >= max_window_time(window):
            raise WindowRangeError(f"a time of {float(np.abs(t).max()):.6g} s has window indices beyond int64 "
                                   f"with windows in 1/{den} s (times up to {max_window_time(window):.6g} s fit)")
        return _fine_bounds(t, within, slide, ints, den)
    if ints:
        t = t.astype(np.int64)
        return (t - within) // slide + 1, t // slide
    hi = np.floor(t / slide)
    hi = np.where(hi * slide > t, hi - 1, hi)
    hi = np.where((hi + 1) * slide <= t, hi + 1, hi)
    lo = np.floor((t - within) / slide) + 1
    lo = np.where((lo - 1) * slide + within > t, lo - 1, lo)
    lo = np.where(lo * slide + within <= t, lo + 1, lo)
    return lo.astype(np.int64), hi.astype(np.int64)


def _fine_bounds(t: np.ndarray, within: int, slide: int, ints: bool, den: int) -> tuple[np.ndarray, np.ndarray]:
    """`window_bounds` of bounds that are not whole numbers (den > 1).

    Int times: exact in integers on t * den (in Python ints where that passes 2**62).
    Float times: a bound b = (k*slide)/den is one int over another, so float64
    rounds it correctly; with at most 15 significant digits (`_float_limit`)
    distinct such decimals stay distinct floats and a float prints as b exactly
    when it equals float(b), so comparing t with the float bound is comparing
    `exact(t)` with b. Past that limit the floor of a time's float position is
    its window unless a bound lies within the rounding error of it
    (`_near_bound`): those few times are placed exactly, one by one (epoch
    seconds with windows in microseconds: about one time in 400).
    """
    if ints:
        t = t.astype(np.int64)
        lo, hi = np.zeros(len(t), np.int64), np.zeros(len(t), np.int64)
        small = np.abs(t) < _INDEX_LIMIT / den  # t * den within int64; the others exactly, one by one
        td = t[small] * den
        lo[small], hi[small] = (td - within) // slide + 1, td // slide
        for i in np.flatnonzero(~small).tolist():
            lo[i], hi[i] = (int(t[i]) * den - within) // slide + 1, (int(t[i]) * den) // slide
        return lo, hi
    t = t.astype(np.float64)
    x = t * den
    p_hi, p_lo = x / slide, (x - within) / slide
    hi0, lo0 = np.floor(p_hi), np.floor(p_lo) + 1
    hi = np.where(hi0 * slide / den > t, hi0 - 1, hi0)
    hi = np.where((hi + 1) * slide / den <= t, hi + 1, hi)
    lo = np.where(((lo0 - 1) * slide + within) / den > t, lo0 - 1, lo0)
    lo = np.where((lo * slide + within) / den <= t, lo + 1, lo)
    far = np.abs(t) >= _float_limit(within, slide, den)  # past 15 significant digits: the float positions
    hi, lo = np.where(far, hi0, hi).astype(np.int64), np.where(far, lo0, lo).astype(np.int64)  # where no bound
    at = np.flatnonzero(far)  # is near, exactly one by one where one is
    for i in at[_near_bound(t[at], x[at], p_hi[at], p_lo[at], within, slide, den)].tolist():
        num, d = _ratio(float(t[i]))
        lo[i] = (num * den - within * d) // (d * slide) + 1
        hi[i] = (num * den) // (d * slide)
    return lo, hi


def _near_bound(t: np.ndarray, x: np.ndarray, p_hi: np.ndarray, p_lo: np.ndarray, within: int, slide: int,
                den: int) -> np.ndarray:
    """Which times the floor of their float position may place in the wrong window: their positions
    p_hi = t * den / slide and p_lo = (t * den - within) / slide (x = t * den) lie within the error of an
    integer. The error bounds the decimal a float prints as (half an ulp of t away from it) and three
    roundings (2**-53 each, relative), doubled for margin."""
    eps = 2.0**-51
    ulp = np.spacing(np.abs(t)) * den / slide
    m_hi = ulp + (np.abs(x) / slide + np.abs(p_hi)) * eps
    m_lo = ulp + ((np.abs(x) + np.abs(x - within)) / slide + np.abs(p_lo)) * eps
    return (np.abs(p_hi - np.rint(p_hi)) <= m_hi) | (np.abs(p_lo - np.rint(p_lo)) <= m_lo)


def _float_limit(within: int, slide: int, den: int) -> float:
    """Times below this compare with float window bounds exactly: every bound
    within `within + slide` of them has at most 15 significant digits (bounds
    have as many decimals as the smallest power of ten den divides)."""
    decimals = next(q for q in range(20) if 10**q % den == 0)
    return 10.0 ** (15 - decimals) - (within + slide) / den
