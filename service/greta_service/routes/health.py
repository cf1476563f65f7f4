"""`/healthz` (the process answers), `/readyz` (Spark up, queries resumed), `/metrics` (Prometheus text)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse

from greta_service.registry import Registry
from greta_service.routes.deps import RegistryDep
from greta_service.schemas import Health
from greta_service.store import STATUSES

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> Health:
    """The process is up and answering."""
    return Health(status="ok")


@router.get("/readyz", responses={503: {"model": Health, "description": "starting, or failed to start"}})
def readyz(registry: RegistryDep) -> JSONResponse:
    """Spark is up and every query that should run has been resumed."""
    if registry.startup_error:
        return JSONResponse(Health(status="failed", detail=registry.startup_error).model_dump(), status_code=503)
    if not registry.ready.is_set():
        return JSONResponse(Health(status="starting").model_dump(), status_code=503)
    return JSONResponse(Health(status="ready").model_dump())


@router.get("/metrics", response_class=PlainTextResponse,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
def metrics(registry: RegistryDep) -> PlainTextResponse:
    """Service and per-query metrics in the Prometheus text format (version 0.0.4)."""
    return PlainTextResponse("".join(render(registry)), media_type="text/plain; version=0.0.4; charset=utf-8")


# name, type, help, progress field (None: computed below)
_QUERY_METRICS = (
    ("greta_query_result_rows_total", "counter", "result rows stored", "result_rows"),
    ("greta_query_batches_total", "counter", "micro-batches stored", "batches"),
    ("greta_query_late_events_total", "counter", "events dropped behind the watermark", "late"),
    ("greta_query_input_rows", "gauge", "events read since the stream (re)started", "input_rows"),
    ("greta_query_input_rows_per_second", "gauge", "input rate of the last micro-batch", "input_rows_per_s"),
    ("greta_query_processed_rows_per_second", "gauge", "processing rate of the last micro-batch",
     "processed_rows_per_s"),
    ("greta_query_watermark_seconds", "gauge", "event-time watermark", "watermark_s"),
    ("greta_query_state_rows", "gauge", "state rows (shards) held", "state_rows"),
    ("greta_query_state_bytes", "gauge", "state memory in bytes", "state_bytes"),
)


def render(registry: Registry) -> Iterable[str]:
    records = registry.store.list_queries()
    yield "# HELP greta_ready 1 when Spark is up and queries are resumed\n# TYPE greta_ready gauge\n"
    yield f"greta_ready {int(registry.ready.is_set())}\n"
    yield "# HELP greta_queries registered queries by status\n# TYPE greta_queries gauge\n"
    for status in STATUSES:
        yield f'greta_queries{{status="{status}"}} {sum(r.status == status for r in records)}\n'
    progress = {r.id: registry.progress(r) for r in records}
    labels = {r.id: f'id="{_esc(r.id)}",query="{_esc(r.name)}"' for r in records}
    for name, kind, text, key in _QUERY_METRICS:
        yield f"# HELP {name} {text}\n# TYPE {name} {kind}\n"
        for r in records:
            value = progress[r.id].get(key)
            if value is not None:
                yield f"{name}{{{labels[r.id]}}} {_num(value)}\n"
    yield "# HELP greta_query_dead_letters_total events skipped, by reason\n"
    yield "# TYPE greta_query_dead_letters_total counter\n"
    for r in records:
        for reason, n in sorted(progress[r.id]["dead_letters_by_reason"].items()):
            yield f'greta_query_dead_letters_total{{{labels[r.id]},reason="{_esc(reason)}"}} {n}\n'
    yield "# HELP greta_query_last_batch_duration_seconds duration of the last micro-batch\n"
    yield "# TYPE greta_query_last_batch_duration_seconds gauge\n"
    for r in records:
        durations = progress[r.id].get("batch_durations_ms") or []
        if durations:
            yield f"greta_query_last_batch_duration_seconds{{{labels[r.id]}}} {durations[-1] / 1000}\n"


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(value: Any) -> str:
    return repr(float(value)) if isinstance(value, float) else str(int(value))
