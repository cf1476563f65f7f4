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
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from greta_service.guards import (
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    check_kafka_hosts,
    check_options,
    check_path_given,
    check_places,
    check_reach,
    check_source_tree,
    glob_base,
    places,
    recursive,
)
from greta_service.patch import merge_patch
from greta_service.recheck import recheck, refuse_start, source_refusal
from greta_service.runner import (
    STREAM_PREFIX,
    StreamHandle,
    StreamProgress,
    change_stream,
    progress,
    query_config,
    run_spec,
    short_error,
    start_stream,
    stop_stream,
    stream_key,
    stream_setting,
)
from greta_service.schemas import QueryCreate, QueryUpdate
from greta_service.settings import Settings
from greta_service.store import QueryRecord, Store
from greta_stream import ConfigError, Limits, QueryError, RunSpec, run_fingerprint
from greta_stream.choices import PATH_FORMATS
from greta_stream.client import ServiceError  # one error type, the API's and its client's: status, detail, errors
from greta_stream.pipeline import SinkConfig, SourceConfig, sample_census
from greta_stream.pipeline.model import delta_tables_shared
from greta_stream.pipeline.validation import RENAMED
from greta_stream.spark import Spool

log = logging.getLogger("greta_service")
SAMPLE_TTL_S = 30.0  # the records already in a source, read once for the queries registered on it meanwhile


def query_error(exc: QueryError) -> ServiceError:
    return ServiceError(422, "invalid query", [p.to_dict() for p in exc.problems])


def config_error(msg: str) -> ServiceError:
    return ServiceError(422, msg, [{"msg": msg, "line": None, "column": None}])


def implied_mode(text: str) -> str:
    """The mode of a registered (so valid) text given without one: cet for RETURN TRENDS, else aggregate."""
    return RunSpec.create(text, limits=Limits(None, None)).mode


def request_error(exc: ValidationError) -> ServiceError:
    """A request body that is invalid once read (a patch merged into a registration) as the 422 of one
    refused on arrival: each problem with its place in the body."""
    msgs = [str(e["msg"]).removeprefix("Value error, ") for e in exc.errors()]
    errors = [{"msg": m, "line": None, "column": None, "loc": ["body", *e["loc"]]} for m, e in zip(msgs, exc.errors())]
    return ServiceError(422, msgs[0] if len(msgs) == 1 else "invalid request", errors)


def _names(recs: list[QueryRecord], shown: int = 10) -> str:
    """The queries' names for a log line: all of a few, the newest `shown` of many."""
    names = [r.name for r in recs]
    return ", ".join(names) if len(names) <= shown else f"{', '.join(names[-shown:])} and {len(names) - shown} more"

class Registry:
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
        self.pending: set[str] = set()  # streams whose queries changed while Spark was starting (`started`)
        # what the records already in a query's source say of its names, until its stream reads input
        # (`_problem`): by query id, with the registration it was read for; the records by source, a while
        self.sampled: dict[str, tuple[str, str | None]] = {}
        self._samples: dict[str, tuple[float, Any]] = {}

    # -- checks (nothing registered) --------------------------------------

    def compile(self, text: str, mode: str | None = None) -> RunSpec:
        """The query's run spec with its mode resolved; raises ServiceError (422) with every problem."""
        if len(text) > self.settings.max_query_chars:
            limit = self.settings.max_query_chars
            raise config_error(f"query text has {len(text):,} characters; the limit is {limit:,} (max_query_chars)")
        try:
            return RunSpec.create(text, mode=mode, limits=self.settings.limits)
        except QueryError as exc:
            raise query_error(exc) from None
        except ConfigError as exc:
            raise config_error(str(exc)) from None

    def prepare(self, req: QueryCreate, replacing: str | None = None) -> tuple[QueryRecord, RunSpec]:
        """A record for `req` and its run spec after every check; raises ServiceError (422/409/429).
        Checks against the other queries run under `lock`: a caller that registers the record holds it."""
        rec, query, spec = self._checked(req)
        with self.lock:
            self._admit(rec, query, replacing)
        return rec, spec

    def _checked(self, req: QueryCreate) -> tuple[QueryRecord, Any, RunSpec]:
        """`req` as a record, its pipeline model and run spec, after the checks that need no other query."""
        mode = self.compile(req.text, req.mode).mode
        options = req.options.model_dump(exclude_none=True)
        if mode == "cet":
            options.setdefault("max_trends", self.settings.max_cet_trends)
        rec = QueryRecord(
            id=uuid.uuid4().hex[:12], name=req.name, text=req.text, mode=mode,
            source=self._paths(self._guarded(req.source.model_dump(exclude_none=True), "source"), "source",
                               must_exist=True),
            sinks=[self._paths(self._guarded(s.model_dump(exclude_none=True), "sink"), "sink") for s in req.sinks],
            dead_letter=self._paths(self._guarded(req.dead_letter.model_dump(exclude_none=True), "dead_letter"),
                                    "dead_letter") if req.dead_letter else None,
            options=options,
        )
        try:
            query = query_config(rec)  # its source, sinks and options as the pipeline model
        except ConfigError as exc:
            raise config_error(str(exc)) from None
        try:
            spec = run_spec(rec, self.settings, query=query)
        except ConfigError as exc:
            raise config_error(str(exc)) from None
        return rec, query, spec

    def _admit(self, rec: QueryRecord, query: Any, replacing: str | None) -> None:
        """The checks of `rec` against the other queries: Delta tables, limits, budget, name (under `lock`)."""
        others = [r for r in self.store.list_queries() if r.id != replacing and r.name != rec.name]
        shared = delta_tables_shared([(r.name, SinkConfig(format="delta", path=s.get("path"), table=s.get("table")))
                                      for r in others for s in (*r.sinks, *([r.dead_letter] if r.dead_letter else []))
                                      if s.get("format") == "delta"]
                                     + [(rec.name, s) for s in (*query.sinks, *([query.dead_letter]
                                                                               if query.dead_letter else []))])
        if shared:
            raise ServiceError(409, shared)
        try:  # no folder written where another is read or written (`guards.check_places`)
            check_places(places(rec.name, rec.source, rec.sinks, rec.dead_letter, self.settings.data_dir),
                         [p for r in others for p in places(r.name, r.source, r.sinks, r.dead_letter,
                                                              self.settings.data_dir)])
        except ConfigError as exc:
            raise config_error(str(exc)) from None
        self._limits(rec, replacing)

    def _limits(self, rec: QueryRecord, replacing: str | None = None) -> None:
        s = self.settings
        shards = rec.options.get("shards")
        if shards is not None and shards > s.max_shards:
            raise config_error(f"shards = {shards} is over the limit of {s.max_shards} (max_shards)")
        key = stream_key(rec)
        others = [q for q in self.store.list_queries() if q.id != replacing and stream_key(q) == key]
        for option, what in (("shards", "shards"), ("operator", "as its operator")):
            asked, stream = rec.options.get(option), stream_setting(self.checkpoint(key), others, option)
            if asked is not None and stream is not None and asked != stream:
                raise config_error(f"{option} = {asked}, but the stream this query joins (its source and field names) "
                                   f"has {stream} {what}: a stream's {option} is fixed when it first runs. Leave "
                                   f"{option} out, or register the query with backfill (a stream of its own)")
        trends = rec.options.get("max_trends")
        if trends is not None and trends > s.max_cet_trends:
            raise config_error(f"max_trends = {trends} is over the limit of {s.max_cet_trends} (max_cet_trends)")
        existing = [q for q in self.store.list_queries() if q.id != replacing]
        persisted = self.store.state_bytes()
        used = sum(self.state_bytes(q.id, persisted) for q in existing)
        if used >= s.state_budget_bytes:
            raise ServiceError(429, f"the registered queries' state takes {used:,} bytes, the budget is "
                                    f"{s.state_budget_bytes:,} (state_budget_bytes): stop or delete a query first")
        if any(q.name == rec.name for q in existing):
            raise ServiceError(409, f"a query named {rec.name!r} is already registered")

    def _guarded(self, spec: dict[str, Any], what: str) -> dict[str, Any]:
        """`spec` when its options, path and Kafka hosts are allowed (`guards`); else a 422."""
        try:
            check_options(spec, what, SOURCE_OPTIONS if what == "source" else SINK_OPTIONS)
            check_path_given(spec, what)
            check_kafka_hosts(spec, what, self.settings.kafka_hosts)
        except ConfigError as exc:
            raise config_error(str(exc)) from None
        return spec

    def _paths(self, spec: dict[str, Any], what: str, must_exist: bool = False) -> dict[str, Any]:
        """Resolve a file path against data_dir, keep it under path_roots and away from the service's own
        files (`guards.check_reach`), and (sources) require it."""
        path = spec.get("path")
        if path is None or spec.get("format") not in PATH_FORMATS:
            return spec
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            raise config_error(f"{what} path must be a non-empty string")
        joined = self.settings.data_dir / Path(path).expanduser()
        try:
            resolved = joined.resolve()
            roots = [r.resolve() for r in self.settings.allowed_roots]  # relative: to the working folder
            if roots and not any(resolved.is_relative_to(r) for r in roots):
                raise config_error(f"{what} path {path!r} is outside the allowed roots (path_roots)")
            check_reach(path, joined, what, self.settings.protected_paths)
            folder = glob_base(joined).resolve()  # a glob: the folder it matches under
            if must_exist and not folder.exists():
                raise config_error(f"{what} path {path!r} does not exist")
            if must_exist and folder.is_dir():  # Spark lists the whole tree, links followed
                check_source_tree(path, folder, what, self.settings.protected_paths, self.settings.data_dir,
                                  contained=recursive(spec))
        except ConfigError as exc:
            raise config_error(str(exc)) from None
        except (OSError, RuntimeError) as exc:  # a link loop in the path itself, say
            raise config_error(f"{what} path {path!r} cannot be followed: {exc}") from None
        return {**spec, "path": str(resolved)}

    # -- life cycle ---------------------------------------------------------

    @property
    def starting(self) -> bool:
        """Spark is not up yet: changes are validated and kept, and applied when it is (`started`)."""
        if self.startup_error:
            raise ServiceError(503, f"the service failed to start: {self.startup_error}")
        return not self.ready.is_set()

    def status(self, rec: QueryRecord) -> tuple[str, str | None]:
        """A query's status and error as they are now. The record keeps a query's last status, and a restarted
        service resumes a running query only once Spark is up: until then (`/readyz` 503) that query is
        `starting`, and `failed` when Spark failed to start."""
        if rec.status != "running" or rec.desired != "running" or self.ready.is_set():
            return rec.status, rec.error
        if self.startup_error:
            return "failed", f"the service failed to start: {self.startup_error}"
        return "starting", None

    def started(self) -> None:
        """Spark is up and the registry's streams resumed: apply what changed meanwhile, then take changes live."""
        with self.lock:
            self.ready.set()  # from here on, a change applies itself (`_change`)
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

    def _patched(self, old: QueryRecord, patch: dict[str, Any]) -> QueryCreate:
        """The registration `old` has, with `patch` merged in (RFC 7396): what the patch leaves out stays."""
        if "text" in patch and patch["text"] is None:
            raise config_error("text cannot be removed: give a new text, or leave text out to keep it")
        options = {RENAMED.get(k, k): v for k, v in old.options.items()}  # a record of an older version
        if old.mode == "cet" and options.get("max_trends") == self.settings.max_cet_trends:
            del options["max_trends"]  # the service's cap, filled in for CET (`_checked`): again if still CET
        document = {"name": old.name, "text": old.text, "mode": old.mode, "source": old.source,
                    "sinks": old.sinks, "dead_letter": old.dead_letter, "options": options}
        if "text" in patch and "mode" not in patch and old.mode == implied_mode(old.text):
            del document["mode"]  # the mode its text implied: the new text's own (a chosen mode stays)
        try:
            return QueryCreate.model_validate(merge_patch(document, patch))
        except ValidationError as exc:
            raise request_error(exc) from None

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
                self._mark(rec, "failed", short_error(exc))
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

    def _members(self, key: str) -> list[QueryRecord]:
        """The queries that should run on stream `key` now, in registration order."""
        recs = [r for r in self.store.list_queries()
                if stream_key(r) == key and r.desired == "running" and r.status != "failed"]
        return sorted(recs, key=lambda r: r.created_at)

    def _restart(self, key: str, specs: dict[str, RunSpec] | None = None) -> None:
        """Give stream `key` the queries that should run on it now: at its next micro-batch
        when it runs and can take the change (`runner.change_stream`), else by restarting it.
        It resumes from its checkpoint, each query that ran on it keeps its state, a new
        query starts at the stream's position. Raises when the stream cannot start."""
        members = self._members(key)
        # stopped and failed queries keep their state in the stream, to go on from it when started again
        paused_recs = [r for r in self.store.list_queries()
                       if stream_key(r) == key and (r.status == "failed" or r.desired == "stopped")]
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

    def _mark(self, rec: QueryRecord, status: str, error: str | None) -> None:
        rec.status, rec.error = status, error
        self.store.save_query(rec)

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

    def shutdown(self) -> None:
        """Stop the streams but keep their queries' desired state: a restart resumes them."""
        for key in list(self.streams):
            with self._stream_lock(key):
                self._stop_stream(key)

    # -- monitoring ------------------------------------------------------------

    def observe(self, report: dict[str, Any]) -> None:
        """One micro-batch's progress report of any stream (Spark's listener thread)."""
        name = report.get("name") or ""
        if name.startswith(STREAM_PREFIX):
            self.stream_progress.setdefault(name[len(STREAM_PREFIX):], StreamProgress()).observe(report)

    def progress(self, rec: QueryRecord, persisted: dict[str, int] | None = None) -> dict[str, Any]:
        """A query's progress: its stream's latest reports (kept as they come: no call into
        Spark) and the store's counts."""
        handle = self.stream_of(rec.id)
        out = progress(self.stream_progress.get(handle.key) if handle is not None else None, self.store.counts(rec.id))
        if out.get("watermark_s") is not None:  # the stream's latest event time less the query's own lateness
            lateness = rec.options.get("lateness_s", rec.options.get("watermark_delay_s")) or 0
            out["watermark_s"] -= float(lateness)
        out["state_bytes"] = self.state_bytes(rec.id, persisted)
        writer = handle.writer.writers.get(rec.id) if handle is not None else None
        spool = writer.spool if writer is not None else Spool(self.checkpoint(stream_key(rec)) / "queries" / rec.id
                                                              / "spool")
        out["spooled_batches"], out["spooled_bytes"] = spool.stats()
        if handle is not None:
            out["stream"] = handle.key
            out["stream_queries"] = len(handle.query_ids)
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
        handle = self.stream_of(query_id)
        if handle is not None and handle.writer.knows(query_id):
            return handle.writer.state_bytes(query_id)
        return (persisted if persisted is not None else self.store.state_bytes()).get(query_id, 0)

    def monitor_once(self) -> None:
        """Fail the queries of streams that died, and queries whose state is over the limit."""
        for key in list(self.streams):
            with self._stream_lock(key):
                handle = self.streams.get(key)
                if handle is not None:
                    self._monitor(key, handle)

    def _monitor(self, key: str, handle: StreamHandle) -> None:
        if not handle.query.isActive:
            exc = handle.query.exception()
            if exc is not None:
                log.error("stream %s died: %s", key, exc)
            self.streams.pop(key, None)
            for query_id in handle.query_ids:
                rec = self.store.get_query(query_id)
                if rec is not None:
                    self._mark(rec, "failed", short_error(exc) if exc else "the stream ended")
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
