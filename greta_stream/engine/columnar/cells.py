"""Exact aggregate cells per event: what each event adds to COUNT, SUM and AVG, in 32-bit digits.

A float value v enters as the integer v * 2**S for the smallest S that makes
every value of its attribute whole, so sums are exact integers the kernel
adds limb by limb; MIN and MAX are carried as float64 values. Over ints
beside floats (39 beside 39.02, as JSON encoders write numbers) a whole
value was an int: MIN and MAX give it back as one, and a count of the floats
each sum took (a COUNT cell) says which sums are of ints alone (ints).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from greta_stream.engine.columnar.columns import INT, MIXED, MIXED_WHOLE, Unsupported
from greta_stream.engine.columnar.copies import copies
from greta_stream.engine.columnar.plan import KernelPlan
from greta_stream.engine.columnar.prepare import subset

DIGIT_BITS = 32  # a SUM value enters as a multiplier in digits of one limb each


MAX_DIGITS = 40



def aggregate_cells(plan: KernelPlan, fields: tuple[Any, ...], cols: dict[str, Any],
                    st: np.ndarray, min_scales: dict[int, int] | None = None) -> tuple[list, dict, list]:
    """Exact cells with their own multipliers per event, in 32-bit digits
    (n, digits): COUNT(X) (multiplier 1) and, per SUM/AVG value, |value| *
    2**scale for the positive and for the negative values
    (`sums[field] = (scale, digits, signs, kind)`); MIN/MAX with their values.
    `min_scales[field]`: a float SUM's scale is at least this (a stream
    keeps one scale over its micro-batches)."""
    m = len(st)
    # the states of each field's alias: its own, and its copies (`copies.written_out`)
    states_of = {f.alias: copies(plan.states, f.alias) for f in fields}
    cells: list[tuple[tuple[Any, ...], np.ndarray]] = []
    sums: dict[int, tuple[int, int, tuple[str, ...], str]] = {}
    mms: list[tuple[str, np.ndarray, int, str]] = []
    for i, f in enumerate(fields):
        mine = np.isin(st, states_of[f.alias])  # the field's alias: other events add nothing
        if f.kind == "count":
            cells.append(((i, "n"), mine.astype(np.uint64)[:, None]))
            continue
        col = subset(cols[f.attr], mine) if len(plan.states) > 1 else cols[f.attr]
        if col.kind == MIXED_WHOLE:
            raise Unsupported(f"{f.kind.upper()} over ints beside whole floats such as 2.0 ({f.attr!r}): which "
                              "value was an int no longer shows")
        if f.kind == "sum":
            scale, mag, shift, negative = _magnitudes(col, (min_scales or {}).get(i, 0))
            top = int((shift + 53).max()) if col.kind != INT and len(col.values) else 64
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
            if col.kind == MIXED:  # how many floats each sum took: a sum of ints alone is an int
                floats = np.zeros(m, np.uint64)
                floats[mine] = col.values != np.floor(col.values)
                cells.append(((i, "f"), floats[:, None]))
            sums[i] = (scale, digits, signs, col.kind)
        else:
            if col.kind == INT and len(col.values) and np.abs(col.values).max() > 1 << 53:
                raise Unsupported(f"MIN/MAX over integers beyond 2**53 ({f.attr!r})")
            values = np.full(m, np.nan)  # NaN: an event of another alias (its value is not the field's)
            values[mine] = col.values.astype(np.float64)
            mms.append((f.kind, values, i, col.kind))
    return cells, sums, mms


def _magnitudes(col: Any, min_scale: int = 0) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """(scale S >= min_scale, |mantissa| as uint64, shift, negative) with |v| * 2**S == mantissa << shift exactly."""
    v = col.values
    if col.kind == INT:
        mag = np.abs(v.astype(np.int64)).astype(np.uint64)  # |-2**63| wraps to 2**63 as uint64: still right
        return 0, mag, np.zeros(len(v), np.int64), v < 0
    mant, exp = np.frexp(v)  # v = mant * 2**exp, 0.5 <= |mant| < 1
    mag = np.abs(np.ldexp(mant, 53)).astype(np.uint64)  # exact 53-bit integer mantissa
    exp = exp.astype(np.int64) - 53  # v = +-mag * 2**exp
    nz = mag != 0
    scale = max(int(max(0, -exp[nz].min())) if nz.any() else 0, min_scale)
    return scale, mag, np.where(nz, exp + scale, 0), v < 0


def _digit(mag: np.ndarray, shift: np.ndarray, d: int) -> np.ndarray:
    """Bits [32d, 32d + 32) of mag << shift (shift >= 0), vectorized."""
    mask = np.uint64((1 << DIGIT_BITS) - 1)
    lo = DIGIT_BITS * d - shift  # bit of mag that lands at the digit's bit 0
    right = np.where((lo >= 0) & (lo < 64), lo, 0).astype(np.uint64)
    left = np.where((lo < 0) & (lo > -DIGIT_BITS), -lo, 0).astype(np.uint64)
    out = np.where(lo >= 0, np.right_shift(mag, right), np.left_shift(mag, left)) & mask
    return np.where((lo >= 64) | (lo <= -DIGIT_BITS), np.uint64(0), out)

