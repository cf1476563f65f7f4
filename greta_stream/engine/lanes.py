"""Packed aggregates: every window's additive slots in one Python int.

A positive vertex keeps one intermediate aggregate per window it falls in
(GRETA section 6). Instead of a list of per-window lists, its additive slots
(trend count, COUNT(X), the parts of SUM(X.a)) live in one int: lane j holds
window kmin + j, and each lane is a row of fixed-width *cells*, one per slot.
Combining two aggregates is then one shift (to align the first windows) and
one add, whatever the number of windows (SIMD within a register, on Python's
exact big ints).

Cells never carry into their neighbours because every stored sum is kept
below a *guard* height with headroom for the few values added before the next
check (see `Layout`). When a check fails, the run is *promoted*: every packed
value is unpacked and repacked with wider cells, so counts stay exact at any
size. Cells appear the first time they are needed (a run that only ever sums
ints has no float cells).

Cell names: `n` trend count; `c<i>` COUNT of field i; for SUM field i:
`ip<i>`/`in<i>` the sums of positive/negative int values, `fp<i>`/`fn<i>`
the same for float values in units of 2**-S (S per run, see `Run.fscale`),
`fc<i>` the number of (trend, float value) pairs (a window's SUM is a float
iff it is positive). Every cell is non-negative, so sums of packed values
never borrow.
"""

from __future__ import annotations

from typing import Any

COUNT_CELLS = ("n", "c", "fc")


def _is_sum(name: str) -> bool:
    return not name.startswith(COUNT_CELLS)


class Layout:
    """Cell offsets and widths of one lane, and the masks that go with them.

    With B = bit length of (max incoming transitions + 1), count cells are
    guarded below 2**hc and sum cells below 2**hs, hs = hc + a, where a
    bounds the bit length of every summed |value| (in cell units). A vertex's
    aggregate adds at most 2**B - 1 guarded values and its own start, so its
    count cells stay below 2**(hc+B); times a value that is below
    2**(hc+B+a). Widths hc+B+2 and hs+B+2 hold that and one more guarded sum;
    they are rounded up to whole bytes, so widening a layout (a promotion)
    moves every cell as a column of bytes (`_repack_bytes`) instead of
    unpacking lane by lane.
    """

    def __init__(self, cells: tuple[str, ...], hc: int, a: int, b: int) -> None:
        self.cells, self.hc, self.a, self.b = cells, hc, a, b
        hs = hc + a
        self.off: dict[str, int] = {}
        self.width: dict[str, int] = {}
        guard = pos = 0
        for c in cells:
            w, h = (hs + b + 2, hs) if _is_sum(c) else (hc + b + 2, hc)
            w = -(-w // 8) * 8  # whole bytes: `repack` moves cells as byte columns
            self.off[c], self.width[c] = pos, w
            guard |= (((1 << w) - 1) ^ ((1 << h) - 1)) << pos
            pos += w
        self.lw = pos
        self.guard_lane = guard
        self.n_mask_lane = (1 << self.width["n"]) - 1  # "n" is always first, at offset 0
        self._ones: dict[int, int] = {}
        self._guards: dict[int, int] = {}  # masks by number of lanes
        self._counts: dict[int, int] = {}

    def __reduce__(self) -> Any:
        return (Layout, (self.cells, self.hc, self.a, self.b))

    def ones(self, m: int) -> int:
        """1 in the lowest bit of each of m lanes."""
        v = self._ones.get(m)
        if v is None:
            v = self._ones[m] = ((1 << (m * self.lw)) - 1) // ((1 << self.lw) - 1) if m > 0 else 0
        return v

    def lanes(self, x: int) -> int:
        return x.bit_length() // self.lw + 1

    def ok(self, x: int) -> bool:
        """Every cell of x is below its guard height."""
        m = x.bit_length() // self.lw + 1
        mask = self._guards.get(m)
        if mask is None:
            mask = self._guards[m] = self.ones(m) * self.guard_lane
        return not (x & mask)

    def count_part(self, x: int, m: int) -> int:
        """The trend-count cells of x (m lanes), other cells cleared."""
        mask = self._counts.get(m)
        if mask is None:
            mask = self._counts[m] = self.ones(m) * self.n_mask_lane
        return x & mask

    def nonzero_lanes(self, cnt: int, m: int) -> int:
        """1 (at the n cell) in each lane whose count cell is non-zero.

        Count cells are below 2**(w-1), so adding 2**(w-1) - 1 sets bit w-1
        exactly where the cell is positive, without carrying out of the cell.
        """
        w = self.width["n"]
        ones = self.ones(m)
        return ((cnt + ones * ((1 << (w - 1)) - 1)) & (ones << (w - 1))) >> (w - 1)

    def lane(self, x: int, j: int) -> dict[str, int]:
        """The cells of lane j of x, by name."""
        v = (x >> (j * self.lw)) & ((1 << self.lw) - 1)
        return {c: (v >> self.off[c]) & ((1 << self.width[c]) - 1) for c in self.cells}

    def unpack(self, x: int) -> list[dict[str, int]]:
        return [self.lane(x, j) for j in range(self.lanes(x))]

    def pack(self, lanes: list[dict[str, int]]) -> int:
        out = 0
        for j, cells in enumerate(lanes):
            v = 0
            for c, val in cells.items():
                if val:
                    v |= val << self.off[c]
            out |= v << (j * self.lw)
        return out

    def repack(self, x: int, new: Layout, fshift: int = 0) -> int:
        """x in `new`'s layout; float sum cells multiplied by 2**fshift."""
        if not x:
            return 0
        if not fshift and all(new.width[c] >= self.width[c] for c in self.cells):
            return self._repack_bytes(x, new)
        lanes = self.unpack(x)
        if fshift:
            for cells in lanes:
                for c in cells:
                    if c.startswith(("fp", "fn")):
                        cells[c] <<= fshift
        return new.pack(lanes)

    def _repack_bytes(self, x: int, new: Layout) -> int:
        """`repack` without rescaling, as byte-column copies (cells are whole
        bytes and non-negative, so widening one is zero-extending it)."""
        import numpy as np

        m = self.lanes(x)
        lb, nb = self.lw // 8, new.lw // 8
        old = np.frombuffer(x.to_bytes(m * lb, "little"), dtype=np.uint8).reshape(m, lb)
        out = np.zeros((m, nb), dtype=np.uint8)
        for c in self.cells:
            a, w = self.off[c] // 8, self.width[c] // 8
            b = new.off[c] // 8
            out[:, b : b + w] = old[:, a : a + w]
        return int.from_bytes(out.tobytes(), "little")
