"""Equivalence attributes of aliases that stand apart in the pattern: one run of vertices per value.

`SEQ(NOT C, A, B, D) WHERE [A.volume, D.volume]`: a trend's A and D agree on volume, and B is free. No
step of the pattern goes from A to D, so no edge predicate can say it (`parts.same_value_edges` does where
the aliases stand next to each other). Instead each partition is split into runs, one per value:

- a vertex of a state of the component (A, D) goes to the run of its own value;
- a vertex of any other state (B) goes to the runs of its partition;
- then a vertex stays in a run only where every *required* state of the component (one that every trend
  has: A and D) has a vertex of that run in a window of its own, on the side the pattern puts it (A at
  or before B, D at or after; either side inside a looped group). A trend's vertices pass that test, so
  this only leaves out vertices that no trend of the run holds.

A trend's events then lie in one run, the run of its component's value, and each trend counts once. The
rows of a group add up over its runs as they do over its partitions. Under the stricter strategies a
candidate lies in the trend's run (SEMANTICS section 8), so there every such attribute is a run, even of
aliases next to each other; a vertex the test leaves out is a candidate of no trend of the run (lying
between two of a trend's events in its window, it has the trend's required vertices on their sides).

The negated events are not split. An unkeyed NOT's bounds are computed per partition before; one keyed
by the run's attribute (`[L.user, O.user]` of `SEQ(Login L, Stock S+, NOT Logout O)`) bounds the vertices
of its value's run only, free ones included, after the split (`keys.run_negations`; where the attribute
applies to every positive alias it is a partition attribute instead, and the NOT `KernelPlan.neg_keys`).

This is what the general engine's sub-partitions do event by event (`engine/partition.py`). The cost is
the free vertices times the runs near them on both sides: with a rare type (a Halt) required, about one
run each; with only frequent types, about as many as the values near each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.columnar.columns import Unsupported
from greta_stream.engine.columnar.parts import State, same_value_edges
from greta_stream.query import ast

BEFORE, EITHER, AFTER = -1, 0, 1  # where a required vertex of a trend stands, in time, from another one of it


@dataclass(frozen=True)
class ValueRun:
    """One equivalence attribute of aliases apart: its attribute, the states of its aliases, the ones among
    them that every trend has (`required`), and for each of those where its vertex stands from a vertex of
    each state of the pattern (`sides[i][state]`: BEFORE it, AFTER it, or EITHER inside a looped group)."""

    attr: str
    states: frozenset[int]
    required: tuple[int, ...]
    sides: tuple[tuple[int, ...], ...]
    negated: tuple[str, ...] = ()  # single negated events keyed by it: each bounds its value's run (`keys.run_negations`)


def components(cq: CompiledQuery, states: Sequence[State], negs: Sequence[State], loops: Sequence[tuple[int, int]],
               skips: Sequence[tuple[int, int]], counts: Sequence[tuple[int, int, int | None]],
               seqs: Sequence[tuple[frozenset[str], str]]) -> tuple[list[str], list[ast.Expr], list[ValueRun],
                                                                    list[tuple[str, str]]]:
    """The equivalence attributes of some aliases only, as the plan takes them: (partition attributes of
    every positive alias, edge predicates `X.k = NEXT(Y).k` of aliases next to each other, runs of aliases
    apart, (alias, attribute) of each negated event keyed by one: a single one keyed by an attribute of
    every positive alias, or a part of a negated SEQ, `seqs` (its aliases, the alias reading it));
    `Unsupported` for the rest."""
    strategy = cq.query.strategy
    positive, negated = frozenset(s.alias for s in states), frozenset(n.alias for n in negs)
    singles = negated.difference(*(s for s, _ in seqs))
    run_attrs: list[str] = []
    same: list[ast.Expr] = []
    runs: list[ValueRun] = []
    keyed: list[tuple[str, str]] = []
    for c in cq.run_components:  # `[P.vehicle]`: a partition attribute of the positive events only
        if strategy == ast.ANY_MATCH and reads_own(states, loops, skips, counts, seqs, c.aliases & positive,
                                                   c.aliases & negated):
            # `[E.price, D.price]` of `SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E)`: E, once in every trend,
            # reads the negated SEQ; its own price is the trend's, no run needed (`negkeys.py`)
            keyed += [(a, c.attr) for a in sorted(c.aliases & negated)]
            continue
        if c.aliases & negated and not positive <= c.aliases or strategy == ast.CONTIGUOUS:
            # `[L.user, O.user]` of `SEQ(Login L, Stock S+, NOT Logout O)`: a run per value, an O bounding its
            # value's run only; under contiguous every such attribute (an event of another run breaks
            # contiguity as well: the breakers are of the attributes of every alias, `previous_stamps`); a
            # negated SEQ's part keyed by it matches for its value's run only (`negkeys.py`)
            runs.append(value_run(states, loops, skips, counts, c.aliases & positive, c.attr,
                                  tuple(sorted(c.aliases & singles))))
            keyed += [(a, c.attr) for a in sorted(c.aliases & negated - singles)]
            continue
        if c.aliases & negated:  # `[S.company, H.company]` of `SEQ(NOT Halt H, Stock S+, NOT Suspend X)`:
            keyed += [(a, c.attr) for a in sorted(c.aliases & negated)]  # partitions by it, X's bound them all
        if positive <= c.aliases:
            run_attrs.append(c.attr)
        elif strategy != ast.ANY_MATCH:  # a candidate lies in the trend's run (SEMANTICS section 8): a run
            runs.append(value_run(states, loops, skips, counts, c.aliases, c.attr))
        else:  # `[a.k]` of some positive aliases: the same value along every step between them, or
            try:  # where they stand apart (`[A.k, D.k]` of `SEQ(A, B, D)`) a run per value
                same += same_value_edges(states, loops, skips, c.aliases, c.attr)
            except Unsupported:
                runs.append(value_run(states, loops, skips, counts, c.aliases, c.attr))
    return run_attrs, same, runs, keyed


def reads_own(states: Sequence[State], loops: Sequence[tuple[int, int]], skips: Sequence[tuple[int, int]],
              counts: Sequence[tuple[int, int, int | None]], seqs: Sequence[tuple[frozenset[str], str]],
              positive: frozenset[str], negated: frozenset[str]) -> bool:
    """An equivalence attribute of one positive alias, once in every trend (no loop, repetition or skip
    over it), and of parts of negated SEQs that alias reads only (the state after a middle one, the first
    of a leading one, the last of a trailing one): a reader's own value is its trend's."""
    if len(positive) != 1 or not negated:
        return False
    (alias,) = positive
    i = next(k for k, s in enumerate(states) if s.alias == alias)
    once = (not states[i].kleene and not states[i].optional and not any(f <= i <= g for f, g in (*loops, *skips))
            and not any(c == i for c, _, _ in counts))
    return once and all(any(a in parts and reader == alias for parts, reader in seqs) for a in negated)


def equivalence_notes(cq: CompiledQuery, states: Sequence[State], runs: Sequence[ValueRun],
                      part_attrs: Sequence[str]) -> list[str]:
    """How the columnar engine takes each equivalence attribute of some aliases only (`explain`): a
    partition attribute of the positive events, a run per value, or the same value along each step."""
    notes = []
    for c in cq.run_components:
        aliases = ", ".join(sorted(c.aliases))
        run = next((r for r in runs if r.attr == c.attr and {states[i].alias for i in r.states} <= c.aliases), None)
        if run is not None:
            near = sorted({states[i].alias for i in range(len(states)) if i not in run.states})
            seq_parts = sorted(c.aliases - {s.alias for s in states} - set(run.negated))
            bound = (f"; NOT {', '.join(run.negated)} bounds its value's run only" if run.negated else "") + (
                f"; a negated SEQ's {', '.join(seq_parts)} matches for its value's run only" if seq_parts else "")
            notes.append(f"equivalence {c.attr} on {aliases}: a run per value" + (
                f", an event of {', '.join(near)} joining every run near it (cost grows with the values near it)"
                if near else "") + bound)
        elif c.attr in part_attrs:
            notes.append(f"equivalence {c.attr} on {aliases}: a partition attribute of the positive events"
                         + ("; the negated ones bound the trends of their value" if c.aliases - {s.alias for s in states}
                            else ""))
        elif c.aliases - {s.alias for s in states}:  # `reads_own`
            reader = ", ".join(sorted(c.aliases & {s.alias for s in states}))
            notes.append(f"equivalence {c.attr} on {aliases}: a negated SEQ's "
                         f"{', '.join(sorted(c.aliases - {s.alias for s in states}))} matches for the value of "
                         f"{reader} reading it (once in every trend: no run)")
        else:
            notes.append(f"equivalence {c.attr} on {aliases}: the same value along each step between them")
    return notes


def value_run(states: Sequence[State], loops: Sequence[tuple[int, int]], skips: Sequence[tuple[int, int]],
              counts: Sequence[tuple[int, int, int | None]], aliases: frozenset[str], attr: str,
              negated: tuple[str, ...] = ()) -> ValueRun:
    """The run split of `[X.attr, Y.attr, ...]` over the positive aliases `aliases`; `Unsupported` when a
    trend may have none of their events (it would lie in every run)."""
    at = frozenset(i for i, s in enumerate(states) if s.alias in aliases)
    required = tuple(i for i in sorted(at) if not states[i].optional and not any(f <= i <= g for f, g in skips)
                     and not any(c == i and lo == 0 for c, lo, _ in counts))
    if not required:
        raise Unsupported("an equivalence attribute of aliases apart that a trend may have none of")
    sides = tuple(tuple(EITHER if any(f <= min(r, i) and max(r, i) <= g for f, g in loops) else BEFORE if r < i
                        else AFTER if r > i else EITHER for i in range(len(states))) for r in required)
    return ValueRun(attr, at, required, sides, negated)


def split(runs: Sequence[ValueRun], st: np.ndarray, t: np.ndarray, kmin: np.ndarray, kmax: np.ndarray,
          cols: dict[str, Any], base: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The vertices in runs: (which vertex each one is, in input order; its partition code; per run, a
    vertex of the run's aliases in its run, whose value is the run's), from the vertices' states, times,
    first and last windows, columns and partition codes `base`."""
    sel = np.arange(len(st))
    code = base
    reps: list[np.ndarray] = []
    for run in runs:
        which, code, rep = _split(run, st[sel], t[sel], kmin[sel], kmax[sel], cols[run.attr].values[sel], code)
        reps = [r[which] for r in reps] + [sel[rep]]
        sel = sel[which]
    return sel, pd.factorize(code, sort=True)[0].astype(np.int64), reps  # 0.. with none left out, as the kernel reads


def _split(run: ValueRun, st: np.ndarray, t: np.ndarray, kmin: np.ndarray, kmax: np.ndarray, values: np.ndarray,
           base: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    is_k = np.isin(st, list(run.states))
    kidx, oidx = np.flatnonzero(is_k), np.flatnonzero(~is_k)
    kcode = pair_codes(base[kidx], pd.factorize(values[kidx], sort=False)[0])  # 1 and 1.0 one value, as `==` says
    near = _Near(st, np.unique(t, return_inverse=True)[1], *window_ranks(kmin, kmax))
    nruns = int(kcode.max(initial=-1)) + 1
    anchors = [near.anchors(kidx, kcode, s) for s in run.required]
    free, runs = _candidates(near, anchors, run.sides, base, oidx, kidx, kcode, nruns)
    vertex, code = np.concatenate([kidx, free]), np.concatenate([kcode, runs])
    keep = np.ones(len(vertex), bool)
    for s, sides, anchor in zip(run.required, run.sides, anchors):  # a vertex of every required state near
        keep &= (st[vertex] == s) | near.has(anchor, vertex, code, np.asarray(sides)[st[vertex]])
    vertex, code = vertex[keep], code[keep]
    order = np.argsort(vertex, kind="stable")
    some = np.zeros(nruns, np.int64)
    some[kcode] = kidx  # a vertex of each run's aliases
    return vertex[order], code[order], some[code[order]]


class _Near:
    """Which runs hold a vertex of a required state in a window of a given vertex's, on the side asked: the
    vertices' states, time ranks, first and last window ranks (windows and times rise together)."""

    def __init__(self, st: np.ndarray, trank: np.ndarray, kmin: np.ndarray, kmax: np.ndarray) -> None:
        self.st, self.trank, self.kmin, self.kmax = st, trank, kmin, kmax
        self.nt = int(trank.max(initial=0)) + 2
        self.nk = int(kmax.max(initial=0)) + 2

    def anchors(self, kidx: np.ndarray, kcode: np.ndarray, s: int) -> tuple[np.ndarray, ...]:
        """The vertices of state `s` by run and time: (run, by last window, by time, first window, vertex)."""
        a = np.flatnonzero(self.st[kidx] == s)
        a = a[np.lexsort((self.trank[kidx[a]], kcode[a]))]
        run, v = kcode[a], kidx[a]
        return run, run * self.nk + self.kmax[v], run * self.nt + self.trank[v], self.kmin[v], v

    def has(self, anchor: tuple[np.ndarray, ...], vertex: np.ndarray, run: np.ndarray, side: np.ndarray) -> np.ndarray:
        """Per (vertex, run): a vertex of the anchor's state in that run shares a window with it, on `side`.
        The first one whose last window reaches its first window has the earliest time among those; the
        first one at or after its time has the lowest first window among those."""
        arun, by_kmax, by_time, akmin, _ = anchor
        if not len(arun):
            return np.zeros(len(vertex), bool)
        at = np.where(side == AFTER, np.searchsorted(by_time, run * self.nt + self.trank[vertex]),
                      np.searchsorted(by_kmax, run * self.nk + self.kmin[vertex]))
        i = np.minimum(at, len(arun) - 1)
        ok = (at < len(arun)) & (arun[i] == run) & (akmin[i] <= self.kmax[vertex])
        return ok & ((side != BEFORE) | (by_time[i] - arun[i] * self.nt <= self.trank[vertex]))


def _candidates(near: _Near, anchors: list[tuple[np.ndarray, ...]], sides: Sequence[tuple[int, ...]], base: np.ndarray,
                oidx: np.ndarray, kidx: np.ndarray, kcode: np.ndarray, nruns: int) -> tuple[np.ndarray, np.ndarray]:
    """(free vertex, run) pairs to weigh: every run of its partition, or, where the partitions hold many
    runs, the runs of the vertices of the sparsest required state whose windows meet its own, on its side."""
    run_base = np.zeros(nruns, np.int64)
    run_base[kcode] = base[kidx]
    by_base = np.argsort(run_base, kind="stable")
    lo_all = np.searchsorted(run_base[by_base], base[oidx], "left")
    n_all = np.searchsorted(run_base[by_base], base[oidx], "right") - lo_all
    j = min(range(len(anchors)), key=lambda i: len(anchors[i][0]))
    arun, av = anchors[j][0], anchors[j][4]
    order = np.lexsort((near.trank[av], run_base[arun]))  # by partition and time: both windows rise
    pb, pv, pr = run_base[arun][order], av[order], arun[order]
    lo, hi = meeting(pb * near.nk + near.kmin[pv], pb * near.nk + near.kmax[pv], base[oidx] * near.nk + near.kmin[oidx],
                     base[oidx] * near.nk + near.kmax[oidx])
    side = np.asarray(sides[j])[near.st[oidx]]  # and on the pattern's side of it: at or after, at or before
    by_time, at_time = pb * near.nt + near.trank[pv], base[oidx] * near.nt + near.trank[oidx]
    lo = np.where(side == AFTER, np.maximum(lo, np.searchsorted(by_time, at_time, "left")), lo)
    hi = np.where(side == BEFORE, np.minimum(hi, np.searchsorted(by_time, at_time, "right")), hi)
    if np.maximum(hi - lo, 0).sum() < n_all.sum():  # the anchors near each free vertex are fewer than its runs
        return distinct_pairs(oidx, lo, hi, pr, nruns)
    return np.repeat(oidx, n_all), by_base[positions(lo_all, lo_all + n_all)]


def window_ranks(kmin: np.ndarray, kmax: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last windows as ranks among both (small keys, same order)."""
    ranks = np.unique(np.concatenate([kmin, kmax]), return_inverse=True)[1].astype(np.int64)
    return ranks[:len(kmin)], ranks[len(kmin):]


def meeting(anchor_first: np.ndarray, anchor_last: np.ndarray, first: np.ndarray,
            last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per event (its first and last window keys, partition * nk + window rank), the range [lo, hi) of the
    anchors whose windows meet its own; the anchors sorted by partition and time, so both keys rise."""
    return np.searchsorted(anchor_last, first, "left"), np.searchsorted(anchor_first, last, "right")


def positions(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Every position of the ranges [lo, hi) (empty where hi <= lo), range by range."""
    n = np.maximum(hi - lo, 0)
    return np.arange(int(n.sum())) + np.repeat(lo - np.cumsum(n) + n, n)


def distinct_pairs(event: np.ndarray, lo: np.ndarray, hi: np.ndarray, label: np.ndarray,
                   nlabels: int) -> tuple[np.ndarray, np.ndarray]:
    """(event, label) for the labels at the positions [lo, hi) of each event, each pair once, by event."""
    pair = np.sort(np.repeat(event, np.maximum(hi - lo, 0)) * nlabels + label[positions(lo, hi)])  # a sort: numpy's
    first = np.ones(len(pair), bool)  # hashed unique is several times slower on millions
    first[1:] = pair[1:] != pair[:-1]
    pair = pair[first]
    return pair // max(nlabels, 1), pair % max(nlabels, 1)


def pair_codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One code per distinct (a, b), 0.. in order of appearance."""
    return pd.factorize(a * (int(b.max(initial=0)) + 2) + b + 1, sort=False)[0].astype(np.int64)  # b may be -1
