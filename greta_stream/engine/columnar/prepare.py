"""Records -> the typed, windowed events of the pattern's types (`prepare`), and dead letters.

The columnar engine's ingest: the checks of the general engine's `Validator`
(docs/QUERY_LANGUAGE.md sections 1 and 6), vectorized over columns; a row the checks
reject is judged once more by the validator itself, so dead letters carry
its reasons word for word. Input the engine cannot take exactly raises
`Unsupported` before any result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from greta_stream.engine.columnar.columns import (
    EXACT_FLOAT,
    FLOAT,
    FLOATING,
    INT,
    OTHER,
    Column,
    Input,
    Unsupported,
    numeric,
)
from greta_stream.engine.columnar.edges import coded_attrs
from greta_stream.engine.columnar.plan import KernelPlan
from greta_stream.engine.columnar.times import MAX_TIME, by_value, frame_timestamps, renumber, timestamps
from greta_stream.engine.columnar.vector import attrs_of
from greta_stream.engine.columnar.vector import predicate as vector_predicate
from greta_stream.engine.ingest import (
    OTHER_TYPES_KEPT,
    DeadLetter,
    FieldNames,
    Validator,
    future_bound,
    future_letter,
    late_letter,
)
from greta_stream.engine.plan import Metrics
from greta_stream.engine.timebase import (
    NUMERIC,
    TIMESTAMP,
    US_PER_S,
    Window,
    WindowRangeError,
    window_bounds,
    window_in_unit,
)


@dataclass
class Prepared:
    """The valid events of the pattern's types that can be in a trend (`good`:
    their rows in the input; state, time, windows and needed attributes
    aligned with it), and the dead letters of the other rows, in input order."""

    good: np.ndarray
    state: np.ndarray  # position of each event's type in the pattern
    t: np.ndarray
    kmin: np.ndarray
    kmax: np.ndarray
    cols: dict[str, Any]
    int_time: bool
    dead: list[DeadLetter]
    metrics: Metrics
    time_kind: str = NUMERIC  # TIMESTAMP: `t` is int microseconds since the epoch
    other_types: dict[str, int] = field(default_factory=dict)  # events of other types, by type (some names)
    typed: dict[str, int] = field(default_factory=dict)  # events of the pattern's types (valid or refused), by type

    def window(self, plan: KernelPlan) -> Window:
        """The plan's window spec in the unit of `t`."""
        return window_in(plan, self.time_kind)


def window_in(plan: KernelPlan, time_kind: str) -> Window:
    """The plan's window spec in the unit of times of `time_kind`: seconds, or
    microseconds for timestamps (whole numbers there for every plan)."""
    scale = US_PER_S if time_kind == TIMESTAMP else 1
    if type(plan.within) is int and type(plan.slide) is int:
        return Window(plan.within * scale, plan.slide * scale)
    return window_in_unit(plan.within, plan.slide, scale)


def prepare(
    plan: KernelPlan,
    events: Input,
    fields: FieldNames,
    *,
    late_before: Any = -math.inf,
    late_before_of: Callable[[str], Any] | None = None,
    validator: Validator | None = None,
    max_future_s: float | None = None,
    lateness_s: float = 0.0,
    newest: Any = -math.inf,
) -> Prepared:
    """Validate and type `events`; `Unsupported` when they are not for us.

    Events of the pattern type before `late_before` are dead-lettered as
    "late", as the general engine does in streaming; `validator` (the
    stream's, when given) words their dead letters. When these events fix
    the stream's unit of time (none came before), `late_before_of(unit)` is
    the watermark in that unit from the event after the one that fixed it
    on, as `Front.add_many` declares it again for the general engine.
    Events more than `max_future_s` ahead of the newest time that watermark
    stands for (plus `lateness_s`) or the stream took (`newest`), or of the
    batch's times that steps of at most `max_future_s` reach from there, are
    "future" (`ingest.future_bound`).

    1. types and times: rows without either are bad; the first good row
       fixes the stream's kind of time;
    2. the attributes the pattern's types need, checked as the validator
       checks them;
    3. lateness against the watermark;
    4. dead letters, worded by the validator;
    5. local predicates drop events that can be in no trend; windows per event.
    """
    cq = plan.cq
    n = events.n
    metrics = Metrics(events_in=n)
    validator = validator or Validator(cq, fields)
    types, valid_type = _types(events, fields.type)
    kind_before = validator.time_kind
    time, time_kind, bad = _times(events, fields.time, valid_type, validator)
    state = np.full(n, -1, np.int64)
    rows_of = _rows_by_type(events, fields.type, types, valid_type)
    for i, typ in enumerate(plan.types):
        state[rows_of.get(typ, _NONE)] = i
    is_t = state >= 0
    rows_t = np.flatnonzero(is_t & ~bad)
    st_t = state[rows_t]
    cols, row_bad = _attribute_columns(plan, events, rows_t, st_t)

    limit = late_before
    if late_before_of is not None and kind_before is None and validator.time_kind is not None:
        limit = max(late_before, late_before_of(validator.time_kind))
    late = _late(time.values, rows_t, row_bad, bad, limit, late_before)
    timely = ~row_bad & ~late
    ahead = future_bound(limit, max_future_s, validator.time_kind, lateness_s, time.values[rows_t][timely], newest)
    future = timely & (time.values[rows_t] > ahead)
    keep = ~row_bad & ~late & ~future
    good = rows_t[keep]
    bad_rows = np.sort(np.concatenate([np.flatnonzero(bad), rows_t[row_bad | late | future]]))
    is_late = np.zeros(n, np.int8)  # 1: late, 2: future
    is_late[rows_t[late]] = 1
    is_late[rows_t[future]] = 2
    dead = _dead_letters(validator, events, bad_rows, is_late, limit,
                         lambda record, time: future_letter(record, time, ahead, max_future_s or 0.0, lateness_s,
                                                            validator.time_kind))

    numeric_attrs = set().union(*(cq.numeric_by_type[t] for t in plan.types))
    edge_attrs = set().union(*(attrs_of(x) | attrs_of(y) for _, x, y in plan.all_edges))
    cols = {attr: subset(col, keep) for attr, col in cols.items()}
    coded = coded_attrs(plan.all_edges) - numeric_attrs
    for attr in numeric_attrs | edge_attrs:
        col = cols[attr]
        if attr in coded and col.kind == OTHER:
            col = numeric(col)
            if col.kind == OTHER:
                continue  # `X.k = NEXT(Y).k` over strings: compared by codes per kernel run (`keys.edge_values`)
        cols[attr] = numbers(attr, col, exact_float=attr in edge_attrs)
    st_good = st_t[keep]
    processed = len(good)
    if plan.local and not plan.contiguous:  # events failing their alias's local predicates are in no trend: drop
        # them (under contiguous they stay: they break trends; `driver.compute_cells` leaves them out as vertices)
        mask = local_mask(plan, cols, st_good)
        good, st_good = good[mask], st_good[mask]
        cols = {a: subset(c, mask) for a, c in cols.items()}
    other = valid_type & ~bad & ~is_t
    others = int(other.sum())
    other_types: dict[str, int] = {}
    if others:
        metrics["events_other_type"] = others
        other_types = _other_types(events, fields, types, other, bad, set(plan.types))
    for dl in dead:
        metrics.dead_letter(dl.reason)
    metrics["events_processed"] = processed
    t = time.values[good]
    try:
        kmin, kmax = window_bounds(t, window_in(plan, time_kind), time.kind == INT)
    except WindowRangeError as e:
        raise Unsupported(str(e)) from None
    typed = dict(zip(plan.types, np.bincount(st_t, minlength=len(plan.types)).tolist()))
    return Prepared(good, st_good, t, kmin, kmax, cols, time.kind == INT, dead, metrics, time_kind, other_types,
                    typed)


def _types(events: Input, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(the type field's values, whether each is a non-empty string of a dict record), read once per input."""
    key = ("types", name)
    if key not in events.memo:
        events.memo[key] = _read_types(events, name)
    return events.memo[key]  # type: ignore[no-any-return]


def _read_types(events: Input, name: str) -> tuple[np.ndarray, np.ndarray]:
    is_dict = events.is_dict()
    types = events.raw(name)
    types = np.asarray(types, dtype=object) if not isinstance(types, np.ndarray) else types.astype(object)
    if pd.api.types.infer_dtype(types, skipna=False) == "string":  # every value a str: one C scan
        return types, (types != "") & is_dict
    return types, np.fromiter((isinstance(v, str) and v != "" for v in types), bool, len(types)) & is_dict


def _times(events: Input, name: str, valid_type: np.ndarray, validator: Validator) -> tuple[Column, str, np.ndarray]:
    """(times as a column, their kind, rows without a type or a time); the
    first good row fixes the validator's (the stream's) kind of time. The
    column and its bad rows are read once per input, unless numbers and
    timestamps are mixed (each validator then reads them its own way)."""
    key = ("times", name)
    if key not in events.memo:
        events.memo[key] = _time_column(events, name)
    time, time_kind = events.memo[key]
    if time_kind is None:  # numbers among the timestamps: one value at a time, as the validator reads them
        time, time_kind = by_value(time, validator.time_kind)
        bad = _bad_times(time, time_kind, valid_type)
    else:
        if ("bad_times", name) not in events.memo:
            events.memo[("bad_times", name)] = _bad_times(time, time_kind, valid_type)
        bad = events.memo[("bad_times", name)].copy()
    if not bad.all():  # the first event with a type and a time fixes the stream's kind of time
        if validator.time_kind is None:
            validator.time_kind = time_kind
        elif validator.time_kind != time_kind:
            bad[:] = True  # every one is a bad_time (or worse): the validator says which
    return time, time_kind, bad


def _bad_times(time: Column, time_kind: str, valid_type: np.ndarray) -> np.ndarray:
    """Rows without a valid type or a time the validator takes."""
    bad = ~valid_type | time.null | ~time.number
    finite = np.zeros(len(bad), bool)
    finite[~bad] = np.isfinite(time.values[~bad])
    bad |= ~finite
    if time_kind == NUMERIC:  # out of parse_time's range: a bad_time, as the validator says
        bad |= np.abs(np.where(bad, 0, time.values)) >= MAX_TIME
    return bad


_NONE = np.zeros(0, np.int64)


def _rows_by_type(events: Input, name: str, types: np.ndarray, valid_type: np.ndarray) -> dict[Any, np.ndarray]:
    """The rows of each valid type, read once per input."""
    key = ("rows_by_type", name)
    if key not in events.memo:
        rows = np.flatnonzero(valid_type)
        codes, uniques = pd.factorize(types[rows])
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
        events.memo[key] = {uniques[i]: rows[order[bounds[i]:bounds[i + 1]]] for i in range(len(uniques))}
    return events.memo[key]  # type: ignore[no-any-return]


def _other_types(events: Input, fields: FieldNames, types: np.ndarray, other: np.ndarray, bad: np.ndarray,
                 mine: set[str]) -> dict[str, int]:
    """The most frequent types among `other` rows (some names). When the query's bad rows are
    the input's (`_times`), `other` is every row of another type and the counts are read once."""
    shared = events.memo.get(("bad_times", fields.time))
    if shared is None or not np.array_equal(bad, shared):
        counts = pd.Series(types[other]).value_counts()
    else:
        key = ("type_counts", fields.type, fields.time)
        if key not in events.memo:
            events.memo[key] = pd.Series(types[~shared]).value_counts()
        counts = events.memo[key]
        counts = counts[~counts.index.isin(list(mine))]
    return {str(k): int(v) for k, v in counts.head(OTHER_TYPES_KEPT).items()}


def int_times_possible(events: Input, name: str) -> bool:
    """Whether some time of `events` may be an int written among floats: False when the time column
    `_times` read whole is floats only."""
    read = events.memo.get(("times", name))
    return read is None or read[0].kind != FLOAT


def _time_column(events: Input, name: str) -> tuple[Column, str | None]:
    """The time field as a column and its kind, read once per input; kind None:
    numbers and timestamps mixed, read one value at a time by each query's validator."""
    time = frame_timestamps(events, name)
    if time is not None:
        return time, TIMESTAMP
    time = events.column(name)
    if time.kind != OTHER:
        return time, NUMERIC
    if all(v is None or type(v) in (int, float, bool) for v in time.values.tolist()):
        return renumber(time), NUMERIC  # numbers, missing values and bools (bad times)
    try:
        return timestamps(time), TIMESTAMP
    except Unsupported:
        return time, None


def _attribute_columns(plan: KernelPlan, events: Input, rows: np.ndarray,
                       st: np.ndarray) -> tuple[dict[str, Column], np.ndarray]:
    """The attributes the pattern's types need, at `rows` (of states `st`),
    and which rows fail the validator's checks of them (missing, not a
    finite number where aggregated, not a scalar where partitioned)."""
    cq = plan.cq
    needed = set().union(*(cq.needed_by_type[t] for t in plan.types))
    numeric_attrs = set().union(*(cq.numeric_by_type[t] for t in plan.types))
    key_attrs = set(plan.part_attrs) | {c.attr for c in cq.run_components}  # scalars, as the validator asks
    cols: dict[str, Column] = {}
    row_bad = np.zeros(len(rows), bool)

    def of_types(attr: str, by_type: dict[str, Any]) -> np.ndarray:
        """Rows of the types whose events need `attr` (as `by_type` says)."""
        return np.isin(st, [i for i, t in enumerate(plan.types) if attr in by_type[t]])

    for attr in sorted(needed):
        col = events.column(attr, rows)
        need = of_types(attr, cq.needed_by_type)
        row_bad |= col.null & need
        if attr in key_attrs:
            if col.kind in FLOATING:
                row_bad |= np.isnan(col.values) & need
            elif col.kind == OTHER:
                row_bad |= np.fromiter(
                    (isinstance(v, (list, dict)) or (isinstance(v, float) and math.isnan(v)) for v in col.values),
                    bool, len(col.values),
                ) & need
        if attr in numeric_attrs:
            num = of_types(attr, cq.numeric_by_type)
            row_bad |= ~col.number & ~col.null & num
            if col.kind in FLOATING:
                row_bad |= ~np.isfinite(col.values) & ~col.null & num
            elif col.kind == OTHER:
                row_bad |= np.fromiter(
                    (isinstance(v, float) and not math.isfinite(v) for v in col.values), bool, len(col.values)) & num
        if col.kind in FLOATING and col.null.any():  # absent where not needed: 0, never NaN
            col = Column(col.kind, np.where(col.null, 0.0, col.values), col.null, col.number)
        cols[attr] = col
    return cols, row_bad


def _late(t: np.ndarray, rows: np.ndarray, row_bad: np.ndarray, bad: np.ndarray, limit: Any,
          late_before: Any) -> np.ndarray:
    """Which good `rows` are before `limit`. When `limit` is the watermark
    declared again in the unit these events fixed, the event that fixed it
    was judged against `late_before` (it came before the unit was known)."""
    late = np.zeros(len(rows), bool)
    if limit == -math.inf:
        return late
    late = ~row_bad & (t[rows] < limit)
    if limit != late_before:
        first = int(np.flatnonzero(~bad)[0])
        at = int(np.searchsorted(rows, first))
        if at < len(rows) and rows[at] == first:
            late[at] = not row_bad[at] and t[first] < late_before
    return late


def _dead_letters(validator: Validator, events: Input, bad_rows: np.ndarray, is_late: np.ndarray,
                  limit: Any, future: Callable[[Any, Any], DeadLetter]) -> list[DeadLetter]:
    """The dead letters of `bad_rows`, in input order, worded by the validator
    itself (`is_late`: 1 late, 2 future, as `Front.admit` words them)."""
    dead = []
    for i in bad_rows.tolist():
        dl = validator.validate(events.record(i), i)
        if is_late[i] and not isinstance(dl, DeadLetter):
            dl = (late_letter(dl.attrs, dl.time, limit) if is_late[i] == 1
                  else future(dl.attrs, dl.time))
        if not isinstance(dl, DeadLetter):
            raise Unsupported("a record the columnar checks reject is valid")  # keep the general engine's word
        dead.append(dl)
    return dead


# ------------------------------------------------------------------ helpers
def subset(col: Any, sel: np.ndarray) -> Any:
    return type(col)(col.kind, col.values[sel], col.null[sel], col.number[sel])


def local_mask(plan: KernelPlan, cols: dict[str, Any], st: np.ndarray, *, slots: bool = True,
               read: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """Rows that pass every local predicate of their alias: `st` holds each
    row's slot (as prepared; a row of a type at several positions passes when
    one of them takes it), or its state (`slots=False`, once expanded).
    `read`: each attribute's numbers as read so far, shared by calls over
    the same `cols` (filled here)."""
    known: dict[str, np.ndarray] = {} if read is None else read

    class Numbers(dict):  # type: ignore[type-arg]
        def __missing__(self, attr: str) -> np.ndarray:
            if attr not in known:
                known[attr] = numbers(attr, cols[attr], exact_float=True).values.astype(np.float64)
            self[attr] = known[attr]
            return self[attr]

    def raw(attr: str) -> list[Any]:
        col = cols[attr]
        return col.values.tolist()

    m = len(st)
    numbers_of = Numbers()
    slot = plan.slot_of_state()
    if not slots or np.array_equal(slot, np.arange(len(slot))):  # a slot is a state
        mask = np.ones(m, bool)
        with np.errstate(all="ignore"):  # rows of other aliases may divide by zero: they are not judged
            for i, e in plan.local:
                mask &= vector_predicate(e, numbers_of, raw, m) | (st != i)
        return mask
    # a type at several positions: an event stays when it passes the predicates of one of its states
    mask = np.zeros(m, bool)
    with np.errstate(all="ignore"):
        for i in range(len(slot)):
            mine = st == slot[i]
            for j, e in plan.local:
                if j == i:
                    mine &= vector_predicate(e, numbers_of, raw, m)
            mask |= mine
    return mask


def numbers(attr: str, col: Any, *, exact_float: bool) -> Any:
    """`col` as a column of numbers (INT, FLOAT or a mix), or `Unsupported`: it holds something
    other than numbers, or NaN, or (exact_float) a number float64 rounds."""
    if col.kind == OTHER:
        col = numeric(col)
        if col.kind == OTHER:
            raise Unsupported(f"attribute {attr!r} is not a number everywhere")
    if col.kind != INT and np.isnan(col.values).any():
        raise Unsupported(f"attribute {attr!r} holds NaN")
    if exact_float and len(col.values) and np.abs(col.values).max() > (1 << 53 if col.kind == INT else EXACT_FLOAT):
        raise Unsupported(f"attribute {attr!r} beyond 2**53")
    return col

