"""The registration's checks (nothing registered until they pass): a query's text and mode, its source,
sinks and dead-letter sink (options, paths, Kafka hosts: `guards`), and its place among the other
queries (Delta tables, folders, limits, the state budget, its name); and a PATCH merged into a
registration (`_patched`), checked as a registration is. `Admission` is the part of
`greta_service.registry.Registry` that makes them; the 422, 409 and 429 they raise are `ServiceError`s.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from greta_service.guards import (
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    Place,
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
from greta_service.roster import Roster
from greta_service.runner import query_config, run_spec, stream_key, stream_setting
from greta_service.schemas import QueryCreate
from greta_service.settings import Settings
from greta_service.store import QueryRecord, Store
from greta_stream import ConfigError, Limits, QueryError, RunSpec
from greta_stream.choices import PATH_FORMATS
from greta_stream.client import ServiceError
from greta_stream.pipeline.model import delta_tables_shared
from greta_stream.pipeline.validation import RENAMED

MAX_KNOWN_PLACES = 100_000  # records whose places `Admission._places` keeps (then it starts again)


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


class Admission:
    """The checks of a registration, as `Registry` makes them (its settings, store and lock)."""

    settings: Settings
    store: Store
    lock: threading.RLock
    _known_places: dict[str, tuple[QueryRecord, list[Place]]]  # id -> (the record, its places): `_places`
    _roster: Roster | None  # the registry as of its last change that was read (`roster`)

    if TYPE_CHECKING:  # the registry's own (`Registry`, `Monitoring`)
        def checkpoint(self, key: str) -> Path: ...

        def state_bytes(self, query_id: str, persisted: dict[str, int] | None = None) -> int: ...

        def states_bytes(self, query_ids: list[str]) -> int: ...

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
        """The checks of `rec` against the other queries: Delta tables, folders, limits, budget, name (under
        `lock`), read from the registry's `roster`: lookups, not a pass of each check over every query."""
        roster = self.roster()
        gone = roster.by_id.get(replacing) if replacing is not None else None
        but = frozenset((rec.name, *((gone.name,) if gone is not None else ())))  # the query itself
        shared = delta_tables_shared([d for d in roster.folders.delta if d[0] not in but]
                                     + [(rec.name, s) for s in (*query.sinks, *([query.dead_letter]
                                                                               if query.dead_letter else []))])
        if shared:
            raise ServiceError(409, shared)
        try:  # no folder written where another is read or written (`guards.check_places`)
            mine = places(rec.name, rec.source, rec.sinks, rec.dead_letter, self.settings.data_dir)
            check_places(mine, roster.folders.near(mine, but))
        except ConfigError as exc:
            raise config_error(str(exc)) from None
        self._limits(rec, roster, replacing)

    def roster(self) -> Roster:
        """The registered queries by stream and name, with their folders (`roster.Roster`): built again after
        each change of the registry, from the places each record had (`_places`)."""
        version, known = self.store.version, self._roster
        if known is not None and version is not None and known.version == version:
            return known
        self._roster = Roster.of(version, self.store.records(), self.settings.data_dir, self._places)
        return self._roster

    def _places(self, rec: QueryRecord) -> list[Place]:
        """The places of a registered record, found once per record the store holds (`Store.records` gives
        the same objects until a record changes): a change costs a lookup per other query, not its paths."""
        known = self._known_places.get(rec.id)
        if known is not None and known[0] is rec:
            return known[1]
        if len(self._known_places) >= MAX_KNOWN_PLACES:
            self._known_places.clear()
        found = places(rec.name, rec.source, rec.sinks, rec.dead_letter, self.settings.data_dir)
        self._known_places[rec.id] = (rec, found)
        return found

    def _limits(self, rec: QueryRecord, roster: Roster, replacing: str | None) -> None:
        """Shards, operator, CET and the state budget against the registered queries but the one replaced."""
        s = self.settings
        shards = rec.options.get("shards")
        if shards is not None and shards > s.max_shards:
            raise config_error(f"shards = {shards} is over the limit of {s.max_shards} (max_shards)")
        key = stream_key(rec)
        others = [q for q in roster.by_stream.get(key, ()) if q.id != replacing]
        for option, what in (("shards", "shards"), ("operator", "as its operator")):
            asked, stream = rec.options.get(option), stream_setting(self.checkpoint(key), others, option)
            if asked is not None and stream is not None and asked != stream:
                raise config_error(f"{option} = {asked}, but the stream this query joins (its source and field names) "
                                   f"has {stream} {what}: a stream's {option} is fixed when it first runs. Leave "
                                   f"{option} out, or register the query with backfill (a stream of its own)")
        trends = rec.options.get("max_trends")
        if trends is not None and trends > s.max_cet_trends:
            raise config_error(f"max_trends = {trends} is over the limit of {s.max_cet_trends} (max_cet_trends)")
        used = self.states_bytes([q for q in roster.by_id if q != replacing])
        if used >= s.state_budget_bytes:
            raise ServiceError(429, f"the registered queries' state takes {used:,} bytes, the budget is "
                                    f"{s.state_budget_bytes:,} (state_budget_bytes): stop or delete a query first")
        if roster.names.get(rec.name, replacing) != replacing:
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
