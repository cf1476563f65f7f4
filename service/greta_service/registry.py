"""The query registry: registered queries, their streams, and their life cycle.

State machine of a query (persisted in the `RegistryStore`):

    POST /queries --> running --stop--> stopped --start--> running
                        |  stream dies or a limit is hit     ^
                        +--------------> failed --start------+

`desired` records what the user asked for; a restarted service resumes
every query whose desired state is running, from its checkpoint. Every
check runs before anything is registered: a rejected query leaves no
record, no checkpoint and no results.
"""

from __future__ import annotations

import logging
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from greta_service.runner import (
    FILE_FORMATS,
    StreamHandle,
    progress,
    run_spec,
    short_error,
    sink_config,
    source_config,
    start_stream,
)
from greta_service.schemas import QueryCreate
from greta_service.settings import Settings
from greta_service.store import QueryRecord, Store
from greta_stream import ConfigError, QueryError, RunSpec

log = logging.getLogger("greta_service")


@dataclass
class ServiceError(Exception):
    """An error the API reports with `status` and `{detail, errors}`."""

    status: int
    detail: str
    errors: list[dict[str, Any]] = field(default_factory=list)

    def __str__(self) -> str:
        return self.detail


def query_error(exc: QueryError) -> ServiceError:
    return ServiceError(422, "invalid query", [p.to_dict() for p in exc.problems])


def config_error(msg: str) -> ServiceError:
    return ServiceError(422, msg, [{"msg": msg, "line": None, "column": None}])


class Registry:
    """Registered queries and their running streams; thread-safe."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.spark: Any = None
        self.handles: dict[str, StreamHandle] = {}
        self.lock = threading.RLock()
        self.ready = threading.Event()
        self.startup_error: str | None = None

    # -- checks (nothing registered) --------------------------------------

    def compile(self, text: str, mode: str | None = None) -> RunSpec:
        """The query's run spec with its mode resolved; raises ServiceError (422) with every problem."""
        if len(text) > self.settings.max_query_chars:
            limit = self.settings.max_query_chars
            raise config_error(f"query text has {len(text):,} characters; the limit is {limit:,} (max_query_chars)")
        try:
            return RunSpec.create(text, mode=mode)
        except QueryError as exc:
            raise query_error(exc) from None
        except ConfigError as exc:
            raise config_error(str(exc)) from None
        except RecursionError:
            raise config_error("query text is nested too deeply") from None

    def prepare(self, req: QueryCreate) -> tuple[QueryRecord, RunSpec]:
        """A record for `req` and its run spec after every check; raises ServiceError (422/409/429)."""
        mode = self.compile(req.text, req.mode).mode
        options = req.options.model_dump(exclude_none=True)
        if mode == "cet":
            options.setdefault("max_trends", self.settings.max_cet_trends)
        rec = QueryRecord(
            id=uuid.uuid4().hex[:12], name=req.name, text=req.text, mode=mode,
            source=self._paths(req.source.model_dump(), "source", must_exist=True),
            sinks=[self._paths(s.model_dump(), "sink") for s in req.sinks],
            dead_letter=self._paths(req.dead_letter.model_dump(), "dead_letter") if req.dead_letter else None,
            options=options,
        )
        try:
            source_config(rec.source)
            for s in [*rec.sinks, *([rec.dead_letter] if rec.dead_letter else [])]:
                sink_config(s)
        except ConfigError as exc:
            raise config_error(str(exc)) from None
        self._limits(rec)
        try:
            spec = run_spec(rec)
        except ConfigError as exc:
            raise config_error(str(exc)) from None
        return rec, spec

    def _limits(self, rec: QueryRecord) -> None:
        s = self.settings
        shards = rec.options.get("shards")
        if shards is not None and shards > s.max_shards:
            raise config_error(f"shards = {shards} is over the limit of {s.max_shards} (max_shards)")
        trends = rec.options.get("max_trends")
        if trends is not None and trends > s.max_cet_trends:
            raise config_error(f"max_trends = {trends} is over the limit of {s.max_cet_trends} (max_cet_trends)")
        existing = self.store.list_queries()
        if len(existing) >= s.max_queries:
            raise ServiceError(429, f"{len(existing)} queries are registered; the limit is {s.max_queries}")
        if any(q.name == rec.name for q in existing):
            raise ServiceError(409, f"a query named {rec.name!r} is already registered")

    def _paths(self, spec: dict[str, Any], what: str, must_exist: bool = False) -> dict[str, Any]:
        """Resolve a file path against data_dir, keep it under path_roots, and (sources) require it."""
        path = spec.get("path")
        if path is None or spec.get("format") not in FILE_FORMATS:
            return spec
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            raise config_error(f"{what} path must be a non-empty string")
        resolved = (self.settings.data_dir / Path(path).expanduser()).resolve()
        roots = [r.resolve() for r in self.settings.allowed_roots]  # relative: to the working folder
        if roots and not any(resolved.is_relative_to(r) for r in roots):
            raise config_error(f"{what} path {path!r} is outside the allowed roots (path_roots)")
        if resolved.is_relative_to(self.settings.checkpoint_dir.resolve()):
            raise config_error(f"{what} path {path!r} is inside the checkpoint folder")
        if must_exist and not resolved.exists():
            raise config_error(f"{what} path {path!r} does not exist")
        return {**spec, "path": str(resolved)}

    # -- life cycle ---------------------------------------------------------

    def _need_spark(self) -> None:
        if self.startup_error:
            raise ServiceError(503, f"the service failed to start: {self.startup_error}")
        if not self.ready.is_set():
            raise ServiceError(503, "the service is starting (Spark is not ready yet)")

    def create(self, req: QueryCreate) -> tuple[QueryRecord, RunSpec]:
        self._need_spark()
        with self.lock:
            rec, spec = self.prepare(req)
            self.store.save_query(rec)  # first, so that a crash right after the start still knows it
            try:
                self._start(rec, spec)
            except Exception as exc:
                self.handles.pop(rec.id, None)
                self._forget(rec.id)
                raise config_error(f"the query could not start: {short_error(exc)}") from None
            return rec, spec

    def get(self, query_id: str) -> QueryRecord:
        rec = self.store.get_query(query_id)
        if rec is None:
            raise ServiceError(404, f"no query {query_id!r}")
        return rec

    def start(self, query_id: str) -> QueryRecord:
        self._need_spark()
        with self.lock:
            rec = self.get(query_id)
            if query_id in self.handles and self.handles[query_id].query.isActive:
                return rec
            try:
                self._start(rec)
            except Exception as exc:
                self._mark(rec, "failed", short_error(exc))
                raise ServiceError(409, f"the query could not start: {rec.error}") from None
            rec.desired, rec.status, rec.error = "running", "running", None
            self.store.save_query(rec)
            return rec

    def stop(self, query_id: str) -> QueryRecord:
        with self.lock:
            rec = self.get(query_id)
            self._stop_stream(query_id)
            rec.desired = "stopped"
            if rec.status != "failed":
                rec.status, rec.error = "stopped", None
            self.store.save_query(rec)
            return rec

    def delete(self, query_id: str) -> None:
        with self.lock:
            self.get(query_id)
            self._stop_stream(query_id)
            self._forget(query_id)

    def _start(self, rec: QueryRecord, spec: RunSpec | None = None) -> None:
        self._stop_stream(rec.id)
        self.handles[rec.id] = start_stream(self.spark, rec, self.checkpoint(rec.id),
                                            self.settings.trigger_interval_s, self.store, spec)
        log.info("started query %s (%s)", rec.name, rec.id)

    def _stop_stream(self, query_id: str) -> None:
        handle = self.handles.pop(query_id, None)
        if handle is not None:
            try:
                handle.query.stop()
            except Exception as exc:  # a stream that already died
                log.warning("stopping %s: %s", query_id, short_error(exc))

    def _forget(self, query_id: str) -> None:
        self.store.delete_query(query_id)
        shutil.rmtree(self.checkpoint(query_id), ignore_errors=True)

    def _mark(self, rec: QueryRecord, status: str, error: str | None) -> None:
        rec.status, rec.error = status, error
        self.store.save_query(rec)

    def checkpoint(self, query_id: str) -> Path:
        return self.settings.checkpoint_dir / query_id

    def resume_all(self) -> None:
        """After a (re)start: every query whose desired state is running resumes from its checkpoint."""
        for rec in self.store.list_queries():
            if rec.desired != "running":
                continue
            with self.lock:
                try:
                    self._start(rec)
                    self._mark(rec, "running", None)
                except Exception as exc:
                    log.error("query %s could not resume: %s", rec.id, short_error(exc))
                    self._mark(rec, "failed", short_error(exc))

    def shutdown(self) -> None:
        """Stop the streams but keep their desired state: a restart resumes them."""
        with self.lock:
            for query_id in list(self.handles):
                self._stop_stream(query_id)

    # -- monitoring ------------------------------------------------------------

    def progress(self, rec: QueryRecord) -> dict[str, Any]:
        handle = self.handles.get(rec.id)
        try:
            return progress(handle, self.store.counts(rec.id))
        except Exception as exc:  # the JVM may be going away
            log.debug("progress of %s: %s", rec.id, exc)
            return progress(None, self.store.counts(rec.id))

    def monitor_once(self) -> None:
        """Fail queries whose stream died or whose state is over the limit."""
        with self.lock:
            for query_id, handle in list(self.handles.items()):
                rec = self.store.get_query(query_id)
                if rec is None:
                    continue
                if not handle.query.isActive:
                    exc = handle.query.exception()
                    self.handles.pop(query_id, None)
                    self._mark(rec, "failed", short_error(exc) if exc else "the stream ended")
                    continue
                state_bytes = self.progress(rec).get("state_bytes") or 0
                if state_bytes > self.settings.max_state_bytes:
                    self._stop_stream(query_id)
                    self._mark(rec, "failed", f"state uses {state_bytes:,} bytes, over the limit of "
                                              f"{self.settings.max_state_bytes:,} (max_state_bytes)")
