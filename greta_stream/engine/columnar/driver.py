"""The kernel driver: prepared events -> arrays in kernel order -> threads -> rows.

`compute` lays the prepared events out as the kernel reads them (sorted by
partition and time, key ranks, aggregate cells), `run_kernel` runs
`kernel.run` over tasks (a partition in a block of windows) in threads of
about equal work, and `rows.result_rows` sums the pieces per (group,
window) into result rows.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from greta_stream.engine.columnar import valueruns
from greta_stream.engine.columnar.cells import aggregate_cells
from greta_stream.engine.columnar.columns import Input, Unsupported
from greta_stream.engine.columnar.keys import (
    all_ranks,
    codes,
    generations,
    negated_ends,
    negated_starts,
    pair_programs,
    partitions,
    plain,
    ranks,
    run_negations,
)
from greta_stream.engine.columnar.negkeys import fill_ranks, match_starts, seq_attrs, seq_bounds
from greta_stream.engine.columnar.pairs import Programs
from greta_stream.engine.columnar.parts import loop_steps
from greta_stream.engine.columnar.plan import KernelPlan, State
from greta_stream.engine.columnar.prepare import Prepared, local_mask, subset
from greta_stream.engine.columnar.rows import result_rows

MAX_THREADS = 8


PARALLEL_EVENTS = 20_000  # below this, one thread


START_LIMBS = 2  # 64-bit counts first; the kernel widens by half whenever a count needs more


BLOCK_LANES = 32  # windows per block: a tree per (partition, block) of this many lanes


MAX_TREE_BYTES = 1 << 30  # per thread; a block's tree that would pass it is run again with fewer lanes



class QueryLanes(Protocol):
    """One traversal for several queries (`union.UnionPlan`): a lane per (window,
    query), the stores wired for all of them, and where each query's trends
    start and end."""

    @property
    def nq(self) -> int: ...

    @property
    def startq(self) -> np.ndarray:  # (states, nq) bool
        ...

    @property
    def finalq(self) -> np.ndarray:  # (states, nq) bool
        ...

    @property
    def qlo(self) -> np.ndarray:  # (states,): queries qlo..qhi-1 hold every query that has the state
        ...

    @property
    def qhi(self) -> np.ndarray: ...

    def stores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]: ...

    def first_windows(self, st: np.ndarray, t: np.ndarray, cols: dict[str, Any], prep: Prepared) -> np.ndarray:
        """(vertices, nq) the first window each query has each vertex in (past the last: none)."""
        ...


@dataclass
class KernelOutput:
    """The kernel's exact partial rows: per piece, the window, the group id,
    the cells (`cell_spec`: (field, "n"|"+"|"-") of cells 1..; cell 0 is
    COUNT(*)) and MIN/MAX values (`mm_spec`); `sums` says how each SUM field's
    cells scale; `group_values[g]` are group g's GROUP-BY values."""

    ks: np.ndarray
    gids: np.ndarray
    cells: np.ndarray
    mm: np.ndarray
    cell_spec: list[Any]
    sums: dict[int, Any]
    mm_spec: list[Any]
    group_values: list[tuple[Any, ...]]
    time_kind: str


def compute(plan: KernelPlan, prep: Prepared, events: Input, k_from: int | None = None,
            k_to: int | None = None, *, threads: int | None = None) -> list[dict[str, Any]]:
    """Result rows of the windows k_from <= k < k_to (all when None) over the
    prepared events; a window's row needs only the events in it. The kernel
    runs in `threads` threads (default: one per core)."""
    return result_rows(plan.cq, compute_cells(plan, prep, events, k_from, k_to, threads=threads))


def compute_cells(plan: KernelPlan, prep: Prepared, events: Input, k_from: int | None = None,
                  k_to: int | None = None, *, threads: int | None = None, fields: tuple[Any, ...] | None = None,
                  group_by: tuple[str, ...] | None = None, lanes: QueryLanes | None = None) -> KernelOutput:
    """The kernel's exact partial rows (see `compute`) of the aggregate
    `fields` (default: the query's) per group of `group_by` (default: the
    query's GROUP-BY; a shared pass asks for the union of its queries').
    With `lanes`, one traversal serves several queries: a row's group id is
    group * lanes.nq + query."""
    cq = plan.cq
    if plan.iterations is not None and lanes is None:  # `X{n,m}`: a lane per iteration count, rows added up
        from greta_stream.engine.columnar.iterations import IterationLanes

        out = compute_cells(plan, prep, events, k_from, k_to, threads=threads, fields=fields, group_by=group_by,
                            lanes=IterationLanes(plan))
        return replace(out, gids=out.gids // plan.iteration_lanes)
    fields = cq.fields if fields is None else fields
    group_by = cq.group_by if group_by is None else group_by
    kmin, kmax = prep.kmin, prep.kmax
    kneg, kend = negated_starts(plan, prep), negated_ends(plan, prep)
    seq_bounds(plan, prep, kneg, kend)
    gens = generations(plan, prep)
    if k_from is not None:
        kmin = np.maximum(kmin, k_from)
    if k_to is not None:
        kmax = np.minimum(kmax, k_to - 1)
    positive = np.unique(plan.slot_of_state()[:len(plan.states)])
    inside = np.flatnonzero((kmin <= kmax) & np.isin(prep.state, positive))
    rep, st = expand(plan, prep.state, inside)  # the vertices: one per event and state of its type
    # contiguous with events that are no vertices (failing their local predicates, negated): each event's
    # previous time stamp from all of them; else the kernel's previous time stamp is the vertices' own
    stamps = (previous_stamps(plan, prep, kmin, kmax) if plan.contiguous and (plan.local or plan.negs or plan.value_runs)
              else None)
    t, kmin, kmax, kneg, kend = prep.t[rep], kmin[rep], kmax[rep], kneg[rep], kend[rep]
    cols = {a: subset(c, rep) for a, c in prep.cols.items()}
    if plan.local and (plan.shared_slots or plan.contiguous):  # each state's own predicates (contiguous: the
        # preparation kept the events failing them, which break contiguity)
        keep = local_mask(plan, cols, st, slots=False)
        rep, st, t, kmin, kmax, kneg, kend = rep[keep], st[keep], t[keep], kmin[keep], kmax[keep], kneg[keep], kend[keep]
        cols = {a: subset(c, keep) for a, c in cols.items()}
    qfrom = None
    if lanes is not None:  # a vertex no query takes (its types, predicates, windows) is left out
        qfrom = lanes.first_windows(st, t, cols, prep)
        keep = qfrom.min(axis=1, initial=np.iinfo(np.int64).max) <= kmax
        if not keep.all():
            rep, st, t, kmin, kmax, kneg, kend = rep[keep], st[keep], t[keep], kmin[keep], kmax[keep], kneg[keep], kend[keep]
            cols = {a: subset(c, keep) for a, c in cols.items()}
            qfrom = qfrom[keep]
    gjoin, gread = np.zeros(len(rep), np.int64), np.zeros(len(rep), np.int64)
    for (i, _), (at_or_before, before) in zip(plan.mids, gens):
        gjoin = np.where(st == i, at_or_before[rep], gjoin)  # joins the store across the NOT after state i
        gread = np.where(st == i + 1, before[rep], gread)  # reads it
    pid, run_values = None, {}
    if plan.value_runs:  # `[A.k, D.k]` of `SEQ(A, B, D)`: a run of vertices per value (`valueruns.py`)
        sel, pid, reps = valueruns.split(plan.value_runs, st, t, kmin, kmax, cols, codes(cols, plan.part_attrs, len(t)))
        run_values = {run.attr: cols[run.attr].values[r] for run, r in zip(plan.value_runs, reps)}
        values = {a: run_values[run.attr] for run in plan.value_runs for a in run.negated}
        rep, st, t, kmin, kmax, kneg, kend, gjoin, gread = (
            x[sel] for x in (rep, st, t, kmin, kmax, kneg, kend, gjoin, gread))
        cols = {a: subset(c, sel) for a, c in cols.items()}
        qfrom = qfrom[sel] if qfrom is not None else None
        if values:  # `[a.k, e.k]` of `SEQ(A a, B b, NOT E e, C c)`: an E bounds its value's run
            kneg, kend, gjoin, gread = run_negations(plan, prep, rep, st, values, (kneg, kend, gjoin, gread))
    # a negated SEQ's parts keyed by an equivalence attribute: each vertex reads its matches at its trend's value
    readers = (rep, {a: run_values.get(a, cols[a].values) for a in seq_attrs(plan)})
    if readers[1]:
        seq_bounds(plan, prep, kneg, kend, readers)
    pid, group_of_part, group_values = partitions(group_by, plan.part_attrs, cols, len(t), pid)
    if group_values and group_by:  # as the records spell them (an int next to floats stays an int)
        firsts = prep.good[rep][[g[1] for g in group_values]]
        raw = {a: events.raw(a, firsts) for a in group_by}
        group_values = [tuple(plain(raw[a][j]) for a in group_by) for j in range(len(firsts))]
    else:
        group_values = [g[0] for g in group_values]

    # ---------------------------------------------- partitions, order
    order = np.lexsort((t, pid))
    t, kmin, kmax, pid, st, kneg, kend = t[order], kmin[order], kmax[order], pid[order], st[order], kneg[order], kend[order]
    gjoin, gread = gjoin[order], gread[order]
    flo = first_at(pid, t, stamps[rep[order]]) if stamps is not None else np.full(len(t), -1, np.int64)
    cols = {a: subset(c, order) for a, c in cols.items()}
    m = len(t)
    qfrom = kmin[:, None] if qfrom is None else qfrom[order]
    newt = np.ones(m, bool)
    if m > 1:
        newt[1:] = (pid[1:] != pid[:-1]) | (t[1:] != t[:-1])
    offsets = np.flatnonzero(np.r_[True, pid[1:] != pid[:-1]] if m else np.zeros(0, bool))
    offsets = np.append(offsets, m).astype(np.int64)
    gr, gq, point = ranks(plan, cols, st)
    grs, gqs, pointp, pred_scan = all_ranks(plan, cols, st)
    progs = pair_programs(plan, cols, st)
    if plan.negseqs:  # a negated SEQ's predicate: a predecessor's time against the reader's latest match start
        fill_ranks(plan, grs, gqs, t, [b[order] for b in match_starts(plan, prep, readers)])

    # ---------------------------------------------- aggregate cells
    cells, sums, mms = aggregate_cells(plan, fields, cols, st)
    width = max((c[1].shape[1] for c in cells), default=1)
    mult = np.zeros((m, len(cells), width), np.uint64)
    for j, (_, digits) in enumerate(cells):
        mult[:, j, : digits.shape[1]] = digits
    mmval = np.stack([x[1] for x in mms], axis=1) if mms else np.zeros((m, 0), np.float64)
    mmax = np.array([x[0] == "max" for x in mms], dtype=np.bool_)
    ncell = 1 + len(cells)

    from greta_stream.engine.columnar import kernel

    vertices = kernel.Events(kmin, kmax, newt, st, kneg, gr, gq, mult, mmval, kend, gjoin, gread, grs, gqs, qfrom,
                             flo, progs.values)
    parts_k, parts_g, parts_c, parts_m = run_kernel(plan, offsets, vertices, point, (pointp, progs), pred_scan, mmax,
                                                    ncell, group_of_part, threads, lanes)
    return KernelOutput(parts_k, parts_g, parts_c, parts_m, cells, sums, mms, group_values, prep.time_kind)


def previous_stamps(plan: KernelPlan, prep: Prepared, kmin: np.ndarray, kmax: np.ndarray) -> np.ndarray:
    """Per prepared event, the partition's time stamp before its own (-inf: none), among every
    event of the pattern's types in a window computed (SEMANTICS section 8: under contiguous any
    such event breaks a trend, whatever its local predicates say; the preparation keeps them)."""
    floor = np.full(len(prep.t), -np.inf)
    rows = np.flatnonzero((kmin <= kmax) & (prep.state >= 0))
    if not len(rows):
        return floor
    pid, _, _ = partitions((), plan.part_attrs, {a: subset(c, rows) for a, c in prep.cols.items()}, len(rows))
    t = prep.t[rows].astype(np.float64)
    order = np.lexsort((t, pid))
    pid, t = pid[order], t[order]
    stamp = np.r_[True, (pid[1:] != pid[:-1]) | (t[1:] != t[:-1])]  # the first event of its time stamp
    same_part = np.r_[False, pid[1:] == pid[:-1]]
    before = np.where(stamp & same_part, np.r_[-np.inf, t[:-1]], -np.inf)  # a stamp's first: the one before
    idx = np.maximum.accumulate(np.where(stamp, np.arange(len(t)), 0))  # each event's stamp's first event
    floor[rows[order]] = before[idx]
    return floor


def first_at(pid: np.ndarray, t: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Per vertex (sorted by partition and time), the first vertex of its partition at or after time
    `floor` (its previous time stamp): a predecessor under contiguous is at or after it."""
    values = np.unique(np.concatenate([t.astype(np.float64), floor]))
    n = len(values) + 1
    key = pid * n + np.searchsorted(values, t.astype(np.float64))
    probe = pid * n + np.searchsorted(values, floor)
    return np.searchsorted(key, probe).astype(np.int64)


def expand(plan: KernelPlan, slots: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The vertices of the positive events `rows` (of prepared `slots`): (row
    of each vertex, its state). An event of a type at several positions of
    the pattern is one vertex per position, in input order."""
    n = len(plan.states)
    slot = plan.slot_of_state()[:n]
    if not plan.shared_slots:  # each type once: a slot is a state
        return rows, slots[rows]
    rep = [rows[slots[rows] == slot[i]] for i in range(n)]
    states = np.concatenate([np.full(len(r), i, np.int64) for i, r in enumerate(rep)])
    rep_all = np.concatenate(rep)
    order = np.argsort(rep_all, kind="stable")
    return rep_all[order], states[order]


def lifts(plan: KernelPlan, store_src: np.ndarray, reads: np.ndarray) -> np.ndarray:
    """(stores,) int8: how a counted state's vertices join each store (`stores.join`): 1 an
    iteration up (`X{n,m}`'s own store, B's in `SEQ(A, B{n,m}, C)` as B reads it, the loop's store of
    `(SEQ(A, B)){n,m}`), 2 counts n.. in lane 0 (B's as C reads it), 0 as they are."""
    out = np.zeros(len(store_src), np.int8)
    if plan.counted_groups:  # each counted group's loop: its steps back (from C to B) move up
        for first, last in plan.counted_groups:
            steps = set(loop_steps(plan.states, [(first, last)], plan.skips))  # not those of a loop inside it
            for j in np.flatnonzero((store_src >= first) & (store_src <= last)):
                readers = np.flatnonzero(reads[:, j])
                if any((int(store_src[j]), int(r)) in steps and first <= r <= last for r in readers):
                    out[j] = 1
                elif plan.counts and ((readers > last) | (readers < first)).any():  # `SEQ(A, (SEQ(B, C)){2,3}, D)`:
                    # D reads n.. in lane 0, and the next iteration of a loop around it (`(SEQ(A, B{2}))+`)
                    out[j] = 2
        return out
    for c, _, _, _ in plan.counted_states:
        mine = store_src == c
        out[mine & reads[c]] = 1
        out[mine & ~reads[c]] = 2
    return out


def counting(plan: KernelPlan) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """`kernel.Wiring`'s iterate, counted, ctop and clo (`iterations.py`)."""
    n = len(plan.states)
    counted, ctop, clo = np.zeros(n, np.int8), np.zeros(n, np.int64), np.zeros(n, np.int64)
    for c, lo, hi, top in plan.counted_states:
        counted[c], ctop[c], clo[c] = 1 if hi is not None else 2, top, lo
    for group in plan.counted_groups:  # past an optional last part (`(SEQ(A, B?)){2}`): A ends iterations too
        last = group[1]
        for e in plan.iteration_ends(group):
            counted[e], ctop[e], clo[e] = counted[last], ctop[last], clo[last]
    return int(counted.max()) if n else 0, counted, ctop, clo


def run_kernel(plan, offsets, ev, point, compare, pred_scan, mmax, ncell, group_of_part, threads=None,  # noqa: ANN001, ANN202
               lanes_q=None):
    """The kernel over every partition and block of windows, in threads over
    ranges of tasks of about equal events: (window, group id, cells, MIN/MAX)
    per (group, window), a window's row in two pieces where a block was split
    between threads (`result_rows` adds them). `compare`: how each scanned
    predicate compares, and the pair programs (`all_ranks`, `pair_programs`).
    `lanes_q`: the query lanes of one traversal for several queries (`QueryLanes`)."""
    from greta_stream.engine.columnar import blocks, kernel

    pointp, progs = compare

    kmin, kmax, mult = ev.kmin, ev.kmax, ev.mult
    m = len(kmin)
    if m == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, ncell, 1), np.uint64), ev.mmval[:0]
    kwidth = int((kmax - kmin).max()) + 1
    k_first = int(kmin.min())
    start, final, store_src, reads, keyed, gen, scan_store = (lanes_q or plan).stores()
    nq = lanes_q.nq if lanes_q is not None else 1
    scanned = np.zeros(len(store_src), np.bool_)
    scanned[scan_store] = True
    nonzero = (mult != 0).any(axis=0)  # (cells - 1, digits)
    ndig = np.zeros(ncell, np.int64)
    for c in range(ncell - 1):
        ndig[c + 1] = int(np.flatnonzero(nonzero[c]).max()) + 1 if nonzero[c].any() else 0
    conj, clause = plan.scan_groups
    wiring = kernel.Wiring(start, final, store_src, reads, keyed, point, ndig, mmax, gen, scanned, pointp,
                           scan_store[pred_scan], conj, clause, plan.propagate_mm, nq, lanes_q is not None,
                           start[:, None] if lanes_q is None else lanes_q.startq,
                           final[:, None] if lanes_q is None else lanes_q.finalq,
                           np.zeros(len(start), np.int64) if lanes_q is None else lanes_q.qlo,
                           np.ones(len(start), np.int64) if lanes_q is None else lanes_q.qhi,
                           kernel.NEXT_MATCH if plan.next_match else kernel.CONTIGUOUS if plan.contiguous
                           else kernel.ANY_MATCH, *counting(plan), lifts(plan, store_src, reads), progs.steps,
                           progs.at)
    n_groups = int(group_of_part.max()) + 1 if len(group_of_part) else 1
    cores = os.cpu_count() or 1
    workers = min(cores, threads or cores, MAX_THREADS) if m >= PARALLEL_EVENTS else 1
    # a block's lanes: windows times query lanes; iteration counts take as many windows per block as a
    # query (an event's iteration lanes are all its own: a block as wide costs fewer visits per event)
    lanes = min(kwidth, max(1, BLOCK_LANES if plan.iterations is not None else BLOCK_LANES // nq))
    while True:
        task = blocks.tasks(offsets, kmin, kmax, k_first, lanes)
        # contiguous ranges of tasks, about equal in events, one per thread
        work = np.cumsum(task[:, 3] - task[:, 2])
        cuts = np.searchsorted(work, np.linspace(0, work[-1], workers + 1)[1:-1])
        bounds = sorted({0, *cuts.tolist(), len(task)})

        def chunk(lo: int, hi: int, task: np.ndarray = task, lanes: int = lanes) -> tuple[np.ndarray, ...] | None:
            try:
                rows, ok, og, oc, om = kernel.run(task, lo, hi, k_first, lanes, group_of_part, n_groups, ev, wiring,
                                                  ncell, START_LIMBS, MAX_TREE_BYTES // 8)
            except ZeroDivisionError as exc:  # a pair's divisor of 0 where Python evaluates it (`pairs`)
                raise Unsupported(f"{exc}: a divisor of both events' values is 0 for some pair") from None
            return (ok[:rows], og[:rows], oc[:rows], om[:rows]) if rows >= 0 else None

        ranges = list(zip(bounds[:-1], bounds[1:]))
        if len(ranges) == 1:
            pieces = [chunk(*ranges[0])]
        else:
            with ThreadPoolExecutor(len(ranges)) as pool:
                pieces = list(pool.map(lambda r: chunk(*r), ranges))
        done = [p for p in pieces if p is not None]
        if len(done) == len(pieces):
            break
        lanes = max(1, lanes // 4)  # a block's tree would pass MAX_TREE_BYTES: smaller blocks, same rows
    width = max(p[2].shape[2] for p in done)
    cells = np.concatenate([np.pad(p[2], ((0, 0), (0, 0), (0, width - p[2].shape[2]))) for p in done])
    return (np.concatenate([p[0] for p in done]), np.concatenate([p[1] for p in done]), cells,
            np.concatenate([p[3] for p in done]))



_WARM: list[bool] = []



def warm_up() -> None:
    """Load the compiled kernels (numba's on-disk cache) in this process now,
    about a second, rather than in the middle of the first window that closes."""
    if _WARM:
        return
    _WARM.append(True)
    compile_kernels()


def compile_kernels() -> Path:
    """Run every kernel once on a tiny input: compiled into numba's on-disk
    cache (`cache=True`) when not there yet, loaded from it otherwise. Returns
    the folder of the kernels' module (numba caches beside it in __pycache__,
    or under NUMBA_CACHE_DIR)."""
    from greta_stream.engine.columnar import kernel

    one = np.zeros(1, np.int64)
    plan = KernelPlan(None, (State("x", "X", True),), None, -1, 1, 1)  # type: ignore[arg-type]
    none = np.zeros((1, 0), np.int64)
    vertices = kernel.Events(one, one.copy(), np.ones(1, bool), one.copy(), one.copy(), one.copy(), one.copy(),
                        np.zeros((1, 0, 1), np.uint64), np.zeros((1, 0), np.float64), one.copy(), one.copy(),
                        one.copy(), none, none.copy(), one.copy()[:, None], one.copy(), np.zeros((1, 0), np.float64))
    progs = Programs(np.zeros((1, 0), np.float64), np.zeros((0, 2), np.int64), np.zeros(1, np.int64))
    run_kernel(plan, np.array([0, 1], np.int64), vertices, False, (np.zeros(0, np.int8), progs),
               np.zeros(0, np.int64), np.zeros(0, np.bool_), 1, np.zeros(1, np.int64))
    kernel.normalize_rows(np.zeros((1, 1, 1), np.uint64))
    return Path(kernel.__file__).parent

