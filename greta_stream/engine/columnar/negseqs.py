"""`NOT SEQ(C, D, ...)` of single events (NOTs of one between) on the columnar kernel (SEMANTICS section 3).

`SEQ(S+, NOT SEQ(C, D), E)` excludes an adjacency x -> y (x bound to S, y to E) when a match c, d of the
negated SEQ lies strictly between them: `x.time < c.time < d.time < y.time`, in the partition of the
common attributes, each part satisfying its own predicates. Let M(y) be the latest start of a match that
ends before y (the latest c.time over matches with d.time < y.time): the adjacency holds exactly when
`x.time >= M(y)`. So the step is a scanned store with one more order predicate (`plan.NOT_SEQ`)
comparing x's time with y's bound, and the match search is a few sorted passes: the latest start of a
chain ending at each event of a part is the running maximum of the previous part's, over its events
strictly before. With an edge predicate on a step (`NOT SEQ(C, D) WHERE C.v < NEXT(D).v`:
`plan.neg_edges`) it is the maximum over the previous part's events before it whose values the
comparison admits: a dominance query, a Fenwick tree of maxima over the value ranks filled in time order
(`dominance.py`): with two comparisons AND-ed on the step, a Fenwick tree over the first's ranks whose
nodes hold Fenwick trees over the second's; with up to five, one fewer over each half of the times
against the other, bit by bit, down to two; with more, a scan of the pairs within a window's length.
A NOT of one event between two parts
(`NOT SEQ(C, NOT E, D)`) keeps the previous part's events at or after the latest E before it: a range,
whose maximum a sparse table gives (`_range_max`); with an edge predicate across it
(`NOT SEQ(C, NOT E, D) WHERE C.v < NEXT(D).v`), that range of times is one more rank of the dominance
query (`Matches._since`). A leading or trailing one bounds the windows of a
trend's first or last event (`negkeys.seq_bounds`), as a leading or trailing `NOT N` of one event does
(`keys.negated_starts`). Where a part is keyed by an equivalence attribute, the walk runs over entries of
(partition, value) instead of events (`View`, built by `negkeys.py`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from greta_stream.engine.columnar.dominance import TREE_RANGES, dominance_max, dominance_max2, dominance_maxk, window_scan
from greta_stream.engine.columnar.keys import edge_values, partition_times
from greta_stream.engine.columnar.parts import (
    bound_groups,
    brackets,
    loop_ends,
    optional_groups,
    optional_spans,
)
from greta_stream.engine.columnar.plan import KernelPlan, State
from greta_stream.engine.columnar.prepare import Prepared, local_mask, subset
from greta_stream.engine.columnar.vector import attrs_of
from greta_stream.query import ast

Reached = tuple[State | None, np.ndarray, np.ndarray]  # a part a chain reached last, its events, their latest starts


@dataclass(frozen=True)
class View:
    """Entries of a match walk keyed by an equivalence attribute (`negkeys.py`): the prepared event of each,
    its code (partition and value), the entries of each part (by alias) and of the readers."""

    rows: np.ndarray
    code: np.ndarray
    members: dict[str, np.ndarray]
    readers: np.ndarray


def part_events(plan: KernelPlan, prep: Prepared, part: State) -> np.ndarray:
    """The prepared events of a negated SEQ's part: of its type, taken by its own predicates."""
    mine = prep.state == plan.types.index(part.type)
    mine &= local_mask(plan, prep.cols, np.full(len(prep.t), plan.state_of_neg(part)), slots=False)
    return np.flatnonzero(mine)


class Matches:
    """Matches of negated SEQs over the prepared events: chains of their parts' events (each part's own
    predicates), in the partitions of the common attributes, times compared by rank."""

    def __init__(self, plan: KernelPlan, prep: Prepared, view: View | None = None) -> None:
        self.plan, self.prep, self.view = plan, prep, view
        self.code, self.times, self.rank = partition_times(plan, prep)
        if view is not None:  # entries of its own: events at their values, readers at theirs (`negkeys.py`)
            self.code, self.rank = view.code, self.rank[view.rows]
        self._reach: dict[bool, np.ndarray] = {}  # `_reaches`, by direction
        self.edges: dict[tuple[str, str], list[tuple[tuple[str, ast.Expr, ast.Expr], ...]]] = {}
        for x, y, clause in plan.neg_edges:  # a step's clauses are OR-ed
            self.edges.setdefault((x, y), []).append(clause)

    def latest_starts(self, parts: tuple[State, ...]) -> np.ndarray:
        """Per event (per reader of the view): the time rank of the latest start of a match ending strictly
        before it (-1: none)."""
        return self._walk(parts, self.rank)

    def earliest_ends(self, parts: tuple[State, ...]) -> np.ndarray:
        """Per event (per reader): the time rank of the earliest end of a match starting strictly after it (-1: none):
        the latest start of the reversed SEQ over reversed time."""
        top = len(self.times) - 1
        got = self._walk(parts[::-1], top - self.rank, walked_back=True)
        return np.where(got >= 0, top - got, -1)

    def _walk(self, parts: tuple[State, ...], order: np.ndarray, walked_back: bool = False) -> np.ndarray:
        """Per event, the latest `order` at which a chain of `parts` (in walking order: `order` rises along
        it; `walked_back`: the SEQ's parts last first, over reversed time) starts, over the chains ending
        strictly before it; an edge predicate of a step (`neg_edges`) admits the step's pairs only. A Kleene
        plus over a SEQ among them bound at both ends is walked twice (`parts.bound_groups`): a chain
        through it holds one iteration or two."""
        key = self.code * (len(self.times) + 2) + order  # (partition, time) as one sortable int
        seq = parts[::-1] if walked_back else parts
        bound = set(bound_groups(seq, {(x, y) for x, y, _ in self.plan.neg_edges}))
        layout = _layout(seq, walked_back, lambda span, count: count[0] > 1 or span in bound)
        # the parts a chain may have reached last, (part, its events, their latest starts); None: none yet, a
        # chain starts
        reached = self._pass(parts, [(None, np.zeros(0, np.int64), np.zeros(0))], key, order, walked_back, layout)
        readers = np.arange(len(self.rank)) if self.view is None else self.view.readers
        got = np.max([_latest_before(key, self.code, src, val, readers) for _, src, val in reached], axis=0)
        return np.where(np.isfinite(got), got, -1).astype(np.int64)

    def _iterations(self, group: tuple[State, ...], lo: int, hi: int | None, key: np.ndarray, order: np.ndarray,
                    walked_back: bool, ends: list[Reached], parts: bool = True) -> list[Reached]:
        """The ends of chains through lo..hi iterations of a group (in walking order), `ends` those through one:
        (part, its events, per event the latest start of a chain ending there) of its last part, and of the
        ones before it that may end an iteration (`(SEQ(G, H?))+`: G and H). With nothing on the loop's steps
        from its ends back to its starts, a chain of k >= 2 iterations holds its first and last (and any
        between): the starts of two iterations where lo is 1, of lo else (`parts.bound_groups`). With an edge
        predicate there (`H.v < NEXT(G).v`), chains of exactly 2..hi iterations, or lo.. walked until no
        start rises. `parts`: the group's Kleene events are chained (`_chained`) and its optional parts
        skipped (False: a group of one Kleene event, `_chained`'s own)."""
        in_seq = group[::-1] if walked_back else group
        starts, stops = loop_ends([p.group for p in in_seq]) if parts else ([0], [0])
        looped = any((in_seq[e].alias, in_seq[b].alias) in self.edges for e in stops for b in starts)
        layout = _layout(in_seq, walked_back, lambda span, count: True, inside=True) if parts else Layout({}, {}, set())

        def again(ends: list[Reached]) -> list[Reached]:  # one iteration more after each chain
            return self._pass(group, ends, key, order, walked_back, layout, chained=parts)

        def merged(a: list[Reached], b: list[Reached]) -> list[Reached]:
            return [(p, s, np.maximum(v, w)) for (p, s, v), (_, _, w) in zip(a, b, strict=True)]

        if not looped:
            if lo == 1:
                return merged(ends, again(ends)) if hi is None or hi >= 2 else ends
            for _ in range(lo - 1):
                ends = again(ends)
            return ends
        best = ends if lo == 1 else [(p, s, np.full(len(v), -np.inf)) for p, s, v in ends]
        exact, j = ends, 1
        while j < (lo if hi is None else hi) and any(np.isfinite(v).any() for _, _, v in exact):
            exact, j = again(exact), j + 1
            best = merged(best, exact) if j >= lo else best
        while hi is None:  # lo or more: each walk one iteration more, until no start rises
            grown = merged(best, again(best))
            if all(np.array_equal(v, w) for (_, _, v), (_, _, w) in zip(grown, best, strict=True)):
                break
            best = grown
        return best

    def _pass(self, parts: tuple[State, ...], reached: list[Reached], key: np.ndarray, order: np.ndarray,
              walked_back: bool, layout: Layout, chained: bool = True) -> list[Reached]:
        """The parts a chain through `parts` (in walking order) may have reached last, from those it had
        (`reached`): each part steps from them, and past one that may match nothing (`NOT SEQ(C, D?, E)`: "?";
        `D*`, a group: "~") from the ones before it too; the groups ending at a part are walked there
        (`_iterations`, one inside another first), their ends its last part and the ones before it that an
        iteration may end at (`(SEQ(G, H?))+`: past H, G); past a group that may match nothing, what reached it.
        `chained`: its Kleene events inside groups are chained (`_chained`)."""
        before: dict[int, dict[int, list[Reached]]] = {}  # by an optional part's last and first, what reached it
        blockers: list[np.ndarray] = []  # the events of the NOTs since the previous part (`State.negated`)
        for at, part in enumerate(parts):
            for last in layout.skips.get(at, []):  # an optional part starts: what reached it, reached past it too
                before.setdefault(last, {})[at] = reached
            idx = self._events(part)
            if part.negated:
                blockers.append(idx)
                continue
            val = np.max([order[idx].astype(np.float64) if prev is None else self._step(
                key, order, walked_back, prev, part, src, got, idx, blockers) for prev, src, got in reached], axis=0)
            blockers = []
            val = self._chained(parts, at, key, order, walked_back, idx, val) if chained else val
            saved = before.pop(at, {})
            reached = [*(r for first, got in saved.items() if (first, at) not in layout.maybe_none for r in got),
                       (part, idx, val)]
            walked = {first: (lo, hi) for first, lo, hi in layout.groups.get(at, [])}
            for first in sorted({*walked, *(f for f in saved if (f, at) in layout.maybe_none)}, reverse=True):
                if first in walked:  # the groups ending here, one inside another first
                    reached = self._iterations(parts[first:at + 1], *walked[first], key, order, walked_back, reached)
                if (first, at) in layout.maybe_none:
                    reached = [*saved[first], *reached]
        return reached

    def _chained(self, parts: tuple[State, ...], at: int, key: np.ndarray, order: np.ndarray, walked_back: bool,
                 idx: np.ndarray, val: np.ndarray) -> np.ndarray:
        """Per event of `idx` (of the Kleene event `parts[at]` inside a group, "+"), the latest start of a chain
        through one or more of its events ending there (`val`: through one; `State.chain`: through lo..hi), as
        a group of one event (`_iterations`). Where something constrains it both where it starts and where it
        ends (`NOT SEQ((SEQ(C, D+))+, G) WHERE C.v < NEXT(D).v AND D.v > NEXT(G).v`: the first D of a chain is
        C's, the last G's), a chain may match where no single D does; else one D stands for any chain, and
        `val` is returned as it is (any part else too)."""
        part = parts[at]
        if "+" not in part.group:
            return val
        lo, hi = part.chain or (1, None)
        here = part.alias
        entry = at > 0 and parts[at - 1].negated or any(y == here and x != here for x, y in self.edges)
        leave = at + 1 < len(parts) and parts[at + 1].negated or any(x == here and y != here for x, y in self.edges)
        # at an end of its group, a step past it may cross a NOT outside the group, which `_iterations` (walking
        # the group alone) does not see: chained there whatever constrains it (a chain is a match, never wrong)
        if lo == 1 and not (entry and leave or "]" in part.group or "[" in part.group):
            return val
        return self._iterations((part,), lo, hi, key, order, walked_back, [(part, idx, val)], parts=False)[-1][2]

    def _events(self, part: State) -> np.ndarray:
        """The events of a part (the view's entries of it)."""
        return part_events(self.plan, self.prep, part) if self.view is None else self.view.members[part.alias]

    def _step(self, key: np.ndarray, order: np.ndarray, walked_back: bool, prev: State, part: State,
              src: np.ndarray, val: np.ndarray, idx: np.ndarray, blockers: list[np.ndarray]) -> np.ndarray:
        """Per event of `idx` (of `part`), the largest `val` of the events `src` (of `prev`) its step admits:
        strictly before it, with no event of `blockers` between, the step's edge predicates holding."""
        step = (part.alias, prev.alias) if walked_back else (prev.alias, part.alias)
        ors = self.edges.get(step)
        if ors is None:
            return (self._latest_unblocked(key, src, val, idx, np.concatenate(blockers), order) if blockers
                    else _latest_before(key, self.code, src, val, idx))
        # across a NOT: the events of `src` at or after the latest blocker, one range more
        since = (self._since(key, src, idx, np.concatenate(blockers), order) if blockers else None)
        return np.max([self._latest_admitted(e, key, src, val, idx, walked_back, since) for e in ors], axis=0)

    def _reaches(self, walked_back: bool) -> np.ndarray:
        """Per order (time rank, from the top walking back), the least order of an event within a window's
        length of it, on the side walked from (widened: it only bounds `dominance.window_scan`). An event farther
        off starts no match that matters: a reader's predecessor, or its window, lies nearer."""
        if walked_back not in self._reach:  # asked by each scanned search of a walk: made once a direction
            window = self.prep.window(self.plan)
            reach = window.within / window.den * 1.001
            times = self.times.astype(np.float64)
            top = len(times) - 1
            self._reach[walked_back] = (
                (top - (np.searchsorted(times, times + reach, "left") - 1))[::-1] if walked_back
                else np.searchsorted(times, times - reach, "right")).astype(np.int64)
        return self._reach[walked_back]

    def _latest_unblocked(self, key: np.ndarray, src: np.ndarray, val: np.ndarray, dst: np.ndarray,
                          blockers: np.ndarray, order: np.ndarray) -> np.ndarray:
        """`_latest_before` over the events of `src` with no event of `blockers` strictly between them and
        the event of `dst` (`NOT SEQ(C, NOT E, D)`): those at or after the latest blocker before it, a
        range of the partition's `src` in time order, whose maximum a sparse table gives."""
        last = _latest_before(key, self.code, blockers, order[blockers].astype(np.float64), dst)
        span = len(self.times) + 2
        so = np.argsort(key[src], kind="stable")
        skey = key[src][so]
        lo = np.searchsorted(skey, self.code[dst] * span + np.maximum(last, -1).astype(np.int64), side="left")
        hi = np.searchsorted(skey, key[dst], side="left")  # strictly before it
        return _range_max(val[so], lo, hi)

    def _since(self, key: np.ndarray, src: np.ndarray, dst: np.ndarray, blockers: np.ndarray,
               order: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        """A step across a NOT as one more range of `_dominance` (mode 0): an event of `src` is admitted
        when its `order` is at or after that of the latest blocker strictly before the event of `dst`
        (`NOT SEQ(C, NOT E, D)`: no E strictly between the C and the D), ranks counted from the top."""
        last = _latest_before(key, self.code, blockers, order[blockers].astype(np.float64), dst)
        top = len(self.times) + 1
        return 0, top - order[src], top + 1 - np.maximum(last, -1).astype(np.int64)

    def _latest_admitted(self, clause: tuple[tuple[str, ast.Expr, ast.Expr], ...], key: np.ndarray,
                         src: np.ndarray, val: np.ndarray, dst: np.ndarray, walked_back: bool,
                         since: tuple[int, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """`_latest_before` over the pairs a step's clause admits (up to five order comparisons AND-ed; `since`:
        and no blocker between them): per event of `dst`, the largest `val` of the events `src` of its
        partition strictly before it whose values compare with its own as each comparison says (walking
        back, `dst` holds X)."""
        x, y = (dst, src) if walked_back else (src, dst)
        rows = np.union1d(x, y)
        at = rows if self.view is None else self.view.rows[rows]
        cols = {a: subset(self.prep.cols[a], at) for c in clause for a in attrs_of(c[1]) | attrs_of(c[2])}
        got = np.full(len(dst), -np.inf)
        extra = [] if since is None else [since]
        # scanned pair by pair past `TREE_RANGES` ranges: a `!=` is then checked as it is, not as `<` or `>`
        scanned = sum(c[0] != "=" for c in clause) + len(extra) > TREE_RANGES
        for combo in itertools.product(*[self._alternatives(c, cols, rows, x, y, walked_back, scanned)
                                         for c in clause]):
            got = np.maximum(got, self._dominance((*combo, *extra), key, src, val, dst, walked_back))
        return got

    def _alternatives(self, edge: tuple[str, ast.Expr, ast.Expr], cols: dict, rows: np.ndarray, x: np.ndarray,
                      y: np.ndarray, walked_back: bool, scanned: bool) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """A comparison as alternatives (OR-ed) (mode, ranks of `src`, ranks of `dst`): mode 0 admits a src
        rank below the dst's, 1 at or below, 2 equal, 3 unequal. X's key against Y's probe (`keys.edge_values`);
        walking back, the reader is X, and ranks from the top down make a prefix again; `!=` is `<` or `>`
        (`scanned`: unequal, as `dominance.window_scan` checks it)."""
        xkey, probe, op = edge_values(self.plan, cols, np.zeros(len(rows), np.int64), edge, (0, 0))
        values = np.unique(np.concatenate([xkey, probe]))
        rank_x = np.searchsorted(values, xkey[np.searchsorted(rows, x)])
        rank_y = np.searchsorted(values, probe[np.searchsorted(rows, y)])
        src_rank, dst_rank = (rank_y, rank_x) if walked_back else (rank_x, rank_y)
        top = len(values) - 1
        return [(mode, top - src_rank, top - dst_rank) if flipped else (mode, src_rank, dst_rank)
                for mode, flipped in ([(3, walked_back)] if op == "!=" and scanned else
                                      [(0, walked_back), (0, not walked_back)] if op == "!=" else
                                      [({"<": 0, "<=": 1, "=": 2}[op], walked_back)])]

    def _dominance(self, combo: tuple[tuple[int, np.ndarray, np.ndarray], ...], key: np.ndarray, src: np.ndarray,
                   val: np.ndarray, dst: np.ndarray, walked_back: bool) -> np.ndarray:
        """Per event of `dst`, the largest `val` of the events `src` of its partition strictly before it
        that every (mode, src ranks, dst ranks) of `combo` admits: an equality refines the partition, at
        or below is below the next rank; one range left is `dominance_max`, two `dominance_max2`, more
        `dominance_maxk`."""
        scode, dcode = self.code[src], self.code[dst]
        ranged, unequal = [], []
        for mode, s, d in combo:
            if mode == 3:
                unequal.append((s, d))
            elif mode == 2:
                span = int(max(s.max(initial=0), d.max(initial=0))) + 1
                scode, dcode = scode * span + s, dcode * span + d
            else:
                ranged.append((s, d + mode))
        if not ranged:  # equalities only: the latest before it in the refined partition
            ranged.append((np.zeros(len(src), np.int64), np.ones(len(dst), np.int64)))
        got = np.full(len(dst), -np.inf)
        if not len(src) or not len(dst):
            return got
        span = len(self.times) + 2
        if len(ranged) > TREE_RANGES or unequal:  # the pairs of each code within a window's length, one by one
            so, do = np.lexsort((key[src], scode)), np.lexsort((key[dst], dcode))
            dorder = key[dst][do] % span
            reach = self._reaches(walked_back)[dorder]
            sides = [np.stack(c, 1) if c else np.zeros((n, 0), np.int64) for c, n in (
                ([r for r, _ in ranged], len(src)), ([r for _, r in ranged], len(dst)),
                ([r for r, _ in unequal], len(src)), ([r for _, r in unequal], len(dst)))]
            got[do] = window_scan(scode[so], key[src][so] % span, sides[0][so], val[so], dcode[do], dorder,
                                  sides[1][do], reach, sides[2][so], sides[3][do])
            return got
        if len(ranged) >= 3:  # sorts by code and order of its own, bit by bit
            return dominance_maxk(scode, key[src] % span, [s for s, _ in ranged], val,
                                  dcode, key[dst] % span, [d for _, d in ranged])
        so, do = np.lexsort((key[src], scode)), np.lexsort((key[dst], dcode))
        (s1, d1), *rest = ranged
        nr = int(max(s1.max(), d1.max())) + 1
        if rest:
            (s2, d2), = rest
            got[do] = dominance_max2(scode[so], key[src][so], s1[so], s2[so], val[so],
                                     dcode[do], key[dst][do], d1[do], d2[do])
        else:
            got[do] = dominance_max(scode[so], key[src][so], s1[so], val[so], dcode[do], key[dst][do], d1[do], 0, nr)
        return got

    def time_of(self, rank: np.ndarray) -> np.ndarray:
        """The times of ranks as float64 (-inf for -1)."""
        return np.where(rank >= 0, self.times[np.maximum(rank, 0)].astype(np.float64), -np.inf)


@dataclass(frozen=True)
class Layout:
    """Where a walk of parts (walking order) meets groups and parts that may match nothing (`Matches._pass`):
    the groups walked, by their last part, each (first, lo, hi), one inside another first; the parts that
    may match nothing, by their first, their lasts; and which of those (first, last) are groups."""

    groups: dict[int, list[tuple[int, int, int | None]]]
    skips: dict[int, list[int]]
    maybe_none: set[tuple[int, int]]


def _layout(seq: tuple[State, ...], walked_back: bool, walked: Callable[[tuple[int, int], tuple[int, int | None]], bool],
            inside: bool = False) -> Layout:
    """The `Layout` of parts in SEQ order (walked back: positions counted from the end), keeping the groups
    that `walked` says to walk ((first, last), (lo, hi)). `inside`: the parts of a group, whose own span
    (its marks at its ends) is left out."""
    n = len(seq)
    marks = [p.group for p in seq]

    def walking(span: tuple[int, int]) -> tuple[int, int]:
        return (n - 1 - span[1], n - 1 - span[0]) if walked_back else span

    whole = (0, n - 1) if inside else None
    groups: dict[int, list[tuple[int, int, int | None]]] = {}
    for i, j, counted, _ in sorted(brackets(marks, [p.counts for p in seq]), key=lambda b: b[1] - b[0]):
        count = counted or (1, None)
        if (i, j) != whole and walked((i, j), count):
            first, last = walking((i, j))
            groups.setdefault(last, []).append((first, *count))
    skips: dict[int, list[int]] = {}
    for span in optional_spans(marks):
        if span != whole:
            first, last = walking(span)
            skips.setdefault(first, []).append(last)
    return Layout(groups, skips, {walking(s) for s in optional_groups(marks) if s != whole})


def _range_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(values[lo[i]:hi[i]]) per i (-inf where empty): a sparse table of maxima over spans of 2**j."""
    out = np.full(len(lo), -np.inf)
    length = hi - lo
    table = [values]
    while len(values) and (1 << len(table)) <= len(values):
        half = 1 << (len(table) - 1)
        table.append(np.maximum(table[-1][:-half], table[-1][half:]))
    ok = np.flatnonzero(length > 0)
    level = np.floor(np.log2(np.maximum(length[ok], 1))).astype(np.int64)
    level -= (np.left_shift(1, level) > length[ok]).astype(np.int64)  # exact, whatever log2 rounds
    level += (np.left_shift(1, level + 1) <= length[ok]).astype(np.int64)
    for j in np.unique(level):
        sel = ok[level == j]
        out[sel] = np.maximum(table[j][lo[sel]], table[j][hi[sel] - (1 << int(j))])
    return out


def _latest_before(key: np.ndarray, code: np.ndarray, src: np.ndarray, val: np.ndarray,
                   dst: np.ndarray) -> np.ndarray:
    """Per event of `dst`: the largest `val` of the events `src` of its partition strictly before it."""
    out = np.full(len(dst), -np.inf)
    if not len(src) or not len(dst):
        return out
    order = np.argsort(key[src], kind="stable")
    skey, scode = key[src][order], code[src][order]
    best = pd.Series(val[order]).groupby(scode).cummax().to_numpy()
    at = np.searchsorted(skey, key[dst], side="left") - 1  # the last src event before it
    ok = at >= 0
    ok[ok] = scode[at[ok]] == code[dst[ok]]
    out[ok] = best[at[ok]]
    return out
