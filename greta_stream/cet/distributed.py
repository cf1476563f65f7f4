"""Deferred windows: the extraction of one large window, split by anchors.

A window of one partition and run with more than `CetConfig.distribute_over`
vertices is not enumerated by the extractor. It becomes a `DeferredWindow`:
the window's graph (pickled), what its records need (bounds, group, exact
total, `truncated`) and the number of trends each *anchor* (a source of the
walk, `WindowView.sources`) starts, counted by the exact DP over the graph.
The trends of a window are the anchors' trends in anchor order, each anchor's
in depth-first order (windows.py), so:

1. `DeferredWindow.take` trends are needed (the window's share of its
   group's `max_trends`, fixed by the extractor from the exact counts);
2. `split` cuts the first anchors that hold them into contiguous ranges and
   gives each range exactly its share: all of its anchors' trends, the last
   range what is left;
3. `extract` enumerates one range on its own (any process: it rebuilds the
   view from the pickled graph);
4. the ranges' records, concatenated in range order, are the records the
   extractor would have emitted, whatever the number of ranges.

This is the anchor decomposition of ABI (Mei et al., ICPP 2021, section 4):
trends never cross anchors, so each anchor's partial trends can be built on
its own. No pyspark here: `greta_stream.spark.cet_distributed` runs `extract`
as Spark tasks; `records` runs it in this process.
"""

from __future__ import annotations

import base64
import pickle
import zlib
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from greta_stream.cet.config import CetConfig
from greta_stream.cet.graphlets import Budget
from greta_stream.cet.plan import CetPlan
from greta_stream.cet.ranges import RangeGraph
from greta_stream.cet.rangeview import RangeView
from greta_stream.cet.windows import WindowView
from greta_stream.compiler.compiled import compile_query
from greta_stream.engine.plan import Metrics
from greta_stream.engine.timebase import Timebase

DEFERRED = "__greta_deferred"  # the key of a record that stands for a deferred window's records

Range = tuple[int, int, int]  # anchors [a, b) and how many of their trends to emit


@dataclass(frozen=True)
class DeferredWindow:
    """One window of one partition and run whose records are extracted elsewhere."""

    query: str  # the query text
    time_kind: str
    config: CetConfig
    k: int  # the window
    graph: bytes  # the run's graph, pickled (a range graph: only the window's vertices)
    head: dict[str, Any]  # window bounds and group columns of its records
    counts: tuple[int, ...]  # trends per anchor, in walk order
    take: int  # how many of its trends the records hold (its share of the group's cap)
    total: int  # the exact total of the (window, group), as every record carries it
    truncated: bool

    @property
    def trends(self) -> int:
        """The trends of this window and run (all anchors)."""
        return sum(self.counts)


def to_text(d: DeferredWindow) -> str:
    """A deferred window as text (pickled, compressed, base64): how it travels in an output row."""
    return base64.b64encode(zlib.compress(pickle.dumps(d, protocol=pickle.HIGHEST_PROTOCOL), 1)).decode("ascii")


def from_text(text: str) -> DeferredWindow:
    d = pickle.loads(zlib.decompress(base64.b64decode(text)))
    if not isinstance(d, DeferredWindow):
        raise TypeError(f"not a deferred window: {type(d).__name__}")
    return d


def view_of(graph: Any, plan: CetPlan, config: CetConfig, budget: Budget, k: int) -> WindowView:
    """The view the extractor uses for window k of `graph`."""
    cls = RangeView if isinstance(graph, RangeGraph) else WindowView
    return cls(graph, plan, config, budget, k)


def distributable(view: WindowView) -> bool:
    """Are the view's counts exact without the walk? Not for complete trends of
    events bound to two aliases (each candidate needs the exact check)."""
    return not (view.reduced and view.plan.rebinding)


def pickled_window(graph: Any, plan: CetPlan, k: int) -> bytes:
    """The graph as bytes; a range graph keeps only window k's vertices (its
    edges are ranges over them), an edge graph is pickled whole (its edges
    link vertices of other windows)."""
    if isinstance(graph, RangeGraph):
        a, b = graph.window_slice(plan.tb.start(k), plan.tb.end(k))
        graph = _range_slice(graph, a, b)
    return pickle.dumps(graph, protocol=pickle.HIGHEST_PROTOCOL)


def _range_slice(graph: RangeGraph, a: int, b: int) -> RangeGraph:
    out = RangeGraph()
    out.__setstate__({"verts": graph.verts[a:b], "next_gi": graph.next_gi, "negation": graph.negation})
    return out


def split(counts: tuple[int, ...] | list[int], take: int, n: int) -> list[Range]:
    """Contiguous anchor ranges that hold the first `take` trends, at most `n`
    of them, balanced by trend count; each with its exact share."""
    if take <= 0 or not counts:
        return []
    cum = list(accumulate(counts))
    m = next((i + 1 for i, c in enumerate(cum) if c >= take), len(cum))  # anchors needed
    need = min(take, cum[m - 1])
    cuts = [0]
    for r in range(1, max(1, min(n, m))):
        target = need * r // min(n, m)
        i = cuts[-1] + 1
        while i < m and cum[i - 1] < target:
            i += 1
        if i < m:
            cuts.append(i)
    cuts.append(m)
    out: list[Range] = []
    done = 0
    for a, b in zip(cuts, cuts[1:], strict=False):
        share = min(cum[b - 1] - done, need - done)
        out.append((a, b, share))
        done += share
    return out


def plan_of(d: DeferredWindow) -> CetPlan:
    cq = compile_query(d.query, limits=None)
    w = cq.window
    return CetPlan(cq, Timebase.create(d.time_kind, w.within, w.slide), Metrics())


def extract(d: DeferredWindow, a: int, b: int, share: int, plan: CetPlan | None = None) -> list[dict[str, Any]]:
    """The records of anchors [a, b) of `d`: their first `share` trends, in order."""
    if share <= 0:
        return []
    plan = plan or plan_of(d)
    view = view_of(pickle.loads(d.graph), plan, d.config, Budget(d.config.cache_units), d.k)
    view.sources = view.sources[a:b]
    out: list[dict[str, Any]] = []
    for ids, vs in view.walk():
        rec = dict(d.head, trend=list(ids), total=d.total, truncated=d.truncated)
        if d.config.with_events:
            rec["aliases"] = [v.alias for v in vs]
            rec["events"] = [v.attrs for v in vs]
        out.append(rec)
        if len(out) >= share:
            break
    return out


def records(d: DeferredWindow, ranges: int = 1) -> list[dict[str, Any]]:
    """Every record of `d`, extracted here in `ranges` ranges (the same records for any number)."""
    plan = plan_of(d)
    return [rec for a, b, share in split(d.counts, d.take, ranges) for rec in extract(d, a, b, share, plan)]


def expand(rows: list[dict[str, Any]], ranges: int = 1) -> list[dict[str, Any]]:
    """Rows with each deferred record replaced by its records, in place."""
    out: list[dict[str, Any]] = []
    for row in rows:
        d = row.get(DEFERRED)
        out += records(d, ranges) if d is not None else [row]
    return out
