"""What negated SEQs bound, per event or per vertex, and their parts keyed by an equivalence attribute.

A middle `NOT SEQ(...)` gives each reader M, the latest start of a match ending before it (`fill_ranks`
turns it into the ranks of its scanned predicate); a leading or trailing one bounds the windows in which a
trend may start or end (`seq_bounds`). Without keyed parts these are per prepared event, in the partitions
of the common attributes (`negseqs.Matches`).

`SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E) WHERE [S.volume, C.volume]`: a match excludes only the
trends whose S events carry its C's volume (SEMANTICS section 3: an equivalence attribute of some aliases
constrains only the events bound to them). The match walk then runs over entries of (partition, value)
(`negseqs.View`):

- an event of a keyed part (C) at its own value;
- an event of an unkeyed part (D) at every value of a keyed part's event of its partition that shares a
  window with it (a match lies in one window: it is in no other value's matches), or where the keyed parts
  are NOTs inside the negated SEQ (`NOT SEQ(C, NOT E, D)`), at every value of a reader sharing one;
- the readers, the vertices, at their trend's value: their own where every positive alias carries the
  attribute (a partition attribute), else their run's (`valueruns.py`: a free vertex E is in one run per
  value near it).

Its cost is the unkeyed parts' events times the values near them, on top of the runs' own.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from greta_stream.engine.columnar.keys import partition_times
from greta_stream.engine.columnar.negseqs import Matches, View, part_events
from greta_stream.engine.columnar.plan import NOT_SEQ, KernelPlan, State
from greta_stream.engine.columnar.prepare import Prepared
from greta_stream.engine.columnar.valueruns import distinct_pairs, meeting, pair_codes, positions, window_ranks
from greta_stream.engine.timebase import window_bounds
from greta_stream.query import ast

Readers = tuple[np.ndarray, Mapping[str, np.ndarray]]  # (prepared event of each vertex, its trend's values by attribute)


def keyed_attrs(plan: KernelPlan, parts: tuple[State, ...]) -> tuple[str, ...]:
    """The equivalence attributes keying some of a negated SEQ's parts (none: an unkeyed walk)."""
    aliases = {p.alias for p in parts}
    return tuple(dict.fromkeys(attr for alias, attr in plan.neg_keys if alias in aliases))


def seq_attrs(plan: KernelPlan) -> tuple[str, ...]:
    """The attributes keying parts of the plan's negated SEQs: the values each vertex reads them at."""
    seqs = (*(p for _, p in plan.negseqs), plan.lead_seq, plan.trail_seq)
    return tuple(dict.fromkeys(a for ps in seqs if ps for a in keyed_attrs(plan, ps)))


def match_starts(plan: KernelPlan, prep: Prepared, readers: Readers) -> list[np.ndarray]:
    """Per middle negated SEQ (`plan.negseqs` order), per vertex: M, the latest start time of a match
    ending strictly before it in its partition, and of its trend's value where parts are keyed (-inf:
    none)."""
    rep = readers[0]
    plain: list[Matches] = []
    out = []
    for _, parts in plan.negseqs:
        if not len(prep.t) or not len(rep):
            out.append(np.full(len(rep), -np.inf))
            continue
        matches = _matches(plan, prep, parts, plain, readers)
        got = matches.time_of(matches.latest_starts(parts))
        out.append(got if matches.view is not None else got[rep])
    return out


def _matches(plan: KernelPlan, prep: Prepared, parts: tuple[State, ...], plain: list[Matches],
             readers: Readers | None) -> Matches:
    """The match walk of `parts`: over the readers' entries where a part is keyed (`view`), else over the
    prepared events, made once (`plain`, empty or the one made) for every unkeyed negated SEQ."""
    attrs = keyed_attrs(plan, parts)
    if attrs:
        assert readers is not None  # a keyed walk is per vertex
        return Matches(plan, prep, view(plan, prep, parts, attrs, readers))
    if not plain:
        plain.append(Matches(plan, prep))
    return plain[0]


def seq_bounds(plan: KernelPlan, prep: Prepared, kneg: np.ndarray, kend: np.ndarray,
               readers: Readers | None = None) -> None:
    """A leading `NOT SEQ(C, D, ...)` raises each reader's first window of a trend it starts (`kneg`) past
    the windows starting at or before the latest start of a match ending before it (SEMANTICS section 3:
    excluded if `window.start <= c.time` and `d.time < first.time`); a trailing one lowers the last window
    of a trend it ends (`kend`) below the windows holding the earliest end of a match starting after it
    (excluded if `last.time < c.time` and `d.time < window.end`). Without `readers`, the unkeyed ones per
    prepared event; with them, the keyed ones per vertex."""
    plain: list[Matches] = []
    for parts, lead in ((plan.lead_seq, True), (plan.trail_seq, False)):
        if not parts or not len(prep.t) or (not keyed_attrs(plan, parts)) != (readers is None):
            continue
        if readers is not None and not len(readers[0]):
            continue
        matches = _matches(plan, prep, parts, plain, readers)
        rank = matches.latest_starts(parts) if lead else matches.earliest_ends(parts)
        ok = rank >= 0
        first, last = window_bounds(matches.times[rank[ok]], prep.window(plan), prep.int_time)
        if lead:
            kneg[ok] = np.maximum(kneg[ok], last + 1)
        else:
            kend[ok] = np.minimum(kend[ok], first - 1)


def view(plan: KernelPlan, prep: Prepared, parts: tuple[State, ...], attrs: tuple[str, ...], readers: Readers) -> View:
    """The entries of a match walk over `parts` keyed by `attrs`: the readers at their trend's values, then
    each part's events, for each attribute at their own value where the part is keyed by it, else at each
    value of a keyed part's event (not a NOT's; without one, of a reader) of its partition sharing a window
    with them; an event at every combination of its values (`[S.volume, C.volume] AND [E.price,
    D.price]`: a C at its own volume and each price of a D near it, a D the other way round)."""
    rep, values = readers
    common = partition_times(plan, prep)[0]
    events = {p.alias: part_events(plan, prep, p) for p in parts}
    entries: dict[str, tuple[np.ndarray, list[np.ndarray]]] = {  # (event index, codes by attribute)
        p.alias: (np.arange(len(events[p.alias])), []) for p in parts}
    reader_codes = []
    for attr in attrs:
        mine, pairs = _attr_values(plan, prep, parts, attr, events, common, rep, values[attr])
        reader_codes.append(mine)
        for alias, (i, codes) in entries.items():
            pi, pc = pairs[alias]
            lo, hi = np.searchsorted(pi, i, "left"), np.searchsorted(pi, i, "right")
            n = hi - lo
            entries[alias] = (np.repeat(i, n), [c[np.repeat(np.arange(len(i)), n)] for c in codes] + [pc[positions(lo, hi)]])
    members: dict[str, np.ndarray] = {}
    at = len(rep)
    for p in parts:
        members[p.alias] = np.arange(at, at + len(entries[p.alias][0]))
        at += len(entries[p.alias][0])
    row = np.concatenate([rep] + [events[p.alias][entries[p.alias][0]] for p in parts])
    code = np.concatenate([reader_codes[0]] + [entries[p.alias][1][0] for p in parts])
    for k in range(1, len(attrs)):  # one code per combination of the attributes' values
        code = pair_codes(code, np.concatenate([reader_codes[k]] + [entries[p.alias][1][k] for p in parts]))
    return View(row, pair_codes(common[row], code), members, np.arange(len(rep)))


def _attr_values(plan: KernelPlan, prep: Prepared, parts: tuple[State, ...], attr: str,
                 events: Mapping[str, np.ndarray], common: np.ndarray, rep: np.ndarray,
                 values: np.ndarray) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The codes of `attr`'s values: the readers' and, per part, (index into its events, code) pairs, by
    index: a keyed part's events at their own, another's at each value of a keyed part's event (not a
    NOT's; without one, of a reader) of its partition sharing a window with it."""
    keyed = [p.alias for p in parts if (p.alias, attr) in plan.neg_keys]
    negated = {p.alias: p.negated for p in parts}
    kev = np.concatenate([events[a] for a in keyed])
    both = pd.Series(np.concatenate([np.asarray(values, object), np.asarray(prep.cols[attr].values[kev], object)]))
    vcode = pd.factorize(both, sort=False)[0].astype(np.int64)  # 1 and 1.0 one value, as `==` says
    kv, nvals = vcode[len(rep):], int(vcode.max(initial=0)) + 1
    # a match holds an event of each keyed part but a NOT's: their values are the ones to spread to (else the
    # readers', a NOT of another value blocking nothing); both share a window with each event of the match
    anchor = np.concatenate([np.full(len(events[a]), not negated[a]) for a in keyed])
    spread = (_Spread(prep, common, kev[anchor], kv[anchor], nvals) if anchor.any()
              else _Spread(prep, common, rep, vcode[:len(rep)], nvals))
    pairs, off = {}, 0
    for p in parts:
        e = events[p.alias]
        if p.alias in keyed:
            pairs[p.alias] = (np.arange(len(e)), kv[off:off + len(e)])
            off += len(e)
        else:
            got, v = spread.values(e)
            pairs[p.alias] = (np.searchsorted(e, got), v)  # `e` rises: the index of each
    return vcode[:len(rep)], pairs


class _Spread:
    """The values of the keyed parts' events `kev` (codes `kv`) by partition and window, for the events of
    an unkeyed part: sorted by partition and time, their first and last windows both rise."""

    def __init__(self, prep: Prepared, common: np.ndarray, kev: np.ndarray, kv: np.ndarray, nvals: int) -> None:
        kmin, kmax = window_ranks(prep.kmin, prep.kmax)
        nk = int(kmax.max(initial=0)) + 2
        self.first, self.last = common * nk + kmin, common * nk + kmax  # per prepared event
        order = np.lexsort((prep.t[kev], common[kev]))  # by partition and time: both windows rise
        self.kfirst, self.klast, self.kv, self.nvals = self.first[kev[order]], self.last[kev[order]], kv[order], nvals

    def values(self, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(event, value) pairs: each event of `e` at each value of a keyed event sharing a window with it."""
        lo, hi = meeting(self.kfirst, self.klast, self.first[e], self.last[e])
        return distinct_pairs(e, lo, hi, self.kv, self.nvals)


def fill_ranks(plan: KernelPlan, grs: np.ndarray, gqs: np.ndarray, t: np.ndarray, bounds: list[np.ndarray]) -> None:
    """Write the ranks of each negated SEQ's predicate (`grs[u] < gqs[v]` iff `t[u] >= M(v)`) into its
    scan columns; `t` and `bounds` per vertex, in the kernel's order."""
    p = 0
    for sc in plan.scans:
        for op, x, _ in sc.edges:
            if op == NOT_SEQ and isinstance(x, ast.Literal):
                m = bounds[int(x.value)]
                values = np.unique(np.concatenate([t.astype(np.float64), m[np.isfinite(m)]]))
                grs[:, p] = -np.searchsorted(values, t.astype(np.float64))
                gqs[:, p] = np.where(np.isfinite(m), 1 - np.searchsorted(values, m), 1)
            p += 1
