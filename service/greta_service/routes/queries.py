"""`/queries`: register, validate, list, inspect, update, stop, start and delete queries.

Thin: every decision is the registry's. Handlers are plain functions, so
FastAPI runs them in its thread pool (Spark and SQLite calls block).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response, status

from greta_service.registry import Registry
from greta_service.routes.deps import Mutating, QueryId, RegistryDep, errors
from greta_service.schemas import (
    Progress,
    QueryCreate,
    QueryCreated,
    QueryInfo,
    QueryList,
    QueryOptions,
    QueryUpdate,
    QueryValidate,
    ValidateResponse,
)
from greta_service.store import QueryRecord
from greta_stream import Limits, RunSpec

router = APIRouter(prefix="/queries", tags=["queries"])


@lru_cache(maxsize=65_536)  # every registered query's, read for each list (a smaller cache than the registry misses each)
def query_columns(text: str, mode: str) -> tuple[list[str], list[str]]:
    """(result columns, GROUP-BY columns) of a registered (so valid: its limits were checked) query text."""
    spec = RunSpec.create(text, mode=mode, limits=Limits(None, None))
    return spec.columns, list(spec.group_columns)


def query_info(registry: Registry, rec: QueryRecord, persisted: dict[str, int] | None = None,
               handles: dict[str, Any] | None = None) -> QueryInfo:
    status, error = registry.status(rec)
    return QueryInfo(
        id=rec.id, name=rec.name, text=rec.text, mode=rec.mode, status=status, error=error,  # type: ignore[arg-type]
        source=rec.source, sinks=rec.sinks, dead_letter=rec.dead_letter, options=rec.options,
        columns=query_columns(rec.text, rec.mode)[0], group_columns=query_columns(rec.text, rec.mode)[1],
        created_at=rec.created_at,
        progress=Progress(**registry.progress(rec, persisted, handles)),
    )


@router.post("", status_code=status.HTTP_201_CREATED, dependencies=Mutating,
             responses={202: {"model": QueryCreated, "description": "accepted while the service starts (status "
                              "starting): validated now, run once Spark is up"},
                        **errors(400, 401, 409, 413, 422, 429, 503)})
def create_query(body: QueryCreate, registry: RegistryDep, response: Response) -> QueryCreated:
    """Register a query and start its stream. A rejected query leaves nothing behind."""
    rec, spec = registry.create(body)
    deprecated = _deprecated(body.options, response)
    if rec.status == "starting":  # accepted while the service starts: it runs once Spark is up
        response.status_code = status.HTTP_202_ACCEPTED
    return QueryCreated(id=rec.id, name=rec.name, mode=rec.mode, status=rec.status,  # type: ignore[arg-type]
                        explain=spec.query.explain(), columns=spec.columns, warnings=deprecated)


@router.post("/validate", responses=errors(400, 409, 413, 422, 429))
def validate_query(body: QueryValidate, registry: RegistryDep, response: Response) -> ValidateResponse:
    """Compile a query text without registering it: the explain, or every error with its position. Given the
    whole body of `POST /queries` (a `source`), check all of it as a registration would, without registering."""
    if body.source is None:
        spec = registry.compile(body.text, body.mode)
    else:
        given = body.model_dump(exclude_unset=True, exclude={"options"})
        given.setdefault("name", "validate")
        _, spec = registry.prepare(QueryCreate.model_validate({**given, "options": body.options}))
    return ValidateResponse(valid=True, mode=spec.mode, explain=spec.query.explain(),  # type: ignore[arg-type]
                            columns=spec.columns, warnings=_deprecated(body.options, response))


def _deprecated(options: QueryOptions, response: Response) -> list[str]:
    """The deprecated setting names a request used; the `Deprecation` header when there is one."""
    if options.deprecations:
        response.headers["Deprecation"] = "true"
    return options.deprecations


@router.get("", responses=errors(422))
def list_queries(registry: RegistryDep, limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
                 offset: Annotated[int, Query(ge=0, le=2**62)] = 0) -> QueryList:
    """Every registered query with its status and progress, in registration order; with `limit`, a page of
    them from `offset` (`next_offset` names the next page): with thousands of queries, a page reads only
    its own queries' progress."""
    records = registry.store.records()  # read only
    end = len(records) if limit is None else min(len(records), offset + limit)
    persisted = registry.store.state_bytes()  # read once for the whole list
    handles = registry.handles()
    return QueryList(queries=[query_info(registry, r, persisted, handles) for r in records[offset:end]],
                     total=len(records), offset=offset, next_offset=end if end < len(records) else None)


@router.get("/{query_id}", responses=errors(404))
def get_query(query_id: QueryId, registry: RegistryDep) -> QueryInfo:
    """Status (starting, running, stopped, or failed with the error: `QueryInfo.status`) and progress of one query."""
    return query_info(registry, registry.get(query_id))


@router.patch("/{query_id}", dependencies=Mutating, responses=errors(400, 401, 404, 413, 422, 429, 503))
def update_query(query_id: QueryId, body: QueryUpdate, registry: RegistryDep) -> QueryInfo:
    """Change a query's text, mode, sinks, dead letters or options by a JSON Merge Patch (RFC 7396) of its
    registration: what the body names changes, the rest stays, a null resets a key to its default. New sinks
    or lateness keep its state and results; a new text, mode, field names or CET options start both afresh
    (from the stream's position)."""
    rec, _ = registry.update(query_id, body)
    return query_info(registry, rec)


@router.post("/{query_id}/stop", dependencies=Mutating, responses=errors(401, 404))
def stop_query(query_id: QueryId, registry: RegistryDep) -> QueryInfo:
    """Stop the stream; its checkpoint and results stay, `start` resumes it."""
    return query_info(registry, registry.stop(query_id))


@router.post("/{query_id}/start", dependencies=Mutating, responses=errors(401, 404, 409, 503))
def start_query(query_id: QueryId, registry: RegistryDep) -> QueryInfo:
    """Start (or resume) the stream from its checkpoint."""
    return query_info(registry, registry.start(query_id))


@router.delete("/{query_id}", status_code=status.HTTP_204_NO_CONTENT, dependencies=Mutating,
               responses=errors(401, 404))
def delete_query(query_id: QueryId, registry: RegistryDep) -> Response:
    """Stop the stream and forget the query, its checkpoint and its stored results (sink files stay)."""
    registry.delete(query_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
