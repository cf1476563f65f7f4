"""`/healthz` (the process answers), `/readyz` (Spark up, queries resumed), `/metrics` (Prometheus text)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from greta_service.routes.deps import Reading, RegistryDep
from greta_service.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> Health:
    """The process is up and answering."""
    return Health(status="ok")


@router.get("/readyz", responses={503: {"model": Health, "description": "starting, or failed to start"}})
def readyz(registry: RegistryDep, request: Request) -> JSONResponse:
    """Spark is up and every query that should run has been resumed. `detail` says what the start rebased
    when the data folder was served from elsewhere before, and which paths outside it stay as they were."""
    moved = getattr(request.app.state, "relocation", None)
    if registry.startup_error:
        return JSONResponse(Health(status="failed", detail=registry.startup_error).model_dump(), status_code=503)
    if not registry.ready.is_set():
        lost = registry.spark_lost and f"{registry.spark_lost}: a new one starts, and the streams resume from " \
            "their checkpoints"
        return JSONResponse(Health(status="starting", detail=lost or moved).model_dump(), status_code=503)
    return JSONResponse(Health(status="ready", detail=moved).model_dump())


@router.get("/metrics", response_class=PlainTextResponse, dependencies=Reading,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
                       401: {"description": "missing or wrong API key",  # errors are JSON, the metrics text
                             "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}}})
def metrics(request: Request) -> Response:
    """Service, stream and per-query metrics in the Prometheus text format (see `greta_service.metrics`)."""
    return Response(generate_latest(request.app.state.metrics.prometheus), media_type=CONTENT_TYPE_LATEST)
