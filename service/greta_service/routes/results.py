"""`/queries/{id}/results`: stored result rows, paged and filtered, and a live feed (SSE).

Row payloads go out as the JSON text the operator wrote (counts of any size
stay exact): the page body is assembled from that text, not re-encoded.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from greta_service.export import MEDIA_TYPES, Format, export
from greta_service.registry import ServiceError
from greta_service.routes.deps import QueryId, RegistryDep, SettingsDep, errors
from greta_service.routes.queries import query_columns
from greta_service.schemas import ResultsPage
from greta_stream.connectors import dumps, loads

router = APIRouter(prefix="/queries", tags=["results"])


def _seconds(text: str | None, name: str) -> float | None:
    """A window bound: seconds (number) or an ISO-8601 timestamp (naive = UTC)."""
    if text is None:
        return None
    try:
        value = float(text)
        if math.isfinite(value):
            return value
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()
    except (ValueError, OverflowError):
        raise ServiceError(422, f"{name} must be a number of seconds or an ISO-8601 time",
                           [{"msg": f"bad {name}: {text[:100]!r}", "line": None, "column": None}]) from None


def group_key(text: str) -> str:
    """The stored group key: a JSON list of the GROUP-BY values (a lone value is wrapped)."""
    try:
        value = loads(text)
    except (ValueError, RecursionError):
        value = text
    if not isinstance(value, list):
        value = [value]
    try:
        return dumps(value)
    except RecursionError:
        return text


@router.get("/{query_id}/results", responses={200: {"model": ResultsPage}, **errors(404, 422)})
def read_results(
    query_id: QueryId, registry: RegistryDep, settings: SettingsDep,
    window_from: Annotated[str | None, Query(alias="from", max_length=64,
                                             description="least window_start (seconds or ISO-8601)")] = None,
    window_to: Annotated[str | None, Query(alias="to", max_length=64,
                                           description="greatest window_start (seconds or ISO-8601)")] = None,
    group: Annotated[str | None, Query(max_length=4096, description='GROUP-BY values as a JSON list, e.g. ["tech"] '
                                       "or [1, 2]; a lone value is wrapped (tech, 1)")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> Response:
    """Result rows ordered by window, then group; `next_offset` pages on (null at the end)."""
    rec = registry.get(query_id)
    limit = min(limit, settings.max_page_rows)
    last_seq = registry.store.last_seq(query_id)  # before the page: a row stored meanwhile is sent again, not lost
    total, payloads = registry.store.page(
        query_id, start_min=_seconds(window_from, "from"), start_max=_seconds(window_to, "to"),
        grp=None if group is None else group_key(group), limit=limit, offset=offset,
    )
    next_offset = offset + len(payloads) if offset + len(payloads) < total else None
    head = {"query_id": query_id, "columns": query_columns(rec.text, rec.mode)[0], "total": total, "offset": offset,
            "limit": limit, "next_offset": next_offset, "last_seq": last_seq}
    body = json.dumps(head)[:-1] + ', "rows": [' + ", ".join(payloads) + "]}"
    return Response(body, media_type="application/json")


@router.get("/{query_id}/latest", responses={200: {"model": ResultsPage}, **errors(404)})
def latest_results(query_id: QueryId, registry: RegistryDep) -> Response:
    """Each group's row of its latest window (what a dashboard shows now), ordered by group."""
    rec = registry.get(query_id)
    payloads = registry.store.latest(query_id)
    head = {"query_id": query_id, "columns": query_columns(rec.text, rec.mode)[0], "total": len(payloads),
            "offset": 0, "limit": len(payloads), "next_offset": None, "last_seq": registry.store.last_seq(query_id)}
    body = json.dumps(head)[:-1] + ', "rows": [' + ", ".join(payloads) + "]}"
    return Response(body, media_type="application/json")


@router.get("/{query_id}/results/export", response_class=Response,
            responses={200: {"content": {t: {} for t in MEDIA_TYPES.values()},
                             "description": "the rows as a file"}, **errors(404, 422)})
def export_results(
    query_id: QueryId, registry: RegistryDep,
    format: Annotated[Format, Query(description="csv, parquet or jsonl")] = "jsonl",  # noqa: A002
    window_from: Annotated[str | None, Query(alias="from", max_length=64)] = None,
    window_to: Annotated[str | None, Query(alias="to", max_length=64)] = None,
    group: Annotated[str | None, Query(max_length=4096)] = None,
) -> Response:
    """Every stored row (filtered as `/results`) as one CSV, Parquet or JSON-lines file."""
    rec = registry.get(query_id)
    start_min, start_max = _seconds(window_from, "from"), _seconds(window_to, "to")
    grp = None if group is None else group_key(group)
    payloads: list[str] = []
    while True:
        _, page = registry.store.page(query_id, start_min=start_min, start_max=start_max, grp=grp, limit=10_000,
                                      offset=len(payloads))
        payloads += page
        if len(page) < 10_000:
            break
    data = export(format, query_columns(rec.text, rec.mode)[0], payloads)
    name = f"{rec.name}.{format}"
    return Response(data, media_type=MEDIA_TYPES[format],
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


@router.get(
    "/{query_id}/results/stream", response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {"schema": {"type": "string"}}},
                     "description": "server-sent events: `event: row`, `id: <seq>`, `data: <row JSON>`"},
               **errors(404, 422)},
)
async def stream_results(
    query_id: QueryId, request: Request, registry: RegistryDep, settings: SettingsDep,
    after: Annotated[int | None, Query(ge=0, le=2**62, description="replay rows stored after this id (0: all)")] = None,
    last_event_id: Annotated[str | None, Header(max_length=32)] = None,
) -> StreamingResponse:
    """New result rows as they are stored, as server-sent events; ends with `event: end` if the query is deleted.

    Without `after` (or a `Last-Event-ID` header from a reconnecting client) only rows stored from now on are sent.
    """
    store = registry.store
    await run_in_threadpool(registry.get, query_id)
    if after is None and last_event_id and last_event_id.isdigit():
        after = int(last_event_id)
    start = after if after is not None else await run_in_threadpool(store.last_seq, query_id)

    async def events() -> AsyncIterator[str]:
        last, quiet_since = start, time.monotonic()
        yield "retry: 2000\n\n"
        while not await request.is_disconnected():
            rows = await run_in_threadpool(store.after, query_id, last, 500)
            for seq, payload in rows:
                yield f"id: {seq}\nevent: row\ndata: {payload}\n\n"
                last = seq
            if rows:
                quiet_since = time.monotonic()
                continue
            if await run_in_threadpool(store.get_query, query_id) is None:
                yield "event: end\ndata: {}\n\n"
                return
            if time.monotonic() - quiet_since > settings.sse_keepalive_s:
                quiet_since = time.monotonic()
                yield ": keepalive\n\n"
            await asyncio.sleep(settings.sse_poll_s)

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
