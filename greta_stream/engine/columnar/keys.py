"""Partitions, GROUP-BY groups, key ranks of the edge predicate and NOT bounds, as arrays.

The kernel indexes predecessors by the rank of their key (GRETA section 7:
a tree over the keys of a partition); the ranks are global over the input,
so one tree layout serves every partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from greta_stream.engine.columnar import bounds
from greta_stream.engine.columnar.columns import OTHER, Unsupported
from greta_stream.engine.columnar.edges import coded_attrs
from greta_stream.engine.columnar.pairs import PAIR, Programs, programs
from greta_stream.engine.columnar.plan import NOT_SEQ, KernelPlan, State
from greta_stream.engine.columnar.prepare import Prepared, local_mask
from greta_stream.engine.columnar.valueruns import pair_codes
from greta_stream.engine.columnar.vector import evaluate as vector_eval
from greta_stream.engine.timebase import window_bounds
from greta_stream.query import ast

NO_BOUND = -(2**62)  # no window bound from a negated event



@dataclass(frozen=True)
class Negated:
    """The events of one `NOT N` against their readers (prepared events, or vertices in runs): a key is
    (partition, time rank) as one sortable int; N's keys sorted, with their partitions and times."""

    key: np.ndarray  # per reader
    code: np.ndarray  # per reader: its partition
    neg_key: np.ndarray
    neg_code: np.ndarray
    neg_t: np.ndarray


def negated_starts(plan: KernelPlan, prep: Prepared, neg: Negated | None = None) -> np.ndarray:
    """Per event (per reader of `neg`), the first window in which it may start a trend: with a
    leading `NOT N`, a window whose start is after the last N event before
    it in its partition of the common attributes (docs/QUERY_LANGUAGE.md section 3:
    excluded if `window.start <= n.time < first.time`)."""
    if plan.neg is None or not len(prep.t):
        return np.full(len(prep.t) if neg is None else len(neg.key), NO_BOUND, np.int64)
    neg = neg or _negated_keys(plan, prep, plan.neg)
    kneg = np.full(len(neg.key), NO_BOUND, np.int64)
    _, last = window_bounds(neg.neg_t, prep.window(plan), prep.int_time)
    before = np.searchsorted(neg.neg_key, neg.key, side="left") - 1  # the latest N event earlier, if any
    same = before >= 0
    same[same] = neg.neg_code[before[same]] == neg.code[same]
    kneg[same] = last[before[same]] + 1  # windows after the last one starting at or before it
    return kneg


NO_END = 2**62  # no window bound from a trailing NOT


def _negated_keys(plan: KernelPlan, prep: Prepared, n: State) -> Negated:
    """The events of `NOT n` against every prepared event, by partition of the common attributes (and of
    `plan.neg_keys`, where n has some)."""
    keyed = tuple(a for alias, a in plan.neg_keys if alias == n.alias)  # `[S.company, H.company]`: per value
    code, _, rank = partition_times(plan, prep, keyed)  # the NOT's partitions
    key = code * (int(rank.max()) + 1) + rank
    negs = negated_events(plan, prep, n)
    order = np.argsort(key[negs], kind="stable")
    negs = negs[order]
    return Negated(key, code, key[negs], code[negs], prep.t[negs])


def negated_events(plan: KernelPlan, prep: Prepared, n: State) -> np.ndarray:
    """The prepared events of `NOT n`: of its type, and where its type stands elsewhere too (or the
    preparation kept every event: contiguous) those its own predicates take."""
    is_neg = prep.state == plan.types.index(n.type)
    if plan.shared_slots or plan.contiguous:
        is_neg &= local_mask(plan, prep.cols, np.full(len(prep.t), plan.state_of_neg(n)), slots=False)
    return np.flatnonzero(is_neg)


def partition_times(plan: KernelPlan, prep: Prepared, keyed: tuple[str, ...] = ()
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per prepared event, its partition of the common attributes and `keyed` ones (the NOTs' partitions)
    as a code, and the distinct times with each event's rank among them: (code, times, rank)."""
    code = codes(prep.cols, (*plan.cq.common, *keyed), len(prep.t))
    times, rank = np.unique(prep.t, return_inverse=True)
    return code, times, rank.astype(np.int64)


def negated_ends(plan: KernelPlan, prep: Prepared, neg: Negated | None = None) -> np.ndarray:
    """Per event (per reader of `neg`), the last window in which it may end a trend: with a
    trailing `NOT N`, the windows that end at or before the first N event
    after it in its partition of the common attributes (docs/QUERY_LANGUAGE.md
    section 3: excluded if `last.time < n.time < window.end`)."""
    if plan.trail is None or not len(prep.t):
        return np.full(len(prep.t) if neg is None else len(neg.key), NO_END, np.int64)
    neg = neg or _negated_keys(plan, prep, plan.trail)
    kend = np.full(len(neg.key), NO_END, np.int64)
    after = np.searchsorted(neg.neg_key, neg.key, side="right")  # the first N event later, if any
    has = after < len(neg.neg_key)
    has[has] = neg.neg_code[after[has]] == neg.code[has]
    first, _ = window_bounds(neg.neg_t, prep.window(plan), prep.int_time)
    kend[has] = first[after[has]] - 1  # windows before the first one holding that N event
    return kend


def generations(plan: KernelPlan, prep: Prepared) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per middle `NOT N` (in `plan.mids` order), per event: how many N
    events of its partition of the common attributes lie at or before its
    time, and before it. A vertex x and a later event y are adjacent across
    the NOT iff no N lies strictly between them: x's first count equals y's
    second (as global positions among the sorted N keys, which compare
    within one partition)."""
    if not len(prep.t):
        return [(np.zeros(0, np.int64), np.zeros(0, np.int64)) for _ in plan.mids]
    return [generation(_negated_keys(plan, prep, n)) for _, n in plan.mids]


def generation(neg: Negated) -> tuple[np.ndarray, np.ndarray]:
    """Per reader: how many N events of the sorted keys lie at or before its key, and before it."""
    return (np.searchsorted(neg.neg_key, neg.key, side="right").astype(np.int64),
            np.searchsorted(neg.neg_key, neg.key, side="left").astype(np.int64))


def run_negations(plan: KernelPlan, prep: Prepared, rep: np.ndarray, st: np.ndarray, values: dict[str, np.ndarray],
                  bounds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, ...]:
    """(kneg, kend, gjoin, gread) of the vertices in runs (events `rep`, states `st`) with the NOTs keyed by
    a run's attribute (`[a.k, e.k]` of `SEQ(A a, B b, NOT E e, C c)`, b free) taken per vertex: an E
    bounds the vertices of the run of its value (`values[alias]`: per vertex, its run's value) only."""
    kneg, kend, gjoin, gread = bounds
    common, _, rank = partition_times(plan, prep)
    for alias, vals in values.items():
        n = next(n for n in plan.negs if n.alias == alias)
        attr = next(r.attr for r in plan.value_runs if alias in r.negated)
        negs = negated_events(plan, prep, n)
        both = pd.Series(np.concatenate([np.asarray(vals, object), np.asarray(prep.cols[attr].values[negs], object)]))
        vcode = pd.factorize(both, sort=False)[0]  # 1 and 1.0 one value, as `==` says
        code = pair_codes(np.concatenate([common[rep], common[negs]]), vcode)
        key = code * (int(rank.max(initial=0)) + 1) + np.concatenate([rank[rep], rank[negs]])
        m = len(rep)
        order = np.argsort(key[m:], kind="stable")
        neg = Negated(key[:m], code[:m], key[m:][order], code[m:][order], prep.t[negs][order])
        if n is plan.neg:
            kneg = negated_starts(plan, prep, neg)
        elif n is plan.trail:
            kend = negated_ends(plan, prep, neg)
        else:
            i = next(i for i, mid in plan.mids if mid is n)
            at_or_before, before = generation(neg)
            gjoin, gread = np.where(st == i, at_or_before, gjoin), np.where(st == i + 1, before, gread)
    return kneg, kend, gjoin, gread


def codes(cols: dict[str, Any], attrs: tuple[str, ...], m: int) -> np.ndarray:
    """One int per distinct combination of the attributes' values, 0.. in order of appearance."""
    code = np.zeros(m, np.int64)
    for a in attrs:
        c, uniques = pd.factorize(cols[a].values, sort=False)
        code, _ = pd.factorize(code * (len(uniques) + 1) + c, sort=False)
        code = code.astype(np.int64)
    return code


def partitions(group_by: tuple[str, ...], part_attrs: tuple[str, ...], cols: dict[str, Any],
               m: int, pid: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """Partition id per event (`pid` where given: finer ones), group id per partition, (group values,
    first event) per group id."""
    pid = codes(cols, part_attrs, m) if pid is None else pid
    gid = codes(cols, group_by, m)
    gfirst = np.unique(gid, return_index=True)[1] if m else np.zeros(0, np.int64)
    n_parts = int(pid.max()) + 1 if m else 0
    group_of_part = np.zeros(n_parts, np.int64)
    group_of_part[pid] = gid
    group_values = [(tuple(plain(cols[a].values[i]) for a in group_by), i) for i in gfirst.tolist()]
    return pid, group_of_part, group_values


def plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v


def ranks(plan: KernelPlan, cols: dict[str, Any], st: np.ndarray, edge: tuple[str, Any, Any] | None = None,
          states: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray, bool]:
    """Global key rank of each event of the edge predicate's state as a
    predecessor (gr) and what its probe admits: a prefix length of ranks
    (order ops) or one rank (point, -1: none); 0 for events of other states.
    `edge`: one of the plan's edge predicates (default: the indexed one),
    between the states `states` (predecessor, event; default: its Kleene loop)."""
    m = len(st)
    edge = plan.edge if edge is None else edge
    if edge is None or m == 0:
        return np.zeros(m, np.int64), np.zeros(m, np.int64), True
    key, probe, op = edge_values(plan, cols, st, edge, states)
    src, dst = states if states is not None else (plan.edge_state, plan.edge_state)
    mine = (st == src) | (st == dst)
    if mine.all():
        return _ranks(key, probe, op)
    # only the edge's states join or probe its index: the others' ranks are never read (0: admits none)
    gr, gq = np.zeros(m, np.int64), np.full(m, -1 if op == "=" else 0, np.int64)
    gr[mine], gq[mine], point = _ranks(key[mine], probe[mine], op)
    return gr, gq, point


def _ranks(key: np.ndarray, probe: np.ndarray, op: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """(key ranks, probes, is equality) of `ranks`, over the rows given."""
    keys, gr = _ranked(key)
    if np.array_equal(key, probe):  # one attribute on both sides (`S.price > NEXT(S).price`): a probe is a key
        return gr, (gr + 1 if op == "<=" else gr), op in ("=", "!=")
    if op in ("=", "!="):  # the probe's key rank, -1 when no key equals it
        idx = np.searchsorted(keys, probe)
        hit = (idx < len(keys)) & (keys[np.minimum(idx, len(keys) - 1)] == probe)
        return gr, np.where(hit, idx, -1).astype(np.int64), True
    gq = np.searchsorted(keys, probe, side="left" if op == "<" else "right").astype(np.int64)
    return gr, gq, False


ORDER, EQUAL, UNEQUAL, PAIRED = 0, 1, 2, 3  # how a scanned edge predicate compares (`propagate.scan`)


def all_ranks(plan: KernelPlan, cols: dict[str, Any],
              st: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ranks, probes, comparison kind, scan) of every scanned edge predicate, one
    column each (`KernelPlan.scan_edges`); empty columns without a scan. The kind
    is ORDER (`rank < probe`), EQUAL (`rank == probe`), UNEQUAL (`!=`: `rank !=
    probe`, where a probe no key equals is -1 and admits every key) or PAIRED (its
    pair program, `pair_programs`, without ranks)."""
    m = len(st)
    if not plan.scan_edges:  # no scan, or scans without predicates (a stricter selection strategy's)
        return np.zeros((m, 0), np.int64), np.zeros((m, 0), np.int64), np.zeros(0, np.int8), np.zeros(0, np.int64)
    none = (np.zeros(m, np.int64), np.zeros(m, np.int64), False)  # a negated SEQ's: filled by `negkeys.fill_ranks`
    got = [none if e[0] in (NOT_SEQ, PAIR) else ranks(plan, cols, st, e, (plan.scans[j].src, plan.scans[j].dst))
           for j, e in plan.scan_edges]
    kinds = [PAIRED if e[0] == PAIR else UNEQUAL if e[0] == "!=" else EQUAL if g[2] else ORDER
             for (_, e), g in zip(plan.scan_edges, got)]
    return (np.stack([g[0] for g in got], axis=1), np.stack([g[1] for g in got], axis=1),
            np.array(kinds, np.int8), np.array([j for j, _ in plan.scan_edges], np.int64))


def pair_programs(plan: KernelPlan, cols: dict[str, Any], st: np.ndarray) -> Programs:
    """The programs of the plan's pair comparisons (`pairs.py`), one slot per scanned edge predicate."""
    read = {r.attr for _, e in plan.scan_edges if e[0] == PAIR for r in ast.expr_refs(e[1])}
    values = {a: cols[a].values.astype(np.float64) for a in read}
    return programs([(e, plan.scans[j].src, plan.scans[j].dst) for j, e in plan.scan_edges], values, st)


def _codes_of(attr: str, values: np.ndarray) -> np.ndarray:
    """Values compared for equality (strings, numbers beside them) as float64 codes, equal where Python's
    `==` holds (1 and 1.0 and True alike, 1 and '1' apart), over the events of one kernel run."""
    try:
        codes = pd.factorize(values, use_na_sentinel=True)[0]
    except TypeError:  # an unhashable value (a list, an object)
        raise Unsupported(f"attribute {attr!r} holds values that are neither numbers nor strings") from None
    if (codes < 0).any():  # NaN, which equals nothing, not even itself
        raise Unsupported(f"attribute {attr!r} holds NaN")
    return codes.astype(np.float64)


def _ranked(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys sorted, and each key's index among them (as
    `np.unique` and `np.searchsorted` give them, from one argsort)."""
    if not len(key) or np.isnan(key).any():
        keys = np.unique(key)
        return keys, np.searchsorted(keys, key).astype(np.int64)
    order = np.argsort(key)
    ordered = key[order]
    new = np.empty(len(key), bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])  # -0.0 and 0.0 are one key, as in np.unique
    gr = np.empty(len(key), np.int64)
    gr[order] = np.cumsum(new) - 1
    return ordered[new], gr


def edge_values(plan: KernelPlan, cols: dict[str, Any], st: np.ndarray, edge: tuple[str, Any, Any] | None = None,
                states: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray, str]:
    """(key, probe, op) of the edge predicate per event, as float64: a
    predecessor u admits event v iff `key[u] op probe[v]`, op one of `< <= =`
    (`>` and `>=` are turned around by negating both sides)."""
    m = len(st)
    edge = plan.edge if edge is None else edge
    assert edge is not None  # called only for a plan with an edge predicate
    op, x_side, y_side = edge
    src, dst = states if states is not None else (plan.edge_state, plan.edge_state)
    mine = (st == src) | (st == dst)
    values = {a: np.where(mine, c.values.astype(np.float64), 0.0) for a, c in cols.items() if c.kind != OTHER}
    for a in coded_attrs((edge,)) & {a for a, c in cols.items() if c.kind == OTHER}:  # strings: codes
        values[a] = np.where(mine, _codes_of(a, cols[a].values), 0.0)
    key = np.broadcast_to(np.asarray(vector_eval(x_side, values), dtype=np.float64), (m,))
    if op in (bounds.UP, bounds.DOWN):  # `S.price - NEXT(S).price > 0.5`: key >= T (or <= T) per successor
        assert isinstance(y_side, ast.Binary)  # the comparison as written (`bounds.bounded`)
        probe = bounds.threshold(y_side, x_side, op == bounds.UP, values, key)
        op = ">=" if op == bounds.UP else "<="
    else:
        probe = np.broadcast_to(np.asarray(vector_eval(y_side, values), dtype=np.float64), (m,))
    if op in (">", ">="):  # admitted keys are the large ones: reverse the order
        key, probe, op = -key, -probe, "<" if op == ">" else "<="
    return key, probe, op
