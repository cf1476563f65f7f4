"""The columnar engine: batch evaluation of Kleene queries on arrays (issue 7).

For the queries it covers, `greta_stream.evaluate` runs this instead of the
general engine and returns the same rows: a single Kleene pattern `X+`
(nested `+` included), partitions by any GROUP-BY and equivalence
attributes, at most one edge predicate and that one a comparison
`f(X) op g(NEXT(X))` with op in `< <= > >= =` over numbers, local
predicates of comparisons (numbers, or an attribute and a string) joined by
AND, OR and NOT, windows and slides of whole seconds on numeric times or
timestamps (microseconds since the epoch, as the general engine reads them),
and any aggregate. The flow:

    records / DataFrame --columns.py--> typed columns, bad rows -> dead letters
      --numpy--> windows per event, partitions, key ranks, sorted by (partition, time)
      --kernel.py (numba)--> rows per (group, window) of each block of windows
      --numpy--> summed per (group, window) --> result rows

What it cannot take exactly (a boolean attribute in a predicate, times of both kinds, a
SUM over a mix of ints and floats, numbers past 2**53 in a predicate,
...) raises `Unsupported` before any work, and the caller runs the general
engine. Results are identical to the general engine's: counts and sums are
exact integers (a float value v enters as the integer v * 2**S for the
smallest S that makes every value whole, in 31-bit digits), and a float SUM
or AVG is that exact value rounded once.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.compiler.expressions import edge_sides
from greta_stream.engine.columnar.columns import (
    EXACT_FLOAT,
    FLOAT,
    INT,
    MIXED,
    OTHER,
    Column,
    Input,
    Unsupported,
    missing,
    numeric,
)
from greta_stream.engine.columnar.vector import attrs_of
from greta_stream.engine.columnar.vector import evaluate as vector_eval
from greta_stream.engine.columnar.vector import predicate as vector_predicate
from greta_stream.engine.engine import _group_order
from greta_stream.engine.ingest import DeadLetter, FieldNames, Validator
from greta_stream.engine.plan import Metrics
from greta_stream.engine.timebase import NUMERIC, TIMESTAMP, US_PER_S, Timebase, TimeError, parse_time
from greta_stream.engine.values import divide
from greta_stream.query import ast

MAX_THREADS = 8
PARALLEL_EVENTS = 20_000  # below this, one thread
START_LIMBS = 2  # 64-bit counts first; the kernel widens by half whenever a count needs more
BLOCK_LANES = 32  # windows per block: a tree per (partition, block) of this many lanes
MAX_TREE_BYTES = 1 << 30  # per thread; a block's tree that would pass it is run again with fewer lanes
MAX_TIME = 2.0**50  # window arithmetic on float64 times is exact below this


@dataclass(frozen=True)
class State:
    """One position of the pattern: an event type under an alias, once or Kleene."""

    alias: str
    type: str
    kleene: bool


@dataclass(frozen=True)
class ColumnarPlan:
    """What the columnar engine needs of a query it covers."""

    cq: CompiledQuery
    states: tuple[State, ...]  # SEQ order; one state for `X+`
    edge: tuple[str, ast.Expr, ast.Expr] | None  # (op, predecessor side, new event side)
    edge_state: int  # the Kleene state the edge predicate links to itself (-1: none)
    within: int
    slide: int
    local: tuple[tuple[int, ast.Expr], ...] = ()  # (state, local predicate), AND-ed; len(states): the NOT's
    neg: State | None = None  # the leading `NOT N` of `SEQ(NOT N, ...)`, one event
    part_attrs: tuple[str, ...] = ()  # partition attributes of the positive events (common ones first)

    @property
    def types(self) -> tuple[str, ...]:
        """Types of the positive states, then the negated one."""
        return tuple(s.type for s in self.states) + ((self.neg.type,) if self.neg else ())

    @property
    def neg_state(self) -> int:
        """The state number the negated events get."""
        return len(self.states)

    def stores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """The kernel's wiring: (start, final, store_src, reads, keyed store);
        see `kernel.run`. A Kleene state reads its own vertices (by the
        index when the edge predicate is its), every later state the running
        total of the state before it."""
        n = len(self.states)
        src: list[int] = []
        keyed = -1
        total: dict[int, int] = {}  # state -> its running-total store
        reads: list[tuple[int, int]] = []
        for i, state in enumerate(self.states):
            if state.kleene:
                src.append(i)
                if i == self.edge_state:
                    keyed = len(src) - 1
                else:
                    total[i] = len(src) - 1
                reads.append((i, len(src) - 1))
        for i in range(1, n):
            if i - 1 not in total:
                src.append(i - 1)
                total[i - 1] = len(src) - 1
            reads.append((i, total[i - 1]))
        start = np.zeros(n, np.bool_)
        start[0] = True
        final = np.zeros(n, np.bool_)
        final[n - 1] = True
        table = np.zeros((n, len(src)), np.bool_)
        for i, j in reads:
            table[i, j] = True
        return start, final, np.array(src, np.int64), table, keyed


def columnar_plan(cq: CompiledQuery) -> ColumnarPlan:
    """The plan, or `Unsupported` saying why the query needs the general engine."""
    q = cq.query
    if q.trends:
        raise Unsupported("RETURN TRENDS")
    parts = q.pattern.parts if isinstance(q.pattern, ast.Seq) else (q.pattern,)
    neg = None
    if isinstance(parts[0], ast.Not):  # leading NOT of one event: a bound on where trends may start
        if not isinstance(parts[0].inner, ast.EventPattern):
            raise Unsupported("a leading NOT of more than one event")
        neg = State(parts[0].inner.alias, parts[0].inner.type, False)
        parts = parts[1:]
    states = []
    for part in parts:
        kleene = isinstance(part, ast.Kleene)
        while isinstance(part, ast.Kleene):
            part = part.inner
        if isinstance(part, ast.Not):
            raise Unsupported("negation")
        if not isinstance(part, ast.EventPattern):
            raise Unsupported("a Kleene plus or SEQ over more than one event type")
        states.append(State(part.alias, part.type, kleene))
    every = [*states, *([neg] if neg else [])]
    if len({s.type for s in every}) < len(every):
        raise Unsupported("one event type at several positions of the pattern")
    positive = frozenset(s.alias for s in states)
    run_attrs = []
    for c in cq.run_components:  # `[P.vehicle]`: a partition attribute of the positive events only
        if not positive <= c.aliases or (neg is not None and neg.alias in c.aliases):
            raise Unsupported("equivalence attributes of some positive aliases only")
        run_attrs.append(c.attr)
    index = {s.alias: i for i, s in enumerate(every)}

    def state_of(e: ast.Expr) -> int:
        aliases = {r.alias for r in ast.expr_refs(e)}
        if None in aliases and len(states) == 1:
            aliases = (aliases - {None}) | {states[0].alias}
        if len(aliases) != 1 or None in aliases:
            raise Unsupported("a predicate over several aliases")
        return index[aliases.pop()]

    conditions = [p.expr for p in q.where if isinstance(p, ast.Condition)]
    local = tuple((state_of(e), e) for e in conditions if not any(r.next for r in ast.expr_refs(e)))
    edges = [e for e in conditions if any(r.next for r in ast.expr_refs(e))]
    if len(edges) > 1:
        raise Unsupported("more than one edge predicate")
    edge, edge_state = None, -1
    if edges:
        edge = edge_sides(edges[0])
        if edge is None:
            raise Unsupported("the edge predicate is not a comparison of X with NEXT(X)")
        edge_state = state_of(edges[0])
        if edge_state >= len(states) or not states[edge_state].kleene:
            raise Unsupported("an edge predicate of an alias that is not Kleene")
    if (len(states) > 1 or neg) and any(f.kind in ("min", "max") for f in cq.fields):
        raise Unsupported("MIN or MAX over a SEQ pattern")  # the events in some trend: not every event
    within, slide = cq.window.within, cq.window.slide
    if within.denominator != 1 or slide.denominator != 1:
        raise Unsupported("WITHIN or SLIDE is not a whole number of seconds")
    return ColumnarPlan(cq, tuple(states), edge, edge_state, int(within), int(slide), local, neg,
                        (*cq.common, *run_attrs))


class _Result:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.dead: list[DeadLetter] = []
        self.metrics: dict[str, int] = {}


def evaluate_columnar(plan: ColumnarPlan, events: Input, fields: FieldNames) -> _Result:
    """Result rows, dead letters and metrics, as the general engine gives them;
    raise `Unsupported` (before any result) when the input is not for us."""
    out = _Result()
    prep = prepare(plan, events, fields)
    out.dead = prep.dead
    out.rows = compute(plan, prep, events)
    prep.metrics["partitions"] = 0
    prep.metrics["rows_emitted"] = len(out.rows)
    out.metrics = dict(prep.metrics)
    return out


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

    def window(self, plan: ColumnarPlan) -> tuple[int, int]:
        """(within, slide) in the unit of `t`."""
        return _window_in(plan, self.time_kind)


def _window_in(plan: ColumnarPlan, time_kind: str) -> tuple[int, int]:
    """(within, slide) in the unit of times of `time_kind`: seconds, or microseconds for timestamps."""
    scale = US_PER_S if time_kind == TIMESTAMP else 1
    return plan.within * scale, plan.slide * scale


def prepare(
    plan: ColumnarPlan,
    events: Input,
    fields: FieldNames,
    *,
    late_before: Any = -math.inf,
    late_before_of: Callable[[str], Any] | None = None,
    validator: Validator | None = None,
) -> Prepared:
    """Validate and type `events`; `Unsupported` when they are not for us.

    Events of the pattern type before `late_before` are dead-lettered as
    "late", as the general engine does in streaming; `validator` (the
    stream's, when given) words their dead letters. When these events fix
    the stream's unit of time (none came before), `late_before_of(unit)` is
    the watermark in that unit from the event after the one that fixed it
    on, as `add_declared` declares it again for the general engine."""
    cq = plan.cq
    n = events.n
    metrics = Metrics(events_in=n)
    validator = validator or Validator(cq, fields)
    dead: list[DeadLetter] = []

    # ---------------------------------------------- type, time, bad rows
    is_dict = events.is_dict()
    types = events.raw(fields.type)
    types = np.asarray(types, dtype=object) if not isinstance(types, np.ndarray) else types.astype(object)
    if pd.api.types.infer_dtype(types, skipna=False) == "string":  # every value a str: one C scan
        valid_type = (types != "") & is_dict
    else:
        valid_type = np.fromiter((isinstance(v, str) and v != "" for v in types), bool, n) & is_dict
    time = _frame_timestamps(events, fields.time)
    time_kind = NUMERIC if time is None else TIMESTAMP
    if time is None:
        time = events.column(fields.time)
    if time_kind == NUMERIC and time.kind == OTHER:
        if all(v is None or type(v) in (int, float, bool) for v in time.values.tolist()):
            time = _renumber(time)  # numbers, missing values and bools (bad times)
        else:
            time, time_kind = _timestamps(time), TIMESTAMP
    bad = ~valid_type | time.null | ~time.number
    finite = np.zeros(n, bool)
    finite[~bad] = np.isfinite(time.values[~bad])
    bad |= ~finite
    if time_kind == NUMERIC and (np.abs(np.where(bad, 0, time.values)) >= MAX_TIME).any():
        raise Unsupported("times beyond 2**50 seconds")
    kind_before = validator.time_kind
    if not bad.all():  # the first event with a type and a time fixes the stream's kind of time
        if validator.time_kind is None:
            validator.time_kind = time_kind
        elif validator.time_kind != time_kind:
            bad[:] = True  # every one is a bad_time (or worse): the validator says which
    state = np.full(n, -1, np.int64)
    for i, typ in enumerate(plan.types):
        state[valid_type & (types == typ)] = i
    is_t = state >= 0

    # ---------------------------------------------- attributes of the pattern types
    rows_t = np.flatnonzero(is_t & ~bad)
    st_t = state[rows_t]
    needed = set().union(*(cq.needed_by_type[t] for t in plan.types))
    numeric_attrs = set().union(*(cq.numeric_by_type[t] for t in plan.types))
    key_attrs = list(plan.part_attrs)
    edge_attrs = set() if plan.edge is None else attrs_of(plan.edge[1]) | attrs_of(plan.edge[2])
    cols: dict[str, Any] = {}
    row_bad = np.zeros(len(rows_t), bool)

    def of_types(attr: str, by_type: dict[str, Any]) -> np.ndarray:
        """Rows of the types whose events need `attr` (as `by_type` says)."""
        return np.isin(st_t, [i for i, t in enumerate(plan.types) if attr in by_type[t]])

    for attr in sorted(needed):
        col = events.column(attr, rows_t)
        need = of_types(attr, cq.needed_by_type)
        row_bad |= col.null & need
        if attr in key_attrs:
            if col.kind in (FLOAT, MIXED):
                row_bad |= np.isnan(col.values) & need
            elif col.kind == OTHER:
                row_bad |= np.fromiter(
                    (isinstance(v, (list, dict)) or (isinstance(v, float) and math.isnan(v)) for v in col.values),
                    bool, len(col.values),
                ) & need
        if attr in numeric_attrs:
            num = of_types(attr, cq.numeric_by_type)
            row_bad |= ~col.number & ~col.null & num
            if col.kind in (FLOAT, MIXED):
                row_bad |= ~np.isfinite(col.values) & ~col.null & num
            elif col.kind == OTHER:
                row_bad |= np.fromiter(
                    (isinstance(v, float) and not math.isfinite(v) for v in col.values), bool, len(col.values)) & num
        if col.kind in (FLOAT, MIXED) and col.null.any():  # absent where not needed: 0, never NaN
            col = Column(col.kind, np.where(col.null, 0.0, col.values), col.null, col.number)
        cols[attr] = col
    late = np.zeros(len(rows_t), bool)
    limit = late_before
    if late_before_of is not None and kind_before is None and validator.time_kind is not None:
        limit = max(late_before, late_before_of(validator.time_kind))
    if limit != -math.inf:
        late = ~row_bad & (time.values[rows_t] < limit)
        if limit != late_before:  # the event that fixed the unit was judged before it was declared again
            first = int(np.flatnonzero(~bad)[0])
            at = int(np.searchsorted(rows_t, first))
            if at < len(rows_t) and rows_t[at] == first:
                late[at] = not row_bad[at] and time.values[first] < late_before
    keep = ~row_bad & ~late
    good = rows_t[keep]
    bad_rows = np.sort(np.concatenate([np.flatnonzero(bad), rows_t[row_bad | late]]))
    is_late = np.zeros(n, bool)
    is_late[rows_t[late]] = True
    for i in bad_rows.tolist():
        dl = validator.validate(events.record(i), i)
        if is_late[i] and not isinstance(dl, DeadLetter):
            dl = DeadLetter("late", dl.attrs, f"time {dl.time} is behind the watermark {limit}")
        if not isinstance(dl, DeadLetter):
            raise Unsupported("a record the columnar checks reject is valid")  # keep the general engine's word
        dead.append(dl)
    for attr, col in list(cols.items()):
        cols[attr] = _subset(col, keep)
    for attr in numeric_attrs | edge_attrs:
        cols[attr] = _numbers(attr, cols[attr], exact_float=attr in edge_attrs)
    st_good = st_t[keep]
    processed = len(good)
    if plan.local:  # events failing their alias's local predicates are in no trend: drop them
        mask = _local_mask(plan, cols, st_good)
        good, st_good = good[mask], st_good[mask]
        cols = {a: _subset(c, mask) for a, c in cols.items()}
    others = int((valid_type & ~bad & ~is_t).sum())
    if others:
        metrics["events_other_type"] = others
    for dl in dead:
        metrics.dead_letter(dl.reason)
    metrics["events_processed"] = processed

    # ---------------------------------------------- windows
    t = time.values[good]
    kmin, kmax = _windows(t, *_window_in(plan, time_kind), time.kind == INT)
    return Prepared(good, st_good, t, kmin, kmax, cols, time.kind == INT, dead, metrics, time_kind)


def compute(plan: ColumnarPlan, prep: Prepared, events: Input, k_from: int | None = None,
            k_to: int | None = None, *, threads: int | None = None) -> list[dict[str, Any]]:
    """Result rows of the windows k_from <= k < k_to (all when None) over the
    prepared events; a window's row needs only the events in it. The kernel
    runs in `threads` threads (default: one per core)."""
    cq = plan.cq
    kmin, kmax = prep.kmin, prep.kmax
    kneg = _negated_starts(plan, prep)
    if k_from is not None:
        kmin = np.maximum(kmin, k_from)
    if k_to is not None:
        kmax = np.minimum(kmax, k_to - 1)
    inside = (kmin <= kmax) & (prep.state != plan.neg_state)
    t, kmin, kmax, st, kneg = prep.t[inside], kmin[inside], kmax[inside], prep.state[inside], kneg[inside]
    cols = {a: _subset(c, inside) for a, c in prep.cols.items()}
    pid, group_of_part, group_values = _partitions(cq, plan.part_attrs, cols, len(t))
    if group_values and cq.group_by:  # as the records spell them (an int next to floats stays an int)
        firsts = prep.good[inside][[g[1] for g in group_values]]
        raw = {a: events.raw(a, firsts) for a in cq.group_by}
        group_values = [tuple(_plain(raw[a][j]) for a in cq.group_by) for j in range(len(firsts))]
    else:
        group_values = [g[0] for g in group_values]

    # ---------------------------------------------- partitions, order
    order = np.lexsort((t, pid))
    t, kmin, kmax, pid, st, kneg = t[order], kmin[order], kmax[order], pid[order], st[order], kneg[order]
    cols = {a: _subset(c, order) for a, c in cols.items()}
    m = len(t)
    newt = np.ones(m, bool)
    if m > 1:
        newt[1:] = (pid[1:] != pid[:-1]) | (t[1:] != t[:-1])
    offsets = np.flatnonzero(np.r_[True, pid[1:] != pid[:-1]] if m else np.zeros(0, bool))
    offsets = np.append(offsets, m).astype(np.int64)
    gr, gq, point = _ranks(plan, cols, st)

    # ---------------------------------------------- aggregate cells
    cells, sums, mms = _cells(plan, cols, st)
    width = max((c[1].shape[1] for c in cells), default=1)
    mult = np.zeros((m, len(cells), width), np.uint64)
    for j, (_, digits) in enumerate(cells):
        mult[:, j, : digits.shape[1]] = digits
    mmval = np.stack([x[1] for x in mms], axis=1) if mms else np.zeros((m, 0), np.float64)
    mmax = np.array([x[0] == "max" for x in mms], dtype=np.bool_)
    ncell = 1 + len(cells)

    parts_k, parts_g, parts_c, parts_m = _run(plan, offsets, kmin, kmax, newt, st, kneg, gr, gq, point, mult,
                                              mmval, mmax, ncell, group_of_part, threads)
    return _rows(plan, parts_k, parts_g, parts_c, parts_m, cells, sums, mms, group_values, prep.time_kind)


# ------------------------------------------------------------------ helpers
def _subset(col: Any, sel: np.ndarray) -> Any:
    return type(col)(col.kind, col.values[sel], col.null[sel], col.number[sel])


def _local_mask(plan: ColumnarPlan, cols: dict[str, Any], st: np.ndarray) -> np.ndarray:
    """Rows that pass every local predicate of their alias."""

    class Numbers(dict):  # type: ignore[type-arg]
        def __missing__(self, attr: str) -> np.ndarray:
            self[attr] = _numbers(attr, cols[attr], exact_float=True).values.astype(np.float64)
            return self[attr]

    def raw(attr: str) -> list[Any]:
        col = cols[attr]
        return col.values.tolist()

    m = len(st)
    mask = np.ones(m, bool)
    with np.errstate(all="ignore"):  # rows of other aliases may divide by zero: they are not judged
        for i, e in plan.local:
            mask &= vector_predicate(e, Numbers(), raw, m) | (st != i)
    return mask


def _numbers(attr: str, col: Any, *, exact_float: bool) -> Any:
    """`col` as an INT/FLOAT/MIXED column, or `Unsupported`: it holds something
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


def _renumber(col: Any) -> Any:
    """Times of an OTHER column with numbers (and None/bools) only: the numbers as float64."""
    vals = np.zeros(len(col.values), np.float64)
    nums = col.number
    vals[nums] = np.asarray(col.values[nums].tolist(), dtype=np.float64)
    ints = [v for v in col.values[nums].tolist() if type(v) is int]
    if any(abs(v) > EXACT_FLOAT for v in ints):
        raise Unsupported("integer times beyond 2**53")
    return type(col)(FLOAT, vals, col.null, nums)


def _timestamps(col: Any) -> Any:
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


def _frame_timestamps(events: Input, name: str) -> Any:
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


def _windows(t: np.ndarray, within: int, slide: int, ints: bool) -> tuple[np.ndarray, np.ndarray]:
    """First and last window of each time: [k*slide, k*slide + within) holds t."""
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


NO_BOUND = -(2**62)  # no window bound from a negated event


def _negated_starts(plan: ColumnarPlan, prep: Prepared) -> np.ndarray:
    """Per event, the first window in which it may start a trend: with a
    leading `NOT N`, a window whose start is after the last N event before
    it in its partition of the common attributes (SEMANTICS.md section 3:
    excluded if `window.start <= n.time < first.time`)."""
    kneg = np.full(len(prep.t), NO_BOUND, np.int64)
    if plan.neg is None or not len(prep.t):
        return kneg
    code = _codes(prep.cols, plan.cq.common, len(prep.t))  # the NOT's partitions
    _, rank = np.unique(prep.t, return_inverse=True)
    key = code * (int(rank.max()) + 1) + rank  # (partition, time) as one sortable int
    is_neg = prep.state == plan.neg_state
    order = np.argsort(key[is_neg], kind="stable")
    neg_key = key[is_neg][order]
    _, last = _windows(prep.t[is_neg][order], *prep.window(plan), prep.int_time)
    starters = np.flatnonzero(~is_neg)
    before = np.searchsorted(neg_key, key[starters], side="left") - 1  # the latest N event earlier, if any
    same = before >= 0
    same[same] = code[is_neg][order][before[same]] == code[starters[same]]
    kneg[starters[same]] = last[before[same]] + 1  # windows after the last one starting at or before it
    return kneg


def _codes(cols: dict[str, Any], attrs: tuple[str, ...], m: int) -> np.ndarray:
    """One int per distinct combination of the attributes' values, 0.. in order of appearance."""
    code = np.zeros(m, np.int64)
    for a in attrs:
        c, uniques = pd.factorize(cols[a].values, sort=False)
        code, _ = pd.factorize(code * (len(uniques) + 1) + c, sort=False)
        code = code.astype(np.int64)
    return code


def _partitions(cq: CompiledQuery, part_attrs: tuple[str, ...], cols: dict[str, Any],
                m: int) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """Partition id per event, group id per partition, (group values, first event) per group id."""
    pid = _codes(cols, part_attrs, m)
    gid = _codes(cols, cq.group_by, m)
    gfirst = np.unique(gid, return_index=True)[1] if m else np.zeros(0, np.int64)
    n_parts = int(pid.max()) + 1 if m else 0
    group_of_part = np.zeros(n_parts, np.int64)
    group_of_part[pid] = gid
    group_values = [(tuple(_plain(cols[a].values[i]) for a in cq.group_by), i) for i in gfirst.tolist()]
    return pid, group_of_part, group_values


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v


def _ranks(plan: ColumnarPlan, cols: dict[str, Any], st: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Global key rank of each event of the edge predicate's state as a
    predecessor (gr) and what its probe admits: a prefix length of ranks
    (order ops) or one rank (point, -1: none); 0 for events of other states."""
    m = len(st)
    if plan.edge is None or m == 0:
        return np.zeros(m, np.int64), np.zeros(m, np.int64), True
    op, x_side, y_side = plan.edge
    mine = st == plan.edge_state
    values = {a: np.where(mine, c.values.astype(np.float64), 0.0) for a, c in cols.items() if c.kind != OTHER}
    key = np.broadcast_to(np.asarray(vector_eval(x_side, values), dtype=np.float64), (m,))
    probe = np.broadcast_to(np.asarray(vector_eval(y_side, values), dtype=np.float64), (m,))
    if op in (">", ">="):  # admitted keys are the large ones: reverse the order
        key, probe, op = -key, -probe, "<" if op == ">" else "<="
    keys = np.unique(key)
    gr = np.searchsorted(keys, key).astype(np.int64)
    if op == "=":
        idx = np.searchsorted(keys, probe)
        hit = (idx < len(keys)) & (keys[np.minimum(idx, len(keys) - 1)] == probe)
        return gr, np.where(hit, idx, -1).astype(np.int64), True
    gq = np.searchsorted(keys, probe, side="left" if op == "<" else "right").astype(np.int64)
    return gr, gq, False


DIGIT_BITS = 32  # a SUM value enters as a multiplier in digits of one limb each
MAX_DIGITS = 40


def _cells(plan: ColumnarPlan, cols: dict[str, Any], st: np.ndarray) -> tuple[list, dict, list]:
    """Exact cells with their own multipliers per event, in 32-bit digits
    (n, digits): COUNT(X) (multiplier 1) and, per SUM/AVG value, |value| *
    2**scale for the positive and for the negative values
    (`sums[field] = (scale, digits, signs, kind)`); MIN/MAX with their values."""
    cq, m = plan.cq, len(st)
    state_of = {s.alias: i for i, s in enumerate(plan.states)}
    cells: list[tuple[tuple[Any, ...], np.ndarray]] = []
    sums: dict[int, tuple[int, int, tuple[str, ...], str]] = {}
    mms: list[tuple[str, np.ndarray, int, str]] = []
    for i, f in enumerate(cq.fields):
        mine = st == state_of[f.alias]  # the field's alias: other events add nothing
        if f.kind == "count":
            cells.append(((i, "n"), mine.astype(np.uint64)[:, None]))
            continue
        col = _subset(cols[f.attr], mine) if len(plan.states) > 1 else cols[f.attr]
        if f.kind == "sum":
            if col.kind == MIXED:
                raise Unsupported(f"SUM over a mix of ints and floats ({f.attr!r})")
            scale, mag, shift, negative = _magnitudes(col)
            top = int((shift + 53).max()) if col.kind == FLOAT and len(col.values) else 64
            digits = max(1, -(-top // DIGIT_BITS))
            if digits > MAX_DIGITS:
                raise Unsupported(f"SUM values of {f.attr!r} span too many bits")
            signs = tuple(sg for sg, sel in (("+", ~negative), ("-", negative)) if (sel & (mag != 0)).any())
            for sg in signs:
                sel = negative if sg == "-" else ~negative
                own = np.stack([np.where(sel, _digit(mag, shift, d), 0).astype(np.uint64) for d in range(digits)],
                               axis=1)
                full = np.zeros((m, digits), np.uint64)
                full[mine] = own
                cells.append(((i, sg), full))
            sums[i] = (scale, digits, signs, col.kind)
        else:
            if col.kind != FLOAT and col.kind != INT:
                raise Unsupported(f"MIN/MAX over a mix of ints and floats ({f.attr!r})")
            if col.kind == INT and len(col.values) and np.abs(col.values).max() > 1 << 53:
                raise Unsupported(f"MIN/MAX over integers beyond 2**53 ({f.attr!r})")
            mms.append((f.kind, col.values.astype(np.float64), i, col.kind))
    return cells, sums, mms


def _magnitudes(col: Any) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """(scale S, |mantissa| as uint64, shift, negative) with |v| * 2**S == mantissa << shift exactly."""
    v = col.values
    if col.kind == INT:
        mag = np.abs(v.astype(np.int64)).astype(np.uint64)  # |-2**63| wraps to 2**63 as uint64: still right
        return 0, mag, np.zeros(len(v), np.int64), v < 0
    mant, exp = np.frexp(v)  # v = mant * 2**exp, 0.5 <= |mant| < 1
    mag = np.abs(np.ldexp(mant, 53)).astype(np.uint64)  # exact 53-bit integer mantissa
    exp = exp.astype(np.int64) - 53  # v = +-mag * 2**exp
    nz = mag != 0
    scale = int(max(0, -exp[nz].min())) if nz.any() else 0
    return scale, mag, np.where(nz, exp + scale, 0), v < 0


def _digit(mag: np.ndarray, shift: np.ndarray, d: int) -> np.ndarray:
    """Bits [32d, 32d + 32) of mag << shift (shift >= 0), vectorized."""
    mask = np.uint64((1 << DIGIT_BITS) - 1)
    lo = DIGIT_BITS * d - shift  # bit of mag that lands at the digit's bit 0
    right = np.where((lo >= 0) & (lo < 64), lo, 0).astype(np.uint64)
    left = np.where((lo < 0) & (lo > -DIGIT_BITS), -lo, 0).astype(np.uint64)
    out = np.where(lo >= 0, np.right_shift(mag, right), np.left_shift(mag, left)) & mask
    return np.where((lo >= 64) | (lo <= -DIGIT_BITS), np.uint64(0), out)


def _run(plan, offsets, kmin, kmax, newt, st, kneg, gr, gq, point, mult, mmval, mmax, ncell, group_of_part,  # noqa: ANN001, ANN202
         threads=None):
    """The kernel over every partition and block of windows, in threads over
    ranges of tasks of about equal events: (window, group id, cells, MIN/MAX)
    per (group, window), a window's row in two pieces where a block was split
    between threads (`_rows` adds them)."""
    from greta_stream.engine.columnar import kernel

    m = len(kmin)
    if m == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, ncell, 1), np.uint64), mmval[:0]
    kwidth = int((kmax - kmin).max()) + 1
    k_first = int(kmin.min())
    start, final, store_src, reads, keyed = plan.stores()
    nonzero = (mult != 0).any(axis=0)  # (cells - 1, digits)
    ndig = np.zeros(ncell, np.int64)
    for c in range(ncell - 1):
        ndig[c + 1] = int(np.flatnonzero(nonzero[c]).max()) + 1 if nonzero[c].any() else 0
    n_groups = int(group_of_part.max()) + 1 if len(group_of_part) else 1
    cores = os.cpu_count() or 1
    workers = min(cores, threads or cores, MAX_THREADS) if m >= PARALLEL_EVENTS else 1
    lanes = min(kwidth, BLOCK_LANES)
    while True:
        task = kernel.tasks(offsets, kmin, kmax, k_first, lanes)
        # contiguous ranges of tasks, about equal in events, one per thread
        work = np.cumsum(task[:, 3] - task[:, 2])
        cuts = np.searchsorted(work, np.linspace(0, work[-1], workers + 1)[1:-1])
        bounds = sorted({0, *cuts.tolist(), len(task)})

        def chunk(lo: int, hi: int, task: np.ndarray = task, lanes: int = lanes) -> tuple[np.ndarray, ...]:
            rows, ok, og, oc, om = kernel.run(
                task, lo, hi, k_first, lanes, group_of_part, n_groups, kmin, kmax, newt, st, kneg, start, final,
                store_src, reads, keyed, gr, gq, point, mult, ndig, mmval, mmax, ncell, START_LIMBS,
                MAX_TREE_BYTES // 8,
            )
            return (ok[:rows], og[:rows], oc[:rows], om[:rows]) if rows >= 0 else None

        ranges = list(zip(bounds[:-1], bounds[1:]))
        if len(ranges) == 1:
            pieces = [chunk(*ranges[0])]
        else:
            with ThreadPoolExecutor(len(ranges)) as pool:
                pieces = list(pool.map(lambda r: chunk(*r), ranges))
        if all(p is not None for p in pieces):
            break
        lanes = max(1, lanes // 4)  # a block's tree would pass MAX_TREE_BYTES: smaller blocks, same rows
    width = max(p[2].shape[2] for p in pieces)
    cells = np.concatenate([np.pad(p[2], ((0, 0), (0, 0), (0, width - p[2].shape[2]))) for p in pieces])
    return (np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces]), cells,
            np.concatenate([p[3] for p in pieces]))


_WARM: list[bool] = []


def warm_up() -> None:
    """Load the compiled kernels (numba's on-disk cache) in this process now,
    about a second, rather than in the middle of the first window that closes."""
    if _WARM:
        return
    _WARM.append(True)
    from greta_stream.engine.columnar import kernel

    one = np.zeros(1, np.int64)
    plan = ColumnarPlan(None, (State("x", "X", True),), None, -1, 1, 1)  # type: ignore[arg-type]
    _run(plan, np.array([0, 1], np.int64), one, one.copy(), np.ones(1, bool), one.copy(), one.copy(), one.copy(),
         one.copy(), False, np.zeros((1, 0, 1), np.uint64), np.zeros((1, 0), np.float64), np.zeros(0, np.bool_), 1,
         np.zeros(1, np.int64))
    kernel.normalize_rows(np.zeros((1, 1, 1), np.uint64))


def _rows(plan, ks, gids, cells, mm, cell_spec, sums, mm_spec, group_values, time_kind):  # noqa: ANN001, ANN202
    """Sum partial rows per (group, window) and build the result rows."""
    from greta_stream.engine.columnar import kernel

    cq = plan.cq
    if len(ks) == 0:
        return []
    order = np.lexsort((ks, gids))
    ks, gids, cells, mm = ks[order], gids[order], cells[order], mm[order]
    start = np.flatnonzero(np.r_[True, (ks[1:] != ks[:-1]) | (gids[1:] != gids[:-1])])
    extra = int(math.ceil(math.log2(len(ks) + 1) / kernel.LIMB_BITS)) + 1
    cells = np.add.reduceat(np.pad(cells, ((0, 0), (0, 0), (0, extra))), start, axis=0)
    kernel.normalize_rows(cells)
    mins = np.minimum.reduceat(mm, start, axis=0) if mm.shape[1] else mm[start]
    maxs = np.maximum.reduceat(mm, start, axis=0) if mm.shape[1] else mm[start]
    ks, gids = ks[start], gids[start]
    # the general engine's row order: window, then group values (numbers before strings)
    rank = np.empty(len(group_values), np.int64)
    rank[sorted(range(len(group_values)), key=lambda g: tuple(_group_order(v) for v in group_values[g]))] = np.arange(
        len(group_values))
    order = np.lexsort((rank[gids], ks))
    ks, gids, cells, mins, maxs = ks[order], gids[order], cells[order], mins[order], maxs[order]
    as_bytes = cells.astype("<u4")
    tb = Timebase.create(time_kind, cq.window.within, cq.window.slide)
    slot_cell = {spec: j + 1 for j, (spec, _) in enumerate(cell_spec)}
    slot_mm = {i: (j, kind, vkind) for j, (kind, _, i, vkind) in enumerate(mm_spec)}
    rows = []
    for r in range(len(ks)):
        def big(c: int, r: int = r) -> int:
            return int.from_bytes(as_bytes[r, c].tobytes(), "little")

        count = big(0)
        if not count:
            continue
        k = int(ks[r])
        row: dict[str, Any] = {"window_start": tb.export(tb.start(k)), "window_end": tb.export(tb.end(k))}
        row.update(zip(cq.group_columns, group_values[gids[r]]))
        for o in cq.outputs:
            if o.count_field is None:
                row[o.column] = count
                continue
            n_x = big(slot_cell[(o.count_field, "n")])
            if o.func == "COUNT":
                row[o.column] = n_x
                continue
            v = o.value_field
            if o.func in ("SUM", "AVG"):
                scale, digits, signs, vkind = sums[v]
                total = 0
                for sg in signs:
                    part = big(slot_cell[(v, sg)])
                    total += -part if sg == "-" else part
                if vkind == INT:
                    row[o.column] = total if o.func == "SUM" else divide(total, n_x)
                else:  # float values: the exact sum, rounded once, as the general engine does
                    row[o.column] = divide(total, 1 << scale) if o.func == "SUM" else divide(total, n_x << scale)
            else:
                j, kind, vkind = slot_mm[v]
                x = float(mins[r, j] if kind == "min" else maxs[r, j])
                row[o.column] = int(x) if vkind == INT else x
        rows.append(row)
    return rows


__all__ = ["ColumnarPlan", "Input", "Unsupported", "columnar_plan", "evaluate_columnar"]
