"""Event times as arrays: numbers (seconds) or timestamps (microseconds since the epoch).

The general engine's `parse_time` is the reference: every conversion here
gives what it gives (tested with hypothesis), only faster: ISO-8601 text in
its common UTC spelling is parsed by Arrow, a DataFrame's datetime64 column
in one numpy step, other spellings one distinct text at a time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from greta_stream.engine.columnar.columns import FLOAT, INT, Column, Input, Unsupported, missing
from greta_stream.engine.timebase import MAX_TIME_S, TIMESTAMP, US_PER_S, TimeError, parse_time

MAX_TIME = float(MAX_TIME_S)  # window arithmetic on float64 times is exact below this (parse_time's range)



def renumber(col: Any) -> Any:
    """Times of an OTHER column with numbers (and None/bools) only: the numbers as
    float64. A number out of range (`parse_time` refuses it: an int too large
    for a float, say) is no number here: its row is a bad_time."""
    values = col.values[col.number].tolist()
    vals = np.zeros(len(col.values), np.float64)
    nums = col.number.copy()
    at = np.flatnonzero(nums)
    in_range = np.fromiter((-MAX_TIME < v < MAX_TIME for v in values), bool, len(values))
    nums[at[~in_range]] = False
    vals[at[in_range]] = np.asarray([v for v, ok in zip(values, in_range.tolist(), strict=True) if ok], np.float64)
    return type(col)(FLOAT, vals, col.null, nums)


def timestamps(col: Any) -> Any:
    """Times of an OTHER column holding timestamps (ISO-8601 text, datetimes)
    as an INT column of microseconds since the epoch, read by the general
    engine's `parse_time` (each distinct text once); a value it rejects is
    not a number (a bad_time row). `Unsupported` when some value is a number
    of seconds: which kind the stream has then depends on which came first,
    the general engine's to sort out."""
    values = col.values
    n = len(values)
    us = np.zeros(n, np.int64)
    ok = np.zeros(n, bool)
    null = col.null.copy()
    text = np.fromiter((type(v) is str for v in values), bool, n)
    if text.any():
        codes, uniques = pd.factorize(values[text])
        u_us, u_ok = _iso_utc(uniques)
        for i in np.flatnonzero(~u_ok).tolist():  # other spellings, offsets, bad text: one at a time
            t = _timestamp(uniques[i])
            if t is not None:
                u_us[i], u_ok[i] = t, True
        us[text] = u_us[codes]
        ok[text] = u_ok[codes]
    for i in np.flatnonzero(~text & ~null).tolist():
        if missing(values[i]):  # NaT: a missing time, as `frame_records` reads it
            null[i] = True
            continue
        t = _timestamp(values[i])
        if t is not None:
            us[i], ok[i] = t, True
    return Column(INT, us, null, ok & ~null)



def by_value(col: Any, kind: str | None) -> tuple[Column, str]:
    """Times of an OTHER column holding both kinds (seconds and timestamps, as
    numbers or text), each distinct value read by `parse_time`: as the general
    engine reads them one by one, the stream's kind (`kind`, else the first
    good row's) wins and a time of the other kind is a bad time."""
    values = col.values
    n = len(values)
    parsed: dict[Any, tuple[str, int | float] | None] = {}
    got: list[tuple[str, int | float] | None] = []
    for v in values.tolist():
        key = (type(v), v) if isinstance(v, (str, int, float)) and not isinstance(v, bool) else None
        if key is None or key not in parsed:
            try:
                p = parse_time(v) if v is not None else None
            except (TimeError, TypeError):
                p = None
            if key is not None:
                parsed[key] = p
        got.append(p if key is None else parsed[key])
    kind = kind or next((p[0] for p in got if p is not None), TIMESTAMP)
    ok = np.fromiter((p is not None and p[0] == kind for p in got), bool, n)
    dtype = np.int64 if kind == TIMESTAMP else np.float64
    vals = np.fromiter(((p[1] if p is not None and p[0] == kind else 0) for p in got), dtype, n)
    return Column(INT if kind == TIMESTAMP else FLOAT, vals, col.null, ok & ~col.null), kind


_ISO_UTC = (r"^(?P<s>\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d)"
            r"(?:\.(?P<f>\d{1,6}))?(?:Z|\+00:00)?$")



def _iso_utc(texts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(microseconds, ok) of ISO-8601 text in its common UTC spelling
    (`2024-05-01T12:00:00.123Z`, `+00:00` or no offset), vectorized with
    Arrow; `ok` is False for any other text, which the caller reads one at
    a time. A parsed date must keep its day of the month (Arrow would roll
    February 30 over into March 1; Python refuses it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = pa.array(texts, type=pa.string())
    parts = pc.extract_regex(arr, _ISO_UTC)
    whole = pc.struct_field(parts, "s")  # null where the text did not match (a child alone would be "")
    seconds = pc.strptime(whole, format="%Y-%m-%dT%H:%M:%S", unit="s", error_is_null=True)
    # the regex admits no hour past 23 and no second past 59, so only the day can roll over
    same = pc.equal(pc.day(seconds), pc.cast(pc.utf8_slice_codeunits(whole, 8, 10), pa.int64()))
    fraction = pc.cast(pc.utf8_rpad(pc.coalesce(pc.struct_field(parts, "f"), ""), 6, "0"), pa.int64())
    us = pc.add(pc.multiply(pc.cast(seconds, pa.int64()), US_PER_S), fraction)
    ok = pc.fill_null(same, False).to_numpy(zero_copy_only=False)
    return np.where(ok, pc.fill_null(us, 0).to_numpy(zero_copy_only=False), 0).astype(np.int64), ok.copy()


def frame_timestamps(events: Input, name: str) -> Any:
    """A DataFrame's datetime64 time column (naive: UTC) as an INT column of
    microseconds (floored, as `parse_time` does), NaT missing; else None."""
    frame = events.frame
    if frame is None or name not in frame.columns or not pd.api.types.is_datetime64_any_dtype(frame[name]):
        return None
    col = frame[name]
    if getattr(col.dt, "tz", None) is not None:
        col = col.dt.tz_convert("UTC").dt.tz_localize(None)
    null = col.isna().to_numpy()
    ns = col.to_numpy("datetime64[ns]").astype(np.int64)
    return Column(INT, np.where(null, 0, ns // 1000), null, ~null)


def _timestamp(v: Any) -> int | None:
    """Microseconds of a timestamp; None if `v` is no time at all."""
    try:
        kind, t = parse_time(v)
    except TimeError:
        return None
    if kind != TIMESTAMP:
        raise Unsupported("times of both kinds: seconds and timestamps")
    return int(t)

