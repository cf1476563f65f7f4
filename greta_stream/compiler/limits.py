"""Caps on what one query may cost per event, checked when a run is set up.

A window of `WITHIN 1 day SLIDE 1 ms` puts every event in 86,400,000
windows; the engines would try. `Limits` bounds the windows each event is in
and the panes each window has (`WindowSpec`), and `check_limits` refuses a
compiled query beyond them with a `QueryError` at its WITHIN clause that
names the setting and the numbers. Imports `errors` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from greta_stream.errors import ConfigError, QueryError, QueryProblem

if TYPE_CHECKING:
    from greta_stream.compiler.compiled import CompiledQuery


@dataclass(frozen=True)
class Limits:
    """`max_windows_per_event`: ceil(WITHIN / SLIDE); `max_panes_per_window`:
    WITHIN / gcd(WITHIN, SLIDE). None: no cap."""

    max_windows_per_event: int | None = 1_000
    max_panes_per_window: int | None = 10_000

    def __post_init__(self) -> None:
        for name in ("max_windows_per_event", "max_panes_per_window"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ConfigError(f"{name} must be a positive integer or None, got {v!r}")


LIMITS = Limits()


MAX_WINDOW_S = 1_000 * 31_557_600  # 1,000 years: a timestamp window then still ends before the year 9999


def check_window_length(cq: CompiledQuery) -> CompiledQuery:
    """`cq`, or `QueryError` at its WITHIN or SLIDE when either is longer than
    `MAX_WINDOW_S`: window bounds must be times a timestamp stream can show
    (before the year 9999), whatever the limits of the run."""
    q = cq.query
    for clause, d in (("WITHIN", q.within), ("SLIDE", q.slide)):
        if d is not None and d.seconds > MAX_WINDOW_S:
            span = d.span
            raise QueryError([QueryProblem(
                f"{clause} {_dur(d)} is longer than 1,000 years, the longest window (window bounds must be "
                "times before the year 9999)", max(span.line, 1), max(span.column, 1), span.end_column or None)],
                cq.text)
    return cq


def check_limits(cq: CompiledQuery, limits: Limits = LIMITS) -> CompiledQuery:
    """`cq`, or `QueryError` when its windows exceed `limits`."""
    w = cq.window
    q = cq.query
    where = q.slide or q.within
    clause = f"WITHIN {_dur(q.within)}" + (f" SLIDE {_dur(q.slide)}" if q.slide is not None else "")
    windows = w.windows_per_event
    panes = w.within / w.pane
    problems = []
    if limits.max_windows_per_event is not None and windows > limits.max_windows_per_event:
        problems.append(f"{clause} puts every event in {windows:,} windows: more than max_windows_per_event = "
                        f"{limits.max_windows_per_event:,} (a longer SLIDE or a shorter WITHIN fits)")
    elif limits.max_panes_per_window is not None and panes > limits.max_panes_per_window:
        problems.append(f"{clause} splits every window into {math.floor(panes):,} panes of "
                        f"{float(w.pane):g} s: more than max_panes_per_window = {limits.max_panes_per_window:,} "
                        f"(a SLIDE that divides WITHIN fits)")
    if problems:
        span = where.span
        raise QueryError([QueryProblem(p, max(span.line, 1), max(span.column, 1), span.end_column or None)
                          for p in problems], cq.text)
    return cq


def _dur(d: object) -> str:
    amount = d.amount  # type: ignore[attr-defined]
    text = str(amount.numerator) if amount.denominator == 1 else f"{float(amount):g}"
    return f"{text} {d.unit}"  # type: ignore[attr-defined]
