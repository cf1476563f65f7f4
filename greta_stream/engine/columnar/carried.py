"""Incremental aggregates of a stream: each event propagated once, state carried over micro-batches.

Experimental, off by default (`ColumnarStream(incremental=True)`; nothing
outside the tests and `benchmarks/bench_stream.py` turns it on). Kept because
its rows are the batch rows (tests/engine/test_carried.py runs the differential
searches of the columnar stream with it on) and it is the way to work per
micro-batch that follows the events that came; not the default because it is
slower than recomputing each closing window from the kept events (Q1 at 10k
events per window: 11.7k events/s against 21.1k, 90 MB of carried trees
against 120 KB of kept events) and past 100k events per window or hour-long
windows its trees pass the budget and it falls back (docs/DESIGN.md,
"Carried trees").

`ColumnarStream` keeps the events of the windows it has not reported. With
`CarriedAggregates` beside them, an event is propagated once, when the
watermark passes it, into the lanes of every window of its blocks
(`carried_kernel.feed`), and a window's row is read from its (group, block)
sums when it closes: the work per micro-batch follows the events that came,
not the events kept. The kept events stay, as the state's source of truth:
snapshots hold them (the carried trees are rebuilt from them on restore: a
worker that keeps its stream between micro-batches never rebuilds), and a
stream falls back to computing each closing window from them:

- when its carried state would pass `budget_bytes` (counted:
  `incremental_fallbacks`, the stream computes from the kept events from
  then on);
- for one micro-batch, when the carried state no longer fits the events:
  an event before the watermark the carried state was fed to (a lower declared
  watermark), or aggregate cells laid out differently (a float SUM that
  needs a finer scale, a sign not seen before): the carried state is then
  rebuilt from the kept events (`incremental_rebuilds`).

Covered: a single Kleene pattern `X+` without negation (partitions, any
edge predicate the columnar engine takes, any aggregate). Other shapes run
as before.

Persistent ids: a partition or group keeps its id (and a group its
spelling: the first event of it the stream fed) for as long as the stream
lives; a task is (partition, block) and a slot (group, block), both freed
when their block's last window is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from greta_stream.engine.columnar import carried_kernel as lk
from greta_stream.engine.columnar.cells import aggregate_cells
from greta_stream.engine.columnar.columns import MIXES, OTHER, Input
from greta_stream.engine.columnar.driver import BLOCK_LANES, START_LIMBS, KernelOutput
from greta_stream.engine.columnar.keys import edge_values, partitions, plain
from greta_stream.engine.columnar.plan import KernelPlan
from greta_stream.engine.columnar.prepare import Prepared, subset
from greta_stream.query import ast

BUDGET_BYTES = 512 << 20  # of one stream's carried state, by default

_NAN = ("nan",)  # a NaN or missing value in a partition key: one partition, as `pd.factorize` makes it


class NotCarried(Exception):
    """This stream's events cannot be carried exactly: compute from the kept events."""


class Relayout(Exception):
    """A micro-batch's cells are laid out otherwise than the carried state's: rebuild it."""


def covered(plan: KernelPlan) -> bool:
    """Whether `CarriedAggregates` takes the plan's query."""
    return (len(plan.states) == 1 and plan.states[0].kleene and not plan.negs and not plan.scan
            and plan.iterations is None)


@dataclass
class Layout:
    """How the carried cells read: the spec of `aggregate_cells`, fixed for the state's life."""

    cell_spec: list[Any]
    sums: dict[int, Any]
    mm_spec: list[Any]  # (kind, index, value kind) per MIN/MAX

    @property
    def scales(self) -> dict[int, int]:
        return {i: s[0] for i, s in self.sums.items()}

    @property
    def cell_spec_pairs(self) -> list[Any]:
        """As `KernelOutput.cell_spec` reads them: (spec, digits)."""
        return [(spec, None) for spec in self.cell_spec]

    @property
    def mm_values(self) -> list[Any]:
        """As `KernelOutput.mm_spec` reads them: (kind, values, index, value kind)."""
        return [(kind, None, i, vk) for kind, i, vk in self.mm_spec]


class CarriedAggregates:
    """One pass's aggregates (a window spec, its fields and grouping) carried across micro-batches."""

    def __init__(self, plan: KernelPlan, fields: tuple[Any, ...], group_by: tuple[str, ...]) -> None:
        if not covered(plan):
            raise NotCarried("not a single Kleene pattern without negation")
        self.plan, self.fields, self.group_by = plan, fields, group_by
        self.lanes = max(1, min(BLOCK_LANES, -(-plan.within // plan.slide)))
        self.layout: Layout | None = None
        self.state: lk.State | None = None
        self.tasks: dict[tuple[Any, int], int] = {}  # (partition key, block) -> task id
        self.task_blk: list[int] = []
        self.slots: dict[tuple[int, int], int] = {}  # (group id, block) -> slot
        self.slot_blk: list[int] = []
        self.slot_gid: list[int] = []
        self.free_tasks: list[int] = []
        self.free_slots: list[int] = []
        self.groups: dict[Any, int] = {}  # group key -> group id
        self.group_values: list[tuple[Any, ...]] = []  # spelled as the first event of the group fed
        self.group_kinds: dict[str, str] = {}
        self.time_kind: str | None = None
        self._fresh_tasks: list[int] = []  # ids handed out since the arrays were last cleared for them
        self._fresh_slots: list[int] = []

    # ------------------------------------------------------------ feeding
    def feed(self, prep: Prepared, inp: Input, k_from: int | None) -> None:
        """Propagate `prep`'s events (all after every event fed before), their
        windows from `k_from` on. `Relayout` when their cells do not fit the
        carried layout (nothing changed then), `NotCarried` when they cannot be
        carried at all."""
        plan = self.plan
        kmin = prep.kmin if k_from is None else np.maximum(prep.kmin, k_from)
        inside = kmin <= prep.kmax  # a plan it covers has no negated events
        if not inside.any():
            return
        t, kmin, kmax = prep.t[inside], kmin[inside], prep.kmax[inside]
        cols = {a: subset(c, inside) for a, c in prep.cols.items()}
        st = prep.state[inside]
        m = len(t)
        for a in self.group_by:
            kind = cols[a].kind
            if kind in MIXES or self.group_kinds.setdefault(a, kind) != kind:
                raise NotCarried(f"GROUP-BY attribute {a!r} of more than one kind")
        if plan.edge is not None:
            if any(cols[r.attr].kind == OTHER for side in plan.edge[1:] for r in ast.expr_refs(side)):
                raise NotCarried("strings in the edge predicate (their codes hold for one kernel run)")
            key, probe, op = edge_values(plan, cols, st)
            if np.isnan(key).any() or np.isnan(probe).any():
                raise NotCarried("NaN in the edge predicate")
        else:
            key = probe = np.zeros(m, np.float64)
            op = "<"
        cells, sums, mms = aggregate_cells(plan, self.fields, cols, st, self.layout.scales if self.layout else None)
        layout = Layout([c[0] for c in cells], sums, [(k, i, vk) for k, _, i, vk in mms])
        if self.layout is None:
            self.layout = layout
            self.time_kind = prep.time_kind
            self.state = _new_state(1 + len(cells), len(mms), self.lanes)
        elif (layout.mm_spec != self.layout.mm_spec or any(s not in self.layout.cell_spec for s in layout.cell_spec)
              or any((v[0], v[3]) != (self.layout.sums[i][0], self.layout.sums[i][3]) for i, v in sums.items())
              or prep.time_kind != self.time_kind):
            raise Relayout("the micro-batch's aggregate cells differ from the carried ones")
        # cells in the carried order; a sign the batch lacks is all zeros
        width = max((c[1].shape[1] for c in cells), default=1)
        mult = np.zeros((m, len(self.layout.cell_spec), width), np.uint64)
        for spec, digits in cells:
            mult[:, self.layout.cell_spec.index(spec), : digits.shape[1]] = digits
        ndig = int(np.flatnonzero(mult.any(axis=(0, 1))).max()) + 1 if mult.any() else 0
        mmval = np.stack([x[1] for x in mms], axis=1) if mms else np.zeros((m, 0), np.float64)
        mmax = np.array([x[0] == "max" for x in mms], dtype=np.bool_)

        # partitions and groups with ids that last; order by (partition, time)
        pid, group_of_part, gvals = partitions(self.group_by, plan.part_attrs, cols, m)
        gids = self._group_ids(gvals, prep.good[inside], inp)
        pfirst = np.unique(pid, return_index=True)[1]
        pkeys = [_canonical(tuple(plain(cols[a].values[i]) for a in plan.part_attrs)) for i in pfirst.tolist()]
        order = np.lexsort((t, pid))
        t, kmin, kmax, pid = t[order], kmin[order], kmax[order], pid[order]
        newt = np.ones(m, bool)
        if m > 1:
            newt[1:] = (pid[1:] != pid[:-1]) | (t[1:] != t[:-1])
        offsets = np.append(np.flatnonzero(np.r_[True, pid[1:] != pid[:-1]]), m).astype(np.int64)
        from greta_stream.engine.columnar import blocks

        k_al = (int(kmin.min()) // self.lanes) * self.lanes
        raw = blocks.tasks(offsets, kmin, kmax, k_al, self.lanes)
        task = np.empty((len(raw), 5), np.int64)
        for x, (blk, p, a, b) in enumerate(raw.tolist()):
            blk += k_al // self.lanes
            task[x] = (self._task((pkeys[p], blk)), self._slot(int(gids[group_of_part[p]]), blk), blk, a, b)
        self._sized()
        assert self.state is not None  # made with the carried layout
        batch = lk.Batch(kmin, kmax, newt, np.ascontiguousarray(key[order]), np.ascontiguousarray(probe[order]),
                         mult[order], np.ascontiguousarray(mmval[order]))
        self.state = lk.feed(self.state, task, self.lanes, batch, ndig, mmax, plan.edge is not None, op == "=",
                             op == "<")

    def _group_ids(self, gvals: list[Any], rows: np.ndarray, inp: Input) -> np.ndarray:
        out = np.empty(len(gvals), np.int64)
        for j, (values, first) in enumerate(gvals):
            gk = _canonical(values)
            gid = self.groups.get(gk)
            if gid is None:
                gid = self.groups[gk] = len(self.group_values)
                spelled = tuple(plain(inp.raw(a, rows[[first]])[0]) for a in self.group_by)
                self.group_values.append(spelled)
            out[j] = gid
        return out

    def _task(self, tk: tuple[Any, int]) -> int:
        tid = self.tasks.get(tk)
        if tid is None:
            tid = self.free_tasks.pop() if self.free_tasks else len(self.task_blk)
            if tid == len(self.task_blk):
                self.task_blk.append(tk[1])
            self.task_blk[tid] = tk[1]
            self.tasks[tk] = tid
            self._fresh_tasks.append(tid)
        return tid

    def _slot(self, gid: int, blk: int) -> int:
        sid = self.slots.get((gid, blk))
        if sid is None:
            sid = self.free_slots.pop() if self.free_slots else len(self.slot_blk)
            if sid == len(self.slot_blk):
                self.slot_blk.append(blk)
                self.slot_gid.append(gid)
            self.slot_blk[sid], self.slot_gid[sid] = blk, gid
            self.slots[(gid, blk)] = sid
            self._fresh_slots.append(sid)
        return sid

    def _sized(self) -> None:
        """The state's per-task and per-slot arrays grown to the ids in use; new ids cleared."""
        s = self.state
        assert s is not None and self.layout is not None
        nt, ns = len(self.task_blk), len(self.slot_blk)
        if s.tnseg.shape[0] < nt or s.gacc.shape[0] < ns:
            t_cap, s_cap = max(nt, 2 * s.tnseg.shape[0]), max(ns, 2 * s.gacc.shape[0])
            s = lk.State(s.off, s.pk, s.pv, _grown(s.tseg, t_cap), _grown(s.tnseg, t_cap), _grown(s.ttail, t_cap),
                         _grown(s.trun, t_cap),
                         _grown(s.gacc, s_cap), _grown(s.gmm, s_cap), _grown(s.ghas, s_cap), s.top)
        for tid in self._fresh_tasks:
            s.tnseg[tid] = 0
            s.ttail[tid] = (-1, 0)
            s.trun[tid] = 0
        for sid in self._fresh_slots:
            s.gacc[sid] = 0
            s.ghas[sid] = False
            for q, (kind, _, _) in enumerate(self.layout.mm_spec):
                s.gmm[sid, q] = -np.inf if kind == "max" else np.inf
        self._fresh_tasks.clear()
        self._fresh_slots.clear()
        self.state = s

    # ------------------------------------------------------------ reading
    def rows(self, k_from: int, k_to: int | None) -> KernelOutput | None:
        """The exact partial rows of windows k_from <= k < k_to (all open ones when None), then
        the tasks and slots whose windows are all reported are freed."""
        s, lay = self.state, self.layout
        if s is None or lay is None or not self.slot_blk:
            return None
        blk = np.asarray(self.slot_blk, np.int64)
        used = np.zeros(len(blk), bool)
        used[list(self.slots.values())] = True
        ks = blk[:, None] * self.lanes + np.arange(self.lanes)[None, :]
        pick = used[:, None] & s.ghas[: len(blk)] & (ks >= k_from)
        if k_to is not None:
            pick &= ks < k_to
        sl, lane = np.nonzero(pick)
        off = s.off.tolist()
        flat = s.gacc[sl, :, lane]  # (rows, limb rows of every cell)
        cells = np.zeros((len(sl), len(off) - 1, max(b - a for a, b in zip(off, off[1:]))), np.uint64)
        for c, (a, b) in enumerate(zip(off, off[1:])):
            cells[:, c, : b - a] = flat[:, a:b]
        mm = s.gmm[sl, :, lane] if s.gmm.shape[1] else np.zeros((len(sl), 0), np.float64)
        out = KernelOutput(ks[sl, lane], np.asarray(self.slot_gid, np.int64)[sl], cells, mm, lay.cell_spec_pairs,
                           lay.sums, lay.mm_values, list(self.group_values), self.time_kind or "numeric")
        if k_to is not None:
            self._free(k_to)
        return out

    def _free(self, k_to: int) -> None:
        """Tasks and slots of blocks whose last window is before k_to."""
        done = lambda blk: (blk + 1) * self.lanes <= k_to  # noqa: E731
        for tk in [tk for tk in self.tasks if done(tk[1])]:
            self.free_tasks.append(self.tasks.pop(tk))
        for sk in [sk for sk in self.slots if done(sk[1])]:
            self.free_slots.append(self.slots.pop(sk))
        s = self.state
        assert s is not None
        alive = np.zeros(s.tnseg.shape[0], bool)
        alive[list(self.tasks.values())] = True
        for tid in self.free_tasks:
            s.tnseg[tid] = 0
            s.ttail[tid] = (-1, 0)
        kept = int(s.tseg[:, :, 1][alive[:, None] & (np.arange(lk.MAX_SEGMENTS)[None, :] < s.tnseg[:, None])].sum())
        kept += lk.TAIL * int((s.ttail[alive, 0] >= 0).sum())
        if s.top[0] > 3 * kept + 4096:
            self.state = lk.compact(s, alive)

    @property
    def nbytes(self) -> int:
        s = self.state
        return 0 if s is None else sum(a.nbytes for a in s)


def _new_state(ncell: int, nm: int, lanes: int) -> lk.State:
    off = np.arange(ncell + 1, dtype=np.int64) * (START_LIMBS + 1)  # a vertex keeps each cell's top limb zero
    rows = int(off[-1])
    return lk.State(off, np.zeros(64, np.float64), np.zeros((64, rows, lanes), np.uint64),
                    np.zeros((8, lk.MAX_SEGMENTS, 2), np.int64), np.zeros(8, np.int64), np.full((8, 2), -1, np.int64),
                    np.zeros((8, rows, lanes), np.uint64), np.zeros((8, rows, lanes), np.uint64),
                    np.zeros((8, nm, lanes), np.float64), np.zeros((8, lanes), np.bool_), np.zeros(1, np.int64))


def _grown(a: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, *a.shape[1:]), a.dtype)
    out[: a.shape[0]] = a
    return out


def _canonical(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A partition or group key as `pd.factorize` compares: NaN and None are one value."""
    return tuple(_NAN if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in key)
