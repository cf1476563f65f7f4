"""What the registry sees of its running streams: each stream's progress as Spark reports it, a query's
progress, state size and the mistakes its input shows in its names (`_problem`), and the monitor that
restarts a stream that died from its checkpoint (`stream_restarts` times in 10 minutes, then fails its
queries) and fails a query whose state is over the limit. `Monitoring` is the part of
`greta_service.registry.Registry` that does it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from greta_service.runner import (
    STREAM_PREFIX,
    StreamHandle,
    StreamProgress,
    progress,
    query_config,
    run_spec,
    short_error,
    stream_key,
)
from greta_service.settings import Settings
from greta_service.store import QueryRecord, Store
from greta_stream import ConfigError
from greta_stream.pipeline import SourceConfig, sample_census
from greta_stream.spark import Spool

log = logging.getLogger("greta_service")
RESTART_WINDOW_S = 600  # a stream that died restarts at most `stream_restarts` times in this many seconds
RESTART_BACKOFF_S = 5  # ... after 5, 10, 20 ... seconds: what killed it (a loaded machine) may pass
SAMPLE_TTL_S = 30.0  # the records already in a source, read once for the queries registered on it meanwhile


class Monitoring:
    """A running stream's progress and health, as `Registry` keeps them (its streams, store and samples)."""

    settings: Settings
    store: Store
    streams: dict[str, StreamHandle]
    stream_progress: dict[str, StreamProgress]
    sampled: dict[str, tuple[str, str | None]]
    _samples: dict[str, tuple[float, Any]]
    restarts: dict[str, list[float]]  # by stream key: when it was restarted after dying (monotonic seconds)
    restart_due: dict[str, float]  # by stream key: a stream that died restarts at this time (monotonic seconds)

    if TYPE_CHECKING:  # the registry's own (`Registry`)
        def stream_of(self, query_id: str) -> StreamHandle | None: ...

        def checkpoint(self, key: str) -> Path: ...

        def _stream_lock(self, key: str) -> threading.RLock: ...

        def _mark(self, rec: QueryRecord, status: str, error: str | None) -> QueryRecord: ...

        def _restart_quietly(self, key: str) -> None: ...

    def _recent_restarts(self, key: str) -> list[float]:
        """When stream `key` was restarted after dying, within the last RESTART_WINDOW_S seconds."""
        now = time.monotonic()
        return [t for t in self.restarts.get(key, []) if now - t < RESTART_WINDOW_S]

    def _may_restart(self, key: str) -> bool:
        """Stream `key` died: True (and the restart counted) while it has restarted fewer than
        `stream_restarts` times in the last RESTART_WINDOW_S seconds."""
        recent = self._recent_restarts(key)
        if len(recent) >= self.settings.stream_restarts:
            self.restarts[key] = recent
            return False
        self.restarts[key] = [*recent, time.monotonic()]
        return True

    def observe(self, report: dict[str, Any]) -> None:
        """One micro-batch's progress report of any stream (Spark's listener thread)."""
        name = report.get("name") or ""
        if name.startswith(STREAM_PREFIX):
            self.stream_progress.setdefault(name[len(STREAM_PREFIX):], StreamProgress()).observe(report)

    def progress(self, rec: QueryRecord, persisted: dict[str, int] | None = None,
                 handles: dict[str, StreamHandle] | None = None) -> dict[str, Any]:
        """A query's progress: its stream's latest reports (kept as they come: no call into
        Spark) and the store's counts. `handles`: each query's stream (`handles`), when many are read."""
        handle = self.stream_of(rec.id) if handles is None else handles.get(rec.id)
        out = progress(self.stream_progress.get(handle.key) if handle is not None else None, self.store.counts(rec.id))
        if out.get("watermark_s") is not None:  # the stream's latest event time less the query's own lateness
            lateness = rec.options.get("lateness_s", rec.options.get("watermark_delay_s")) or 0
            out["watermark_s"] -= float(lateness)
        out["state_bytes"] = self._bytes(rec.id, handle, persisted)
        writer = handle.writer.writers.get(rec.id) if handle is not None else None
        spool = writer.spool if writer is not None else Spool(self.checkpoint(stream_key(rec)) / "queries" / rec.id
                                                              / "spool")
        out["spooled_batches"], out["spooled_bytes"] = spool.stats()
        if handle is not None:
            out["stream"] = handle.key
            out["stream_queries"] = len(handle.query_ids)
            out["stream_restarts"] = len(self._recent_restarts(handle.key))  # as the schema says: the last 10 minutes
            if writer is not None:  # the dead letters' reasons in this run, and the engine it ran on
                out["dead_letter_summary"] = writer.dead_letters.summary() or None
                out["engine"] = writer.engine_text
        out["problem"] = self._problem(rec, writer)
        return out

    def _problem(self, rec: QueryRecord, writer: Any) -> str | None:
        """The names of the query its input shows to be mistakes: as its stream says once it read input,
        else as the records already in its source say (a folder that is complete gets no new input)."""
        if writer is not None and (writer.typed or writer.other_types):
            return writer.problem  # type: ignore[no-any-return]
        registration = json.dumps([rec.text, rec.source, rec.options.get("fields")], sort_keys=True, default=str)
        known = self.sampled.get(rec.id)
        if known is not None and known[0] == registration:
            return known[1]
        try:
            query = query_config(rec)
            spec = run_spec(rec, self.settings, checked=False, query=query)
            problems = self._census_of(query.source or SourceConfig.model_validate(rec.source),
                                       spec.fields.type).problems(spec.query)
        except (ConfigError, OSError) as exc:
            log.warning("query %s: its source could not be sampled: %s", rec.name, short_error(exc))
            problems = []
        self.sampled[rec.id] = (registration, "; ".join(problems) or None)
        return self.sampled[rec.id][1]

    def _census_of(self, source: Any, type_field: str) -> Any:
        """What the records already in `source` say (`sample_census`), read once for the queries
        registered on it within SAMPLE_TTL_S."""
        key = f"{type_field} {source.model_dump_json()}"
        now = time.monotonic()
        hit = self._samples.get(key)
        if hit is None or now - hit[0] > SAMPLE_TTL_S:
            hit = self._samples[key] = (now, sample_census(source, type_field))
        return hit[1]

    def state_bytes(self, query_id: str, persisted: dict[str, int] | None = None) -> int:
        """The bytes a query's state takes: as its running stream's shards last reported
        them, else as its last batch left them (stored: a stopped, restarted or patched
        query keeps counting). A state that queries share counts once, split between them."""
        return self._bytes(query_id, self.stream_of(query_id), persisted)

    def _bytes(self, query_id: str, handle: StreamHandle | None, persisted: dict[str, int] | None) -> int:
        if handle is not None and handle.writer.knows(query_id):
            return handle.writer.state_bytes(query_id)
        return (persisted if persisted is not None else self.store.state_bytes()).get(query_id, 0)

    def handles(self) -> dict[str, StreamHandle]:
        """The stream of each query that runs on one, in one pass over the streams."""
        return {q: h for h in list(self.streams.values()) for q in h.query_ids}

    def states_bytes(self, query_ids: list[str]) -> int:
        """`state_bytes` of the queries summed, finding each one's stream in one pass over the streams."""
        handles, persisted = self.handles(), self.store.state_bytes()
        return sum(self._bytes(q, handles.get(q), persisted) for q in query_ids)

    def monitor_once(self) -> None:
        """Restart streams that died (or fail their queries), and fail queries whose state is over the limit."""
        for key in list(self.streams):
            with self._stream_lock(key):
                handle = self.streams.get(key)
                if handle is not None:
                    self._monitor(key, handle)
        now = time.monotonic()
        for key, due in list(self.restart_due.items()):
            if now >= due:
                with self._stream_lock(key):
                    if self.restart_due.pop(key, None) is not None and key not in self.streams:
                        log.info("stream %s restarts from its checkpoint", key)
                        self._restart_quietly(key)  # its queries go on from their state: no row lost, none twice

    def _monitor(self, key: str, handle: StreamHandle) -> None:
        if not handle.query.isActive:
            exc = handle.query.exception()
            self.streams.pop(key, None)
            if exc is not None and self._may_restart(key):
                wait_s = RESTART_BACKOFF_S * 2 ** (len(self.restarts[key]) - 1)
                log.error("stream %s died: %s; it restarts from its checkpoint in %d s (restart %d of at most %d in "
                          "%d s)", key, exc, wait_s, len(self.restarts[key]), self.settings.stream_restarts,
                          RESTART_WINDOW_S)
                self.restart_due[key] = time.monotonic() + wait_s
                return
            if exc is not None:
                log.error("stream %s died: %s", key, exc)
            why = short_error(exc) if exc else "the stream ended"
            if exc is not None and self.settings.stream_restarts:
                why += f" (the stream died {self.settings.stream_restarts + 1} times in {RESTART_WINDOW_S} s)"
            for query_id in handle.query_ids:
                rec = self.store.get_query(query_id)
                if rec is not None:
                    self._mark(rec, "failed", why)
            return
        failed = dict(handle.writer.failed)  # a query that failed alone: its neighbours go on
        for q in handle.query_ids:
            size = handle.writer.state_bytes(q)
            if q not in failed and size > self.settings.max_state_bytes:
                failed[q] = (f"state uses {size:,} bytes, over the limit of "
                             f"{self.settings.max_state_bytes:,} (max_state_bytes)")
        for query_id, reason in failed.items():
            rec = self.store.get_query(query_id)
            if rec is not None and rec.status != "failed":
                log.error("query %s failed: %s", rec.name, reason)
                self._mark(rec, "failed", reason)
        if any(q in handle.query_ids for q in failed):
            self._restart_quietly(key)  # without the failed queries, which keep their state
