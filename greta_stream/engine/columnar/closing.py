"""Windows that close in a columnar stream (`stream.ColumnarStream.advance_members`):
every pass's rows of the windows the watermark passed, computed by the
kernels over the kept events or read from the carried aggregates (`carried.py`),
and the kept events no open window needs dropped."""

from __future__ import annotations

import math
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from greta_stream.engine.columnar import Prepared, Unsupported
from greta_stream.engine.columnar.carried import CarriedAggregates, NotCarried, Relayout
from greta_stream.engine.columnar.driver import compute_cells
from greta_stream.engine.columnar.kept import KeptChunk, joined, reslotted, rewindowed
from greta_stream.engine.columnar.passes import rolled_up
from greta_stream.engine.columnar.rows import result_rows
from greta_stream.engine.columnar.snapshot import hand_over
from greta_stream.engine.columnar.union import union_outputs

if TYPE_CHECKING:
    from greta_stream.engine.columnar.stream import ColumnarStream


def advance_members(stream: ColumnarStream, watermark: Any) -> list[tuple[str, dict[str, Any]]]:
    """(member query, row) of every window that ends by `watermark` and was not reported."""
    if stream.generals:
        return [(name, row) for name, engine in stream.generals.items() for row in engine.advance(watermark)]
    if watermark <= stream.watermark:
        return []
    targets = [None if watermark == math.inf else stream._tb(i).first_window(watermark)
               for i in range(len(stream.passes))]
    if not stream.n_kept or all(t is not None and t == k for t, k in zip(targets, stream.next_ks)):
        stream.front.watermark, stream.next_ks = watermark, targets  # no window closes
        return []
    prep = joined(stream._chunks, stream.plan)
    try:
        rows, stay = pass_rows(stream, prep, stream._view(), targets, watermark)
    except Unsupported as exc:  # the kept events together are not for us (ints and floats in one SUM, ...)
        hand_over(stream, str(exc))
        return advance_members(stream, watermark)
    stream.front.watermark, stream.next_ks = watermark, targets
    stream._chunks = still_needed(stream._chunks, stay)
    for name, _ in rows:
        stream.rows_emitted[name] = stream.rows_emitted.get(name, 0) + 1
    stream._metrics.inc("rows_emitted", len(rows))
    return rows


def pass_rows(stream: ColumnarStream, prep: Prepared, inp: Any, targets: list[int | None],
              watermark: Any) -> tuple[list[Any], np.ndarray]:
    """Every pass's rows of the windows that close, and which kept events some window still needs."""
    rows: list[tuple[str, dict[str, Any]]] = []
    stay = np.zeros(len(prep.good), bool)
    outs = carried_outputs(stream, prep, inp, targets, watermark) if stream.carried is not None else None
    for i, (p, k_from, target) in enumerate(zip(stream.passes, stream.next_ks, targets)):
        prep_p = prep if p.plan is stream.plan else rewindowed(reslotted(prep, stream.plan.types, p.plan.types), p.plan)
        if target is None or target != k_from:
            if outs is not None:
                out = outs[i]
            else:
                out = compute_cells(p.plan, prep_p, inp, k_from, target, threads=stream.threads,
                                    fields=p.fields, group_by=p.group_by, lanes=p.lanes)
            if out is not None:
                mine = (union_outputs(p.lanes, out) if p.lanes is not None
                        else [rolled_up(out, m, len(p.group_by)) for m in p.members])
                for m, o in zip(p.members, mine):
                    rows += zip(repeat(m.name), result_rows(m.cq, o, m.field_of))
        if target is not None:
            stay |= prep_p.kmax >= target
    return rows, stay


def carried_outputs(stream: ColumnarStream, prep: Prepared, inp: Any, targets: list[int | None],
                    watermark: Any) -> list[Any] | None:
    """Feed the carried aggregates the kept events the watermark passed since
    the last feed (all of them before it, when stale) and read the closing
    windows' partial rows per pass; None when the stream computes from
    the kept events from now on."""
    assert stream.carried is not None
    passed = before(prep.t, watermark)
    fresh = passed & ~before(prep.t, stream._fed_until)
    outs = []
    try:
        for i, (p, k_from, target) in enumerate(zip(stream.passes, stream.next_ks, targets)):
            prep_p = prep if p.plan is stream.plan else rewindowed(prep, p.plan)
            carried = stream.carried[i]
            try:
                if stream._stale:
                    raise Relayout("stale")
                carried.feed(rows_of(prep_p, fresh), inp, k_from)
            except Relayout:
                stream._metrics.inc("incremental_rebuilds")
                carried = stream.carried[i] = CarriedAggregates(p.plan, p.fields, p.group_by)
                carried.feed(rows_of(prep_p, passed), inp, k_from)
            outs.append(carried.rows(-(2**62) if k_from is None else k_from, target)
                        if target is None or target != k_from else None)
        stream._stale, stream._fed_until = False, watermark
        if sum(c.nbytes for c in stream.carried) > stream.carried_budget_bytes:
            raise NotCarried("over the budget")
    except NotCarried:
        stream._metrics.inc("incremental_fallbacks")
        stream.carried = None
        return None
    return outs


def next_window_ends(stream: ColumnarStream) -> dict[str, Any]:
    """Per member query, the end of its first window not yet reported (after the watermark)."""
    if stream.generals:
        ends = {name: engine.next_window_end() for name, engine in stream.generals.items()}
        return {name: end for name, end in ends.items() if end is not None}
    if not stream.n_kept or stream.watermark == math.inf:
        return {}
    t = stream.watermark
    if t == -math.inf:
        t = min(c.prep.t.min().item() for c in stream._chunks)
    out = {}
    for i, p in enumerate(stream.passes):
        tb = stream._tb(i)
        for m in p.members:
            out[m.name] = tb.end(tb.first_window(t))
    return out


def before(t: np.ndarray, watermark: Any) -> np.ndarray:
    """Which times are before the watermark (-inf: none, inf: all)."""
    if watermark == -math.inf:
        return np.zeros(len(t), bool)
    if watermark == math.inf:
        return np.ones(len(t), bool)
    return np.asarray(t < watermark, dtype=bool)


def still_needed(chunks: list[KeptChunk], stay: np.ndarray) -> list[KeptChunk]:
    """The chunks that hold an event some open window needs (`stay`, over the
    chunks joined). A chunk is the unit of state too: one stays whole while at
    least half of its events are needed (the others are in no open window; the
    kernels skip them), and is cut down to the needed ones below that (a new
    chunk: each event is written again at most a few times)."""
    out = []
    end = 0
    for chunk in chunks:
        start, end = end, end + len(chunk)
        alive = stay[start:end]
        n = int(alive.sum())
        if n == len(chunk):
            out.append(chunk)
        elif n:
            out.append(chunk if 2 * n >= len(chunk) else chunk.subset(alive))
    return out


def rows_of(prep: Prepared, sel: np.ndarray) -> Prepared:
    """The prepared events of `sel`, still pointing at their rows of the kept events (`good`)."""
    return Prepared(prep.good[sel], prep.state[sel], prep.t[sel], prep.kmin[sel], prep.kmax[sel],
                    {a: type(c)(c.kind, c.values[sel], c.null[sel], c.number[sel]) for a, c in prep.cols.items()},
                    prep.int_time, [], prep.metrics, prep.time_kind)

