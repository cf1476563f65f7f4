"""Kernel output -> result rows: partial rows summed per (group, window), then finished.

Rows are finished by the engine's one row finisher
(`greta_stream.engine.rows.RowFinisher`) from exact values, in the general
engine's order: window, then group values (numbers before strings).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.columnar.columns import INT, MIXED
from greta_stream.engine.engine import group_order
from greta_stream.engine.rows import RowFinisher, SumColumn
from greta_stream.engine.timebase import Timebase


def result_rows(cq: CompiledQuery, out: Any, field_of: Sequence[int] | None = None) -> list[dict[str, Any]]:
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
    counted = cells[:, 0, :].any(axis=1)  # only windows with a trend have a row
    ks, gids, cells, mins, maxs = ks[counted], gids[counted], cells[counted], mins[counted], maxs[counted]
    finisher = RowFinisher(cq, Timebase.create(time_kind, cq.window.within, cq.window.slide))
    slot_cell = {spec: j + 1 for j, (spec, _) in enumerate(cell_spec)}
    slot_mm = {i: (j, kind, vkind) for j, (kind, _, i, vkind) in enumerate(mm_spec)}

    def count_of(field: int) -> list[int]:
        return exact_ints(cells[:, slot_cell[(field_of[field], "n")], :])

    def sum_of(field: int) -> SumColumn:
        u = field_of[field]
        scale, _, signs, vkind = sums[u]
        nums = [0] * len(ks)
        for sg in signs:
            part = exact_ints(cells[:, slot_cell[(u, sg)], :])
            nums = [a - b for a, b in zip(nums, part)] if sg == "-" else [a + b for a, b in zip(nums, part)]
        if vkind == MIXED:  # a sum of ints alone is an int (`num` a multiple of 2**scale)
            floats = [n > 0 for n in exact_ints(cells[:, slot_cell[(u, "f")], :])]
            return SumColumn([x if f else x >> scale for x, f in zip(nums, floats)],
                             [scale if f else 0 for f in floats], floats)
        return SumColumn(nums, 0 if vkind == INT else scale, vkind != INT)

    def extreme_of(field: int) -> list[Any]:
        j, kind, vkind = slot_mm[field_of[field]]
        values = (mins if kind == "min" else maxs)[:, j]
        if vkind == MIXED:  # a whole value of ints beside floats that are never whole was an int
            return [int(v) if math.isfinite(v) and v.is_integer() else v for v in values.tolist()]
        if vkind == INT:  # +-inf: no event of the alias on the row's trends (the finisher writes None)
            return np.where(np.isfinite(values), values, 0).astype(np.int64).tolist()
        return values.tolist()

    groups = [group_values[g] for g in gids.tolist()]
    return finisher.rows(ks.tolist(), groups, exact_ints(cells[:, 0, :]), count_of, sum_of, extreme_of)


def exact_ints(limbs: np.ndarray) -> list[int]:
    """Python ints of rows of 32-bit limbs (least significant first, each
    below 2**32): two limbs at once in numpy, wider values one at a time."""
    n, width = limbs.shape
    if width == 0:
        return [0] * n
    low = limbs[:, 0].astype(np.uint64)
    if width > 1:
        low = low | (limbs[:, 1].astype(np.uint64) << np.uint64(32))
    out = low.tolist()
    if width > 2:
        wide = np.flatnonzero(limbs[:, 2:].any(axis=1))
        if len(wide):
            # the wide rows 64 bits at a time: numpy pairs the limbs, Python shifts and adds the words
            rows = limbs[wide]
            if width % 2:
                rows = np.concatenate([rows, np.zeros((len(wide), 1), rows.dtype)], axis=1)
            words = rows[:, 0::2].astype(np.uint64) | (rows[:, 1::2].astype(np.uint64) << np.uint64(32))
            values = words[:, -1].tolist()
            for j in range(words.shape[1] - 2, -1, -1):
                values = [(v << 64) | w for v, w in zip(values, words[:, j].tolist())]
            for i, v in zip(wide.tolist(), values):
                out[i] = v
    return out
