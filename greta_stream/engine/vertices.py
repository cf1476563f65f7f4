"""The general engine's graph storage: vertices and the panes that hold them.

A positive `Vertex` carries its intermediate aggregates per window (packed,
lanes.py); a `NegVertex` the latest start of the negative matches ending at
it. Vertices of one state are kept in time order in `Pane`s (GRETA section
7), whole panes expire; `scan` reads a time range of them. `graph.Run`
builds and aggregates them.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any


class Vertex:
    """A positive vertex: its aggregates for windows kmin .. kmin + n - 1.

    `agg` packs the additive slots of every window (lanes.py, lane j =
    window kmin + j, in the run's layout); `mm` holds the MIN/MAX slots per
    window when the query has any, else None.

    `taken` (skip-till-next-match only) maps a transition to the time of its
    earliest candidate after this vertex: later events of it are skipped
    candidates' successors, never this vertex's.
    """

    __slots__ = ("time", "attrs", "id", "kmin", "n", "agg", "mm", "taken")

    def __init__(self, time: Any, attrs: dict[str, Any], id: Any, kmin: int, n: int, agg: int, mm: Any) -> None:
        self.time, self.attrs, self.id, self.kmin, self.n, self.agg, self.mm = time, attrs, id, kmin, n, agg, mm
        self.taken: dict[int, Any] | None = None

    def __getstate__(self) -> tuple[Any, ...]:
        base = (self.time, self.attrs, self.id, self.kmin, self.n, self.agg, self.mm)
        return base if self.taken is None else (*base, self.taken)

    def __setstate__(self, s: tuple[Any, ...]) -> None:
        self.time, self.attrs, self.id, self.kmin, self.n, self.agg, self.mm = s[:7]
        self.taken = s[7] if len(s) > 7 else None


class NegVertex:
    """A vertex of a negative template: the latest start of matches ending here."""

    __slots__ = ("time", "attrs", "start")

    def __init__(self, time: Any, attrs: dict[str, Any], start: Any) -> None:
        self.time, self.attrs, self.start = time, attrs, start

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.time, self.attrs, self.start)

    def __setstate__(self, s: tuple[Any, ...]) -> None:
        self.time, self.attrs, self.start = s


class Pane:
    """Vertices of one state whose times fall in one pane, in time order."""

    __slots__ = ("index", "times", "verts")

    def __init__(self, index: int) -> None:
        self.index = index
        self.times: list[Any] = []
        self.verts: list[Any] = []

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.index, self.times, self.verts)

    def __setstate__(self, s: tuple[Any, ...]) -> None:
        self.index, self.times, self.verts = s


def scan(panes: list[Pane], lo: Any, hi: Any) -> list[Any]:
    """Vertices with lo <= time < hi, oldest first."""
    out: list[Any] = []
    for pane in panes:
        times = pane.times
        if not times or times[-1] < lo:
            continue
        if times[0] >= hi:
            break
        i, j = bisect_left(times, lo), bisect_left(times, hi)
        out.extend(pane.verts[i:j])
    return out
