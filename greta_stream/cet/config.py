"""`CetConfig`: what CET mode reports and how much it may cache (frozen, picklable)."""

from __future__ import annotations

from dataclasses import dataclass

COMPLETE = "complete"
ALL = "all"


@dataclass(frozen=True)
class CetConfig:
    """Options of CET mode (docs/QUERY_LANGUAGE.md section 5).

    - `trends`: "complete" (maximal by containment, the default) or "all"
      (every trend that COUNT(*) counts).
    - `max_trends`: at most this many trends per (window, group); None = no cap.
      A capped (window, group) says `truncated` and still carries the exact
      `total`.
    - `with_events`: also report each trend's aliases and event records.
    - `cache_units`: memory budget of the graphlet cache, in cached vertex
      references (CET paper section 7: one event of a stored partial trend is
      one unit), over the whole extractor.
    - `graphlet_units`: the most units one graphlet may cache; a pane whose
      partial trends need more is cut into several time-centric graphlets.
    - `threads`: threads that compute a window's reduced edges (complete
      trends over range edges) and that walk slices of its start vertices
      (order edges), docs/DESIGN.md; the result never depends on it.
    - `distribute_over`: a window of one partition (one run) with more vertices
      than this is not enumerated here: its records are deferred
      (`greta_stream.cet.distributed`) and a Spark pipeline extracts them as a
      distributed job. None (the default): never. The records never depend on it.
    """

    trends: str = COMPLETE
    max_trends: int | None = None
    with_events: bool = False
    cache_units: int = 2_000_000
    graphlet_units: int = 200_000
    threads: int = 1
    distribute_over: int | None = None

    def __post_init__(self) -> None:
        if self.trends not in (COMPLETE, ALL):
            raise ValueError(f"trends must be {COMPLETE!r} or {ALL!r}, got {self.trends!r}")
        if self.max_trends is not None and (isinstance(self.max_trends, bool) or self.max_trends < 1):
            raise ValueError(f"max_trends must be a positive integer or None, got {self.max_trends!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"threads must be a positive integer, got {self.threads!r}")
        if self.distribute_over is not None and (isinstance(self.distribute_over, bool)
                                                 or not isinstance(self.distribute_over, int)
                                                 or self.distribute_over < 0):
            raise ValueError(f"distribute_over must be an integer >= 0 or None, got {self.distribute_over!r}")
        if self.cache_units < 0 or self.graphlet_units < 0:
            raise ValueError("cache_units and graphlet_units must not be negative")

    @property
    def complete(self) -> bool:
        return self.trends == COMPLETE
