"""`TrendExtractor`: CET mode with the streaming interface of `Engine`.

Call order (the same as `greta_stream.engine.Engine`, so a Spark shard can
drive either):

    ex = TrendExtractor(query, config=CetConfig(trends="complete", max_trends=100))
    ex.expect(watermark)            # optional: events before it are late from now on
    ex.add(record)                  # any order; bad or late -> dead letter
    records = ex.advance(watermark) # process events before the watermark in time
                                    # order; one record per trend of every window
                                    # that ends at or before it
    records = ex.finish()           # end of input: every window
    blob = ex.snapshot()            # state as bytes; TrendExtractor.restore(query, blob)

A record: `window_start`, `window_end`, the GROUP-BY columns, `trend` (event
ids in time order), `total` (the exact number of trends of the window and
group) and `truncated` (the cap cut the list); with `with_events` also
`aliases` and `events`. For `all` trends the total comes from the
aggregation engine (its COUNT(*)), which runs alongside, except over order
edges (orders.py); for `complete` trends and order edges from an exact count
over the CET graph. Records come sorted by
window, then group, then partition and run, then depth-first trend order;
the cap keeps the first `max_trends` of that order, so streaming and batch
report the same trends. With `distribute_over`, a large window of one run
leaves as one record under the key `distributed.DEFERRED` (a
`DeferredWindow`) in its place in that order: `distributed.expand` (or a
Spark job) turns it into its records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import itertools
import math
import pickle
from collections.abc import Iterable
from typing import Any

from greta_stream.cet.config import CetConfig
from greta_stream.cet.distributed import DEFERRED, DeferredWindow, distributable, pickled_window, pieces, view_of
from greta_stream.cet.graph import TrendGraph
from greta_stream.cet.graphlets import Budget
from greta_stream.cet.orders import OrderGraph, ordered
from greta_stream.cet.orderview import OrderView
from greta_stream.cet.partition import CetPartition, canonical
from greta_stream.cet.plan import ExtractionPlan
from greta_stream.cet.ranges import RangeGraph, ranged
from greta_stream.cet.windows import Trend
from greta_stream.compiler.compiled import CompiledQuery, compile_query, format_query
from greta_stream.engine import Engine, FieldNames
from greta_stream.engine.chunks import EventLog, dumps
from greta_stream.engine.columnar.columns import frame_records
from greta_stream.engine.engine import LOGGED_FORMAT, Logged, load_snapshot
from greta_stream.engine.ingest import DeadLetterSink, Event, Front, WatermarkOf
from greta_stream.engine.plan import Metrics
from greta_stream.engine.rows import RowFinisher
from greta_stream.engine.timebase import Timebase
from greta_stream.query import ast
from greta_stream.query.structure import origin

SNAPSHOT_FORMAT = 2  # 2: negative vertices are the engine's (greta_stream.engine.graph.NegVertex)
TOTAL_COLUMN = "greta_total"

class TrendExtractor(Logged):
    """Extracts the trends of one query over a stream of records."""

    def __init__(
        self,
        query: str | CompiledQuery,
        *,
        config: CetConfig = CetConfig(),
        fields: FieldNames = FieldNames(),
        dead_letter: DeadLetterSink | None = None,
    ) -> None:
        self.cq = compile_query(query)
        self.config = config
        self.fields = fields
        self.metrics = Metrics()
        self.front = Front(self.cq, fields, self.metrics, dead_letter)
        self.budget = Budget(config.cache_units)
        self.plan: ExtractionPlan | None = None
        self.partitions: dict[tuple[Any, ...], CetPartition] = {}
        self.next_ekey = 0
        self.counter: Engine | None = None if config.complete else Engine(count_query(self.cq), fields=fields)
        self._pending: dict[tuple[int, tuple[Any, ...]], list[Any]] = {}
        self._group_at = [self.cq.common.index(g) for g in self.cq.group_by]
        self.log = EventLog()

    # -------------------------------------------------------------- input
    def add(self, record: Any) -> None:
        """Validate one record and buffer it; bad and late ones are dead-lettered."""
        if self.counter is not None:
            self.counter.add(record)
        if self._logged(self.front.add(record)) and self.plan is None:
            self.plan = self._plan()

    def add_many(self, records: Iterable[Any], watermark_of: WatermarkOf | None = None) -> None:
        """`add` each record; see `greta_stream.engine.ingest.Front.add_many` for `watermark_of`."""
        if hasattr(records, "to_dict") and hasattr(records, "columns"):
            records = frame_records(records)
        self._settled(self.front.add_many(records, watermark_of, self.add))

    def expect(self, watermark: Any) -> None:
        """Declare events before `watermark` late from now on, without processing."""
        self.front.expect(watermark)
        if self.counter is not None:
            self.counter.expect(watermark)

    def _graph_cls(self, plan: ExtractionPlan) -> type:
        """Range edges (ranges.py) when every edge is one equality or none and no event
        binds to two aliases of a complete query (that needs the exact check of windows.py);
        order edges (orders.py) for `S+` with one order comparison and nothing else."""
        if ordered(plan):
            return OrderGraph
        if ranged(plan) and plan.indexing and not (self.config.complete and plan.rebinding):
            return RangeGraph
        return TrendGraph

    def _plan(self) -> ExtractionPlan:
        w = self.cq.window
        tb = Timebase.create(self.front.time_kind or "seconds", w.within, w.slide)
        plan = ExtractionPlan(self.cq, tb, self.metrics)
        if ordered(plan):
            self.counter = None  # order edges count `all` trends exactly themselves (orderview.py)
        return plan

    # --------------------------------------------------------- processing
    def advance(self, watermark: Any) -> list[dict[str, Any]]:
        """Process buffered events before `watermark`; records of windows ending by it."""
        if watermark <= self.front.watermark:
            return []
        with _gc_paused():
            return self._advance(watermark)

    def _advance(self, watermark: Any) -> list[dict[str, Any]]:
        ready = self.front.release(watermark)
        totals = self._totals(self.counter.advance(watermark)) if self.counter is not None else {}
        plan = self.plan
        if plan is None:
            return []
        # Same-time events in a canonical order: vertex order (and so trend
        # order) must not depend on arrival order.
        ready.sort(key=lambda e: (e.time, canonical((e.id,)), e.type))
        by_partition: dict[tuple[Any, ...], list[Event]] = {}
        common = self.cq.common
        for ev in ready:
            by_partition.setdefault(tuple(ev.attrs[a] for a in common), []).append(ev)
        for key, events in by_partition.items():
            part = self.partitions.get(key)
            if part is None:
                part = self.partitions[key] = CetPartition(key, self.config.complete, self._graph_cls(plan))
            for t, same in itertools.groupby(events, key=lambda e: e.time):
                bound = []
                for ev in same:
                    ekey, self.next_ekey = self.next_ekey, self.next_ekey + 1
                    bound += [(ev, a, ekey) for a in self.cq.by_type[ev.type] if plan.local_ok(a, ev.attrs)]
                released = part.process(plan, t, bound, self._close)  # may build graphlets: read `used` after
                self.budget.used -= released
        target = None if watermark == math.inf else plan.tb.first_window(watermark)
        for key in list(self.partitions):
            part = self.partitions[key]
            released = part.close_until(plan, target, self._close)
            self.budget.used -= released
            if part.empty:
                del self.partitions[key]
        self._pruned(target)
        self.metrics["events_processed"] = self.metrics.get("events_processed", 0) + len(ready)
        self.metrics["partitions"] = len(self.partitions)
        self.metrics["cache_units"] = self.budget.used
        return self._records(totals)

    def finish(self) -> list[dict[str, Any]]:
        """End of input: process everything and report every window."""
        return self.advance(math.inf)

    @property
    def idle(self) -> bool:
        """Nothing buffered and no partition state: safe to drop entirely."""
        return not self.buffer and not self.partitions

    def next_window_end(self) -> Any:
        """End of the first window not yet reported (after the watermark), or None."""
        if self.plan is None or self.idle or self.watermark == math.inf:
            return None
        tb = self.plan.tb
        if self.watermark == -math.inf:
            first = self.front.first_time()
            return None if first is None else tb.end(tb.first_window(first))
        return tb.end(tb.first_window(self.watermark))

    # ------------------------------------------------------------ records
    def _close(self, k: int, part: CetPartition, run_key: tuple[Any, ...], graph: TrendGraph) -> None:
        """Window k of one run closed: collect its trends (up to the cap) and count;
        past `distribute_over` vertices, count them, cut them into pieces and defer them (distributed.py).
        Order edges (orders.py) are always walked here, on `CetConfig.threads`."""
        plan = self.plan
        assert plan is not None  # windows close only after the first event made the plan
        if isinstance(graph, OrderGraph):
            graph = graph.fallback or graph  # type: ignore[assignment]
        ordered_view = isinstance(graph, OrderGraph)
        view = OrderView(graph, plan, self.config, self.budget, k) if ordered_view \
            else view_of(graph, plan, self.config, self.budget, k)
        over = self.config.distribute_over
        trends: list[Trend] | _Deferral
        if over is not None and view.n > over and not ordered_view and distributable(view):
            cut, counts, total = pieces(view, self.config.max_trends)
            trends = _Deferral(pickled_window(graph, plan, k), tuple(cut), tuple(counts)) if total else []
            self.metrics.inc("windows_deferred")
        else:
            trends, total = view.collect(self.config.max_trends)
        if total:
            group = tuple(part.key[i] for i in self._group_at)
            slot = self._pending.setdefault((k, group), [])
            slot.append((canonical(part.key), canonical(run_key), trends, total))

    def _records(self, totals: dict[tuple[Any, Any, tuple[Any, ...]], int]) -> list[dict[str, Any]]:
        pending, self._pending = self._pending, {}
        tb = self.plan.tb  # type: ignore[union-attr]
        finisher = RowFinisher(self.cq, tb)
        cap = self.config.max_trends
        out: list[dict[str, Any]] = []
        for (k, group) in sorted(pending, key=lambda kg: (kg[0], canonical(kg[1]))):
            parts = sorted(pending[(k, group)], key=lambda p: (p[0], p[1]))
            total = sum(p[3] for p in parts)
            if self.counter is not None:
                engine_total = totals.get((tb.export(tb.start(k)), tb.export(tb.end(k)), group))
                if engine_total != total:
                    self.metrics.inc("total_mismatch")
                total = engine_total if engine_total is not None else total
            head = finisher.head(k, group)
            # Each run's share of the cap, in order: a deferred run's trends are not here, its count is.
            shares, left = [], cap
            for p in parts:
                n = len(p[2]) if isinstance(p[2], list) else p[3]
                n = n if left is None else min(n, left)
                shares.append(n)
                left = None if left is None else left - n
            truncated = sum(shares) < total
            self.metrics.inc("trends_emitted", sum(shares))
            for p, n in zip(parts, shares, strict=True):
                if isinstance(p[2], _Deferral):
                    if n:
                        out.append({**head, DEFERRED: p[2].window(self, k, head, n, total, truncated)})
                    continue
                for ids, vs in p[2][:n]:
                    rec = dict(head, trend=list(ids), total=total, truncated=truncated)
                    if self.config.with_events:
                        rec["aliases"] = [origin(v.alias) for v in vs]
                        rec["events"] = [v.attrs for v in vs]
                    out.append(rec)
        return out

    def _totals(self, rows: list[dict[str, Any]]) -> dict[tuple[Any, Any, tuple[Any, ...]], int]:
        """COUNT(*) per (window_start, window_end, group) of the counter's rows:
        two windows can share a start past float64's precision (never both
        bounds, unless they hold the same events and so the same count)."""
        cols = self.counter.cq.group_columns  # type: ignore[union-attr]
        return {(r["window_start"], r["window_end"], tuple(r[c] for c in cols)): r[TOTAL_COLUMN] for r in rows}

    # ----------------------------------------------------------- snapshot
    def snapshot(self) -> bytes:
        """State as bytes (format-versioned, tied to the query and the options); caches are dropped.
        Where a chunk store is open, a base and the log of events since it
        (`greta_stream.engine.engine.Logged`)."""
        logged = self._log_state()
        if logged is not None:
            return dumps({**logged, "query": _fingerprint(self.cq, self.config), "next_ekey": self.next_ekey})
        state = {
            "format": SNAPSHOT_FORMAT,
            "query": _fingerprint(self.cq, self.config),
            **self.front.state(),
            "next_ekey": self.next_ekey,
            "partitions": self.partitions,
            "metrics": dict(self.metrics),
            "counter": self.counter.snapshot() if self.counter is not None else None,
        }
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, query: str | CompiledQuery, data: bytes, **kwargs: Any) -> TrendExtractor:
        """An extractor that continues exactly where `snapshot()` left off."""
        ex = cls(query, **kwargs)
        state = load_snapshot(data, SNAPSHOT_FORMAT, _fingerprint(ex.cq, ex.config), "CET", "query or options")
        if state["format"] == LOGGED_FORMAT:
            ex = cls.restore(query, state["base"].whole, **kwargs)
            ex._resume(state)
            ex.next_ekey = max(ex.next_ekey, state["next_ekey"])
            ex.metrics["cache_units"] = ex.budget.used
            return ex
        ex.front.load(state)
        ex.next_ekey, ex.partitions = state["next_ekey"], state["partitions"]
        ex.metrics.update(state["metrics"])
        ex.metrics["cache_units"] = 0
        if state["counter"] is not None:
            ex.counter = Engine.restore(count_query(ex.cq), state["counter"], fields=ex.fields)
        if ex.front.time_kind is not None:
            ex.plan = ex._plan()
        return ex

    def _replaying(self, events: list[Event]) -> None:
        counter = self.counter
        if counter is not None:  # it counts `all` trends over the same events
            counter.front.validator.time_kind = self.front.time_kind
            if counter.plan is None and counter.front.time_kind is not None:
                counter.plan = counter._plan()
            counter.front.buffer.extend(events)


@dataclasses.dataclass(frozen=True)
class _Deferral:
    """A deferred window of one run until its (window, group) is reported: its graph and pieces."""

    graph: bytes
    pieces: tuple[Any, ...]
    counts: tuple[int, ...]

    def window(self, ex: TrendExtractor, k: int, head: dict[str, Any], take: int, total: int,
               truncated: bool) -> DeferredWindow:
        return DeferredWindow(ex.cq.text, ex.front.time_kind or "seconds", ex.config, k, self.graph, dict(head),
                              self.pieces, self.counts, take, total, truncated)


@contextlib.contextmanager
def _gc_paused() -> Any:
    """Pause the cyclic garbage collector while trends are built.

    Extraction allocates millions of short-lived tuples and dicts and creates
    no garbage cycles (expired vertices have their edges cleared), so
    refcounting frees everything; the collector's repeated scans of the live
    CET graph took more than half of the time of `all` trends.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def count_query(cq: CompiledQuery) -> CompiledQuery:
    """The aggregation query that counts the trends of `cq`: COUNT(*) per window and group.

    It keeps the query's own RETURN items, so it validates events exactly as
    `cq` does (aggregated attributes are needed attributes).
    """
    returns = (*cq.query.returns, ast.Aggregate("COUNT", name=TOTAL_COLUMN))
    q = dataclasses.replace(cq.query, returns=returns, trends=False)
    return compile_query(q)


def _fingerprint(cq: CompiledQuery, cfg: CetConfig) -> str:
    text = format_query(cq.query) + "\n" + repr((cfg.trends, cfg.max_trends, cfg.with_events))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
