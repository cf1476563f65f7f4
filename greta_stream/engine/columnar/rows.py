"""Kernel output -> result rows: partial rows summed per (group, window), then finished.

Rows are finished by the engine's one row finisher
(`greta_stream.engine.rows.RowFinisher`) from exact values, in the general
engine's order: window, then group values (numbers before strings).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.columnar.columns import INT
from greta_stream.engine.engine import group_order
from greta_stream.engine.rows import ExactSum, RowFinisher
from greta_stream.engine.timebase import Timebase


def result_rows(cq: CompiledQuery, out: Any, field_of: list[int] | None = None) -> list[dict[str, Any]]:
    """Sum the kernel's partial rows (`driver.KernelOutput`) per (group,
    window) and build the result rows of `cq`. `field_of[f]` is the kernel's
    field for the query's field f (a shared pass computes the union of its
    queries' fields); by default the same."""
    from greta_stream.engine.columnar import kernel

    ks, gids, cells, mm, group_values = out.ks, out.gids, out.cells, out.mm, out.group_values
    cell_spec, sums, mm_spec, time_kind = out.cell_spec, out.sums, out.mm_spec, out.time_kind
    field_of = field_of if field_of is not None else list(range(len(cq.fields)))
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
    rank[sorted(range(len(group_values)), key=lambda g: tuple(group_order(v) for v in group_values[g]))] = np.arange(
        len(group_values))
    order = np.lexsort((rank[gids], ks))
    ks, gids, cells, mins, maxs = ks[order], gids[order], cells[order], mins[order], maxs[order]
    as_bytes = cells.astype("<u4")
    finisher = RowFinisher(cq, Timebase.create(time_kind, cq.window.within, cq.window.slide))
    slot_cell = {spec: j + 1 for j, (spec, _) in enumerate(cell_spec)}
    slot_mm = {i: (j, kind, vkind) for j, (kind, _, i, vkind) in enumerate(mm_spec)}
    out = []
    for r in range(len(ks)):
        def big(c: int, r: int = r) -> int:
            return int.from_bytes(as_bytes[r, c].tobytes(), "little")

        def count_of(field: int, big: Any = big) -> int:
            return big(slot_cell[(field_of[field], "n")])

        def sum_of(field: int, big: Any = big) -> ExactSum:
            u = field_of[field]
            scale, _, signs, vkind = sums[u]
            total = sum(-big(slot_cell[(u, sg)]) if sg == "-" else big(slot_cell[(u, sg)]) for sg in signs)
            return ExactSum(total, 0 if vkind == INT else scale, vkind != INT)

        def extreme_of(field: int, r: int = r) -> Any:
            j, kind, vkind = slot_mm[field_of[field]]
            x = float(mins[r, j] if kind == "min" else maxs[r, j])
            return int(x) if vkind == INT else x

        count = big(0)
        if count:
            out.append(finisher.row(int(ks[r]), group_values[gids[r]], count, count_of, sum_of, extreme_of))
    return out
