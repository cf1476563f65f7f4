"""The query registry: registered queries, their streams, and their life cycle.

State machine of a query (persisted in the `RegistryStore`):

    POST /queries --> running --stop--> stopped --start--> running
                        |  stream dies or a limit is hit     ^
                        +--------------> failed --start------+

`desired` records what the user asked for; a restarted service resumes
every query whose desired state is running, from its checkpoint, and shows
it `starting` until then (`status`). A PATCH is a merge patch of the
registration (`_patched`), checked as a registration is. Every
check runs before anything is registered: a rejected query leaves no
record, no checkpoint and no results.

The parts: `admission` (the registration's checks, `Admission`) and
`monitoring` (progress and health of the running streams, `Monitoring`);
`Registry` is both, with the life cycle and the streams here.
"""

from __future__ import annotations

import copy
import logging
import shutil
import threading
from pathlib import Path
from typing import Any

from greta_service.admission import Admission, config_error, implied_mode, query_error, request_error
from greta_service.guards import Place
from greta_service.monitoring import SAMPLE_TTL_S, Monitoring
from greta_service.recheck import recheck, refuse_start, source_refusal
from greta_service.roster import Roster
from greta_service.runner import (
    StreamHandle,
    StreamProgress,
    change_stream,
    run_spec,
    short_error,
    start_stream,
    stop_stream,
    stream_key,
)
from greta_service.schemas import QueryCreate, QueryUpdate
from greta_service.settings import Settings
from greta_service.store import QueryRecord, Store
from greta_stream import RunSpec, run_fingerprint
from greta_stream.client import ServiceError  # one error type, the API's and its client's: status, detail, errors
from greta_stream.spark import jvm_gone

__all__ = ["SAMPLE_TTL_S", "Registry", "ServiceError", "config_error", "implied_mode", "query_error", "request_error"]

log = logging.getLogger("greta_service")


def _names(recs: list[QueryRecord], shown: int = 10) -> str:
    """The queries' names for a log line: all of a few, the newest `shown` of many."""
    names = [r.name for r in recs]
    return ", ".join(names) if len(names) <= shown else f"{', '.join(names[-shown:])} and {len(names) - shown} more"


class Registry(Admission, Monitoring):
    """Registered queries and their running streams; thread-safe."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.spark: Any = None
        self.streams: dict[str, StreamHandle] = {}  # by stream key (`runner.stream_key`)
        self.stream_progress: dict[str, StreamProgress] = {}  # by stream key, as Spark reports each batch
        # `lock` guards the records' checks and the maps here, never a Spark or file-system call; each
        # stream's changes take that stream's own lock (`_stream_lock`), so one stream's slow start or
        # listing never holds up a change to another stream's queries
        self.lock = threading.RLock()
        self._stream_locks: dict[str, threading.RLock] = {}
        self.ready = threading.Event()
        self.startup_error: str | None = None
        self.spark_lost: str | None = None  # why Spark's JVM went, while a new one starts (`lost_spark`)
        self.pending: set[str] = set()  # streams whose queries changed while Spark was starting (`started`)
        # what the records already in a query's source say of its names, until its stream reads input
        # (`_problem`): by query id, with the registration it was read for; the records by source, a while
        self.sampled: dict[str, tuple[str, str | None]] = {}
        self._samples: dict[str, tuple[float, Any]] = {}
        self.restarts: dict[str, list[float]] = {}  # streams restarted after dying (`Monitoring._may_restart`)
        self.restart_due: dict[str, float] = {}  # streams that died, to restart then (`Monitoring.monitor_once`)
        self._known_places: dict[str, tuple[QueryRecord, list[Place]]] = {}  # `Admission._places`
        self._roster: Roster | None = None  # `Admission.roster`


    # -- life cycle ---------------------------------------------------------

    @property
    def starting(self) -> bool:
        """Spark is not up yet: changes are validated and kept, and applied when it is (`started`)."""
        if self.startup_error:
            raise ServiceError(503, self.down())
        return not self.ready.is_set()

    def status(self, rec: QueryRecord) -> tuple[str, str | None]:
        """A query's status and error as they are now. The record keeps a query's last status, and a restarted
        service resumes a running query only once Spark is up: until then (`/readyz` 503) that query is
        `starting`, and `failed` when Spark failed to start. A query whose stream died is `starting` until
        its stream restarts (`Monitoring.monitor_once`)."""
        if rec.status == "running" and rec.desired == "running" and stream_key(rec) in self.restart_due:
            return "starting", "its stream died and restarts from its checkpoint shortly (see the log)"
        if rec.status != "running" or rec.desired != "running" or self.ready.is_set():
            return rec.status, rec.error
        if self.startup_error:
            return "failed", self.down()
        return "starting", None

    def down(self) -> str:
        """Why the service runs no query (`startup_error` set): Spark did not start, or its JVM was lost."""
        return str(self.startup_error) if self.spark_lost else f"the service failed to start: {self.startup_error}"

    def started(self) -> None:
        """Spark is up and the registry's streams resumed: apply what changed meanwhile, then take changes live."""
        with self.lock:
            self.ready.set()  # from here on, a change applies itself (`_change`)
            self.spark_lost = None
            keys = sorted(self.pending)
            self.pending.clear()
        for key in keys:
            with self._stream_lock(key):
                self._restart_quietly(key)

    def _stream_lock(self, key: str) -> threading.RLock:
        """The lock that orders the changes of stream `key` (held across its Spark calls, and only its)."""
        with self.lock:
            return self._stream_locks.setdefault(key, threading.RLock())

    def create(self, req: QueryCreate) -> tuple[QueryRecord, RunSpec]:
        rec, query, spec = self._checked(req)
        key = stream_key(rec)
        with self.lock:
            self._admit(rec, query, None)
            if self.starting:  # validated now (a bad query is a 422 now), started with the service's streams
                rec.status = "starting"
                self.store.save_query(rec)
                self.pending.add(key)
                log.info("query %s registered while the service starts: it starts with it", rec.name)
                return rec, spec
            self.store.save_query(rec)  # first, so that a crash right after the start still knows it
        with self._stream_lock(key):
            try:
                self._restart(key, {rec.id: spec})
            except Exception as exc:
                self._forget(rec.id)
                self._restart_quietly(key)  # the stream's other queries go on without it
                self._spark_down()
                raise config_error(f"the query could not start: {short_error(exc)}") from None
        return rec, spec

    def update(self, query_id: str, req: QueryUpdate) -> tuple[QueryRecord, RunSpec]:
        """Merge `req` into a query's registration (RFC 7396; `QueryUpdate` says what keeps its state)."""
        old = self.get(query_id)
        with self._stream_lock(stream_key(old)):
            old = self.get(query_id)
            body = self._patched(old, req.patch)
            if body.options.backfill != bool(old.options.get("backfill")):
                raise config_error("backfill cannot change: register a new query to read the source again")
            rec, query, spec = self._checked(body)
            rec.id, rec.created_at, rec.desired, rec.status = old.id, old.created_at, old.desired, old.status
            rec.error = old.error
            fresh = run_fingerprint(spec) != run_fingerprint(run_spec(old, self.settings, checked=False))
            with self.lock:
                self._admit(rec, query, old.id)
                self.store.save_query(rec)
            if fresh:
                self.store.clear_results(rec.id)
            running = rec.desired == "running" and rec.status != "failed"
            if running:
                self._change(stream_key(old))
        moved = stream_key(rec)  # new field names: the query goes to another stream (never two locks held at once)
        if running and moved != stream_key(old):
            with self._stream_lock(moved):
                self._change(moved)
        log.info("query %s updated (%s)", rec.name, "new state" if fresh else "state kept")
        return self.get(rec.id), spec

    def get(self, query_id: str) -> QueryRecord:
        """The query of this id, or else of this name (names are unique)."""
        rec = self.store.get_query(query_id)
        if rec is None:
            rec = next((q for q in self.store.list_queries() if q.name == query_id), None)
        if rec is None:
            raise ServiceError(404, f"no query with id or name {query_id!r}")
        return rec

    def start(self, query_id: str) -> QueryRecord:
        key = stream_key(self.get(query_id))
        with self._stream_lock(key):
            rec = self.get(query_id)
            handle = self.stream_of(query_id)
            if handle is not None and handle.query.isActive:
                return rec
            refuse_start(self, rec)  # the registration's checks of today (a 409 when they refuse it)
            with self.lock:
                rec.desired, rec.error = "running", None
                rec.status = "starting" if self.starting else "running"
                self.store.save_query(rec)
                if self.starting:
                    self.pending.add(key)
                    return rec
            try:
                self._restart(key)
            except Exception as exc:
                rec = self._mark(rec, "failed", short_error(exc))
                self._restart_quietly(key)
                raise ServiceError(409, f"the query could not start: {rec.error}") from None
            return rec

    def stop(self, query_id: str) -> QueryRecord:
        key = stream_key(self.get(query_id))
        with self._stream_lock(key):
            rec = self.get(query_id)
            rec.desired = "stopped"
            if rec.status != "failed":
                rec.status, rec.error = "stopped", None
            self.store.save_query(rec)
            self._change(key)  # the stream goes on with its other queries
            return rec

    def delete(self, query_id: str) -> None:
        key = stream_key(self.get(query_id))
        with self._stream_lock(key):
            rec = self.get(query_id)
            rec.desired = "stopped"
            self.store.save_query(rec)
            self._change(key)  # the stream goes on without it
            self._forget(query_id)

    # -- streams -------------------------------------------------------------

    def stream_of(self, query_id: str) -> StreamHandle | None:
        return next((h for h in self.streams.values() if query_id in h.query_ids), None)

    def _members(self, key: str, recs: list[QueryRecord] | None = None) -> list[QueryRecord]:
        """The queries that should run on stream `key` now (of `recs`, default: every registered one),
        in registration order."""
        recs = [r for r in (self.roster().by_stream.get(key, []) if recs is None else recs)
                if stream_key(r) == key and r.desired == "running" and r.status != "failed"]
        return sorted(recs, key=lambda r: r.created_at)

    def _restart(self, key: str, specs: dict[str, RunSpec] | None = None) -> None:
        """Give stream `key` the queries that should run on it now: at its next micro-batch
        when it runs and can take the change (`runner.change_stream`), else by restarting it.
        It resumes from its checkpoint, each query that ran on it keeps its state, a new
        query starts at the stream's position. Raises when the stream cannot start."""
        mine = list(self.roster().by_stream.get(key, []))  # read only: `_mark` copies
        members = self._members(key, mine)
        # stopped and failed queries keep their state in the stream, to go on from it when started again
        paused_recs = [r for r in mine if r.status == "failed" or r.desired == "stopped"]
        paused = tuple(r.id for r in paused_recs)
        specs = dict(specs or {})
        for rec in members:
            if rec.id not in specs:
                specs[rec.id] = run_spec(rec, self.settings)
        handle = self.streams.get(key)
        if handle is not None and (members or paused) and change_stream(
                self.spark, handle, members, specs, self.store, paused, self.checkpoint(key)):
            self._running(members)
            if members:  # the names when few: a line per change must not grow with a thousand queries
                log.info("stream %s takes %d queries at its next batch, without a restart: %s", key, len(members),
                         _names(members))
            else:  # its last running query left: it reads on, holding the stopped ones
                log.info("stream %s holds %d stopped queries from its next batch, without a restart: %s", key,
                         len(paused_recs), _names(paused_recs))
            return
        self._stop_stream(key)
        if not members:
            # the stream goes on reading, holding them; never a source the registration's checks refuse now
            if paused and (self.checkpoint(key) / "offsets").is_dir() and source_refusal(self, paused_recs[0]) is None:
                self.streams[key] = start_stream(self.spark, key, [], {}, self.checkpoint(key),
                                                 self.settings.trigger_interval_s, self.store, paused,
                                                 held=paused_recs[0])
                log.info("stream %s holds %d stopped queries: %s", key, len(paused),
                         ", ".join(r.name for r in paused_recs))
            return
        self.streams[key] = start_stream(self.spark, key, members, specs, self.checkpoint(key),
                                         self.settings.trigger_interval_s, self.store, paused)
        self._running(members)
        log.info("stream %s runs %d queries: %s", key, len(members), ", ".join(r.name for r in members))

    def _running(self, members: list[QueryRecord]) -> None:
        """Queries accepted while the service started run now that their stream took them."""
        for rec in members:
            if rec.status == "starting":
                self._mark(rec, "running", None)

    def _change(self, key: str) -> None:
        """The stream `key` after a change of its queries (its lock held): now, or when Spark is up."""
        with self.lock:
            if self.starting:
                self.pending.add(key)
                return
        self._restart_quietly(key)

    def _restart_quietly(self, key: str) -> None:
        """`_restart`, failing the stream's queries (not raising) when it cannot start."""
        try:
            self._restart(key)
        except Exception as exc:
            log.error("stream %s could not restart: %s", key, short_error(exc))
            for rec in self._members(key):
                self._mark(rec, "failed", short_error(exc))

    def _stop_stream(self, key: str) -> None:
        handle = self.streams.pop(key, None)
        if handle is not None:
            try:
                stop_stream(handle, self.settings.stop_timeout_s)
            except Exception as exc:  # a stream that already died, or did not stop in time (stopTimeout)
                log.warning("stopping stream %s: %s", key, short_error(exc))

    def _forget(self, query_id: str) -> None:
        """Delete a query's record and results; its part of its stream's
        checkpoint goes, and the whole checkpoint when no query uses the stream."""
        rec = self.store.get_query(query_id)
        self.store.delete_query(query_id)
        self.sampled.pop(query_id, None)
        if rec is None:
            return
        key = stream_key(rec)
        if any(stream_key(r) == key for r in self.store.list_queries()):
            shutil.rmtree(self.checkpoint(key) / "queries" / query_id, ignore_errors=True)
        else:
            self._stop_stream(key)
            shutil.rmtree(self.checkpoint(key), ignore_errors=True)

    def _mark(self, rec: QueryRecord, status: str, error: str | None) -> QueryRecord:
        """Save a copy of `rec` (it may be one the store's `records` gave, to read only) with a new status."""
        rec = copy.copy(rec)
        rec.status, rec.error = status, error
        self.store.save_query(rec)
        return rec

    def checkpoint(self, key: str) -> Path:
        return self.settings.checkpoint_dir / key

    def resume_all(self) -> None:
        """After a (re)start: every stream with a query whose desired state is running resumes from its
        checkpoint; a query the registration's checks refuse now is failed instead (`recheck`)."""
        for rec in self.store.list_queries():
            if rec.desired == "running" and rec.status == "failed":  # a restart is a new chance
                self._mark(rec, "running", None)
        recheck(self)
        for key in dict.fromkeys(stream_key(r) for r in self.store.list_queries()):  # stopped ones: held (`_restart`)
            with self._stream_lock(key):
                with self.lock:
                    self.pending.discard(key)  # started here with every change so far
                try:
                    self._restart(key)
                except Exception as exc:
                    log.error("stream %s could not resume: %s", key, short_error(exc))
                    for rec in self._members(key):
                        self._mark(rec, "failed", short_error(exc))

    def _spark_down(self) -> None:
        """A 503 when a change failed because Spark's JVM is gone (the monitor starts a new one): retry."""
        why = jvm_gone(self.spark) if self.spark is not None else None
        if why is not None:
            raise ServiceError(503, f"{why}: the service starts a new one and resumes the streams from their "
                                    "checkpoints. Retry once /readyz answers 200")

    def lost_spark(self, why: str) -> None:
        """Spark's JVM is gone (`why`) and every stream with it: forget them, and be starting again
        (`/readyz` 503, changes kept for `started`) until a new JVM resumes the streams."""
        with self.lock:
            self.ready.clear()
            self.spark_lost = why
            self.streams.clear()  # `resume_all` starts each again
            self.restart_due.clear()
            self.spark = None

    def shutdown(self) -> None:
        """Stop the streams but keep their queries' desired state: a restart resumes them."""
        for key in list(self.streams):
            with self._stream_lock(key):
                self._stop_stream(key)
