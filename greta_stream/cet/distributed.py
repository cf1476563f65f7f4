"""Deferred windows: the extraction of one large window, split by anchors and prefixes.

A window of one partition and run with more than `CetConfig.distribute_over`
vertices is not enumerated by the extractor. It becomes a `DeferredWindow`:
the window's graph (pickled), what its records need (bounds, group, exact
total, `truncated`) and its trends cut into *pieces* with exact counts.

The trends of a window are, in order, those of each *anchor* (a source of
the walk, `WindowView.sources`), each anchor's in depth-first pre-order
(windows.py). So the trends that start with a path P (a *prefix*) ending at
x are P itself if x is a sink, then those starting with P + (y,) for each
successor y of x in order; their number is the path count of x, an exact
DP over the graph. A piece is a prefix with all its trends, or a prefix
alone (one trend); the pieces of a window, concatenated, are its trends:

1. `pieces` starts from the anchors and splits the largest piece that the
   first `take` trends need (the window's share of its group's `max_trends`)
   into its children, until they need `PIECES` pieces: a cap that one
   anchor's trends fill is still spread over many pieces (ABI, Mei et al.,
   ICPP 2021, section 4: trends never cross anchors; prefixes cut deeper);
2. `split` cuts the needed pieces into contiguous ranges balanced by count
   and gives each range exactly its share: all of its pieces' trends, the
   last range what is left;
3. `extract` enumerates one range on its own (any process: it rebuilds the
   view from the pickled graph);
4. the ranges' records, concatenated in range order, are the records the
   extractor would have emitted, whatever the number of ranges.

No pyspark here: `greta_stream.spark.cet_distributed` runs `extract` as
Spark tasks; `records` runs it in this process.
"""

from __future__ import annotations

import base64
import pickle
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from greta_stream.cet.config import CetConfig
from greta_stream.cet.graphlets import Budget
from greta_stream.cet.plan import ExtractionPlan
from greta_stream.cet.ranges import RangeGraph
from greta_stream.cet.rangeview import RangeView
from greta_stream.cet.windows import WindowView
from greta_stream.compiler.compiled import compile_query
from greta_stream.engine.plan import Metrics
from greta_stream.engine.timebase import Timebase
from greta_stream.query.structure import origin

DEFERRED = "__greta_deferred"  # the key of a record that stands for a deferred window's records

Range = tuple[int, int, int]  # pieces [a, b) and how many of their trends to emit
Piece = tuple[tuple[int, ...], bool]  # a prefix (window positions) and whether it stands alone
PIECES = 64  # pieces the needed trends are cut into, at most: enough for a cluster's tasks
MAX_SPLITS = 20_000  # splits per window at most (each scans one vertex's successors)


@dataclass(frozen=True)
class DeferredWindow:
    """One window of one partition and run whose records are extracted elsewhere."""

    query: str  # the query text
    time_kind: str
    config: CetConfig
    k: int  # the window
    graph: bytes  # the run's graph, pickled (a range graph: only the window's vertices)
    head: dict[str, Any]  # window bounds and group columns of its records
    pieces: tuple[Piece, ...]  # the pieces its first trends are cut into, in order
    counts: tuple[int, ...]  # trends per piece
    take: int  # how many of its trends the records hold (its share of the group's cap)
    total: int  # the exact total of the (window, group), as every record carries it
    truncated: bool


def to_text(d: DeferredWindow) -> str:
    """A deferred window as text (pickled, compressed, base64): how it travels in an output row."""
    return base64.b64encode(zlib.compress(pickle.dumps(d, protocol=pickle.HIGHEST_PROTOCOL), 1)).decode("ascii")


def from_text(text: str) -> DeferredWindow:
    d = pickle.loads(zlib.decompress(base64.b64decode(text)))
    if not isinstance(d, DeferredWindow):
        raise TypeError(f"not a deferred window: {type(d).__name__}")
    return d


def view_of(graph: Any, plan: ExtractionPlan, config: CetConfig, budget: Budget, k: int) -> WindowView:
    """The view the extractor uses for window k of `graph`."""
    cls = RangeView if isinstance(graph, RangeGraph) else WindowView
    return cls(graph, plan, config, budget, k)


def distributable(view: WindowView) -> bool:
    """Are the view's counts exact without the walk? Not for complete trends of
    events bound to two aliases (each candidate needs the exact check)."""
    return not (view.reduced and view.plan.rebinding)


def pickled_window(graph: Any, plan: ExtractionPlan, k: int) -> bytes:
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


def pieces(view: WindowView, take: int | None, target: int | None = None) -> tuple[list[Piece], list[int], int]:
    """The pieces that hold the first `take` trends of `view` (all when None),
    their counts and the number of trends of the view (see the module docstring).
    `target`: pieces wanted (default `PIECES`)."""
    target = PIECES if target is None else target
    cnt = view.path_counts() if view.n else []
    out: list[tuple[Piece, int]] = [(((s,), False), cnt[s]) for s in view.sources]
    total = sum(c for _, c in out)
    want = total if take is None else min(take, total)
    sink = view.sink
    for _ in range(MAX_SPLITS):
        acc, m = 0, 0
        for m, (_, c) in enumerate(out, 1):  # noqa: B007 - m: the pieces needed
            acc += c
            if acc >= want:
                break
        del out[m:]
        if m >= target:
            break
        best = max((i for i in range(m) if not out[i][0][1] and out[i][1] > 1), key=lambda i: out[i][1], default=None)
        if best is None:
            break
        (path, _), _ = out[best]
        x = path[-1]
        room = want - sum(c for _, c in out[:best])  # trends still needed when this piece starts
        kids = [((path, True), 1)] if sink[x] else []
        got = len(kids)
        for y in successors(view, x):  # only the children that the first `want` trends reach
            if got >= room:
                break
            kids.append(((path + (y,), False), cnt[y]))
            got += cnt[y]
        out[best:best + 1] = kids
    return [p for p, _ in out], [c for _, c in out], total


def successors(view: WindowView, i: int) -> Iterator[int]:
    """The window positions the walk goes to from position i, in its order."""
    if isinstance(view, RangeView):
        yield from view._successors(i)
        return
    g0, n, useful = view.g0, view.n, view.useful
    for w in (view.verts[i].rsucc if view.reduced else view.verts[i].succ):
        j = w.gi - g0
        if j >= n:
            break
        if useful[j]:
            yield j


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


def plan_of(d: DeferredWindow) -> ExtractionPlan:
    cq = compile_query(d.query, limits=None)
    w = cq.window
    return ExtractionPlan(cq, Timebase.create(d.time_kind, w.within, w.slide), Metrics())


def extract(d: DeferredWindow, a: int, b: int, share: int, plan: ExtractionPlan | None = None) -> list[dict[str, Any]]:
    """The records of pieces [a, b) of `d`: their first `share` trends, in order."""
    if share <= 0:
        return []
    plan = plan or plan_of(d)
    view = view_of(pickle.loads(d.graph), plan, d.config, Budget(d.config.cache_units), d.k)
    out: list[dict[str, Any]] = []
    verts, with_events = view.verts, d.config.with_events
    for path in _trends(view, d.pieces[a:b]):
        rec = dict(d.head, trend=[verts[i].eid for i in path], total=d.total, truncated=d.truncated)
        if with_events:
            rec["aliases"] = [origin(verts[i].alias) for i in path]
            rec["events"] = [verts[i].attrs for i in path]
        out.append(rec)
        if len(out) >= share:
            break
    return out


def _trends(view: WindowView, todo: tuple[Piece, ...]) -> Iterator[list[int]]:
    """The trends of each piece in order: depth-first pre-order below its prefix (explicit stack)."""
    sink = view.sink
    for prefix, alone in todo:
        path = list(prefix)
        if sink[path[-1]]:
            yield path
        if alone:
            continue
        stack = [successors(view, path[-1])]
        while stack:
            y = next(stack[-1], None)
            if y is None:
                stack.pop()
                path.pop()
                continue
            path.append(y)
            if sink[y]:
                yield path
            stack.append(successors(view, y))


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
