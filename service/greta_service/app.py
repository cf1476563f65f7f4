"""The app factory: `create_app(settings)` wires settings, store, registry and routers.

The lifespan owns the SparkSession and the running streams:

  1. open the store (registry + results) under `data_dir`; a data folder served
     from elsewhere before has its paths rebased (`relocation`);
  2. in a background thread: start Spark, then resume every query whose
     desired state is running (from its checkpoint); `/readyz` turns 200
     when that is done, `/healthz` answers from the first moment;
  3. a monitor thread restarts streams that died (from their checkpoints,
     `stream_restarts` times in 10 minutes, then fails their queries) and
     fails queries that went over a limit;
  4. on shutdown: stop the streams (their desired state is kept, so the
     next start resumes them), stop Spark, close the store.
"""

from __future__ import annotations

import logging
import threading
import time
import typing
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from greta_service.metrics import ServiceMetrics
from greta_service.registry import Registry, ServiceError
from greta_service.relocation import relocate
from greta_service.routes import docs, health, page, plan, queries, results
from greta_service.routes.deps import Reading, errors
from greta_service.runner import short_error
from greta_service.settings import Settings
from greta_service.store import Retention, check_registry, open_store, restore_registry, set_aside
from greta_stream import ConfigError
from greta_stream.pipeline.validation import model_in, unknown_key

log = logging.getLogger("greta_service")

JVM_LOSS_WINDOW_S = 1800  # Spark's JVM lost `spark_restarts` + 1 times in this many seconds: the service stays down

DESCRIPTION = """Register GRETA event trend aggregation queries, run them on Spark Structured
Streaming, and read their results while the streams run.

Mutating endpoints need the `X-API-Key` header when the service has an API key
(always, when it binds beyond loopback). Errors are `{detail, errors: [{msg, line, column}]}`;
query errors carry the 1-based line and column in the query text."""


def spark_conf(s: Settings) -> dict[str, str]:
    """The Spark settings the service's session takes from its own."""
    # a stream stuck in a batch (a Kafka sink at a dead port) is interrupted after this long
    conf = {"spark.sql.streaming.stopTimeout": str(int(s.stop_timeout_s * 1000)),
            # what the JVM keeps of past batches, for a UI the service does not run and reports it takes from
            # its listener (`on_progress`): Spark's defaults (1,000 SQL executions and jobs, 100 reports a
            # stream) fill the heap with a hundred streams each running a batch a second
            "spark.sql.ui.retainedExecutions": "100", "spark.ui.retainedJobs": "100",
            "spark.ui.retainedStages": "100", "spark.sql.streaming.numRecentProgressUpdates": "5"}
    if s.spark_driver_memory:
        conf["spark.driver.memory"] = s.spark_driver_memory
    return conf


def create_app(settings: Settings | None = None, *, restore_registry: bool = False) -> FastAPI:
    """The service's app; its registry checked first (`ConfigError`: the start is refused, saying what to do),
    and with `restore_registry` an empty or unreadable one restored from its backup. uvicorn's routine lines
    are labelled `uvicorn` from here on (`ServerLines`)."""
    settings = (settings or Settings.load()).check()
    prepare_registry(settings, restore=restore_registry)
    label_server_lines()
    app = FastAPI(title="greta-stream", version="0.1.0", description=DESCRIPTION, lifespan=_lifespan,
                  docs_url=None, redoc_url=None, openapi_url=None)  # routes/docs.py: the pages and the schema
    app.state.settings = settings
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes)  # type: ignore[arg-type]
    app.add_exception_handler(ServiceError, _service_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.include_router(health.router)  # /healthz and /readyz answer anyone; /metrics needs the key (health.py)
    app.include_router(page.router)  # takes the key once from /?key= into a cookie (page.py)
    for module in (queries, results, plan, docs):
        app.include_router(module.router, dependencies=Reading, responses=errors(401))
    docs.mount_assets(app)
    return app


class ServerLines(logging.Filter):
    """uvicorn logs its life cycle (`Started server process`, `Application startup complete`) at INFO under
    `uvicorn.error`, its logger for all but the access lines: those go out as `uvicorn`, so that a line
    labelled `uvicorn.error` is a warning or worse. (The service's own lines are `greta_service`'s.)"""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            record.name = "uvicorn"
        return True


def label_server_lines() -> None:
    """Install `ServerLines` on uvicorn's `uvicorn.error` logger (once per process): before the server
    starts, whose first lines come before the app's lifespan."""
    server = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, ServerLines) for f in server.filters):
        server.addFilter(ServerLines())


def prepare_registry(settings: Settings, *, restore: bool = False) -> int:
    """Refuse a registry that lost its queries (`store.check_registry`); with `restore`, put the
    backup's queries back first (an unreadable file moved aside). Returns the queries restored."""
    url = settings.resolved_store_url
    retention = Retention(settings.result_retention_rows, settings.result_retention_s)
    try:
        store = open_store(url, retention, whole=restore)  # a restore reads every page
    except ConfigError:
        if not restore or not url.startswith("sqlite:///"):
            raise
        broken = Path(url[len("sqlite:///"):])
        log.warning("registry %s could not be read: moved to %s", broken, set_aside(broken))
        store = open_store(url, retention)
    try:
        restored = 0
        if restore:
            restored = restore_registry(store)
            log.info("registry restored from its backup: %d queries", restored)
        check_registry(store, settings.checkpoint_dir, url)
        return restored
    finally:
        store.close()


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    settings.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    store = open_store(settings.resolved_store_url,
                       Retention(settings.result_retention_rows, settings.result_retention_s))
    app.state.relocation = None  # the data folder served from elsewhere before: rebased first (`relocation`)
    try:
        moved = relocate(settings, store)
        app.state.relocation = moved and moved.summary()
    except OSError as exc:
        app.state.relocation = f"where the data folder was could not be checked or rebased: {exc}"
        log.error("%s", app.state.relocation)
    registry = Registry(settings, store)
    app.state.registry = registry
    app.state.metrics = ServiceMetrics(registry)
    stopping = threading.Event()
    boot = threading.Thread(target=_boot, args=(registry, app.state.metrics), name="greta-boot", daemon=True)
    monitor = threading.Thread(target=_monitor, args=(registry, app.state.metrics, stopping), name="greta-monitor",
                               daemon=True)
    boot.start()
    monitor.start()
    try:
        yield
    finally:
        stopping.set()
        boot.join()
        monitor.join()
        try:
            registry.shutdown()
            if registry.spark is not None:
                registry.spark.stop()
        except Exception as exc:  # the JVM may already be gone (killed with us)
            log.warning("shutdown: %s", short_error(exc))
        store.close()
        log.info("service stopped")


def _boot(registry: Registry, metrics: ServiceMetrics) -> None:
    try:
        from greta_stream.spark import get_session, on_progress

        s = registry.settings
        registry.spark = get_session(s.spark_master, app_name="greta-stream-service",
                                     shuffle_partitions=s.spark_shuffle_partitions, conf=spark_conf(s))
        def observe(report: dict[str, Any]) -> None:  # every micro-batch of every stream
            metrics.observe(report)
            registry.observe(report)

        on_progress(registry.spark, observe)
        registry.resume_all()
        registry.started()
        log.info("service ready: Spark %s", registry.spark.version)
    except Exception as exc:
        registry.startup_error = short_error(exc)
        log.error("service failed to start: %s", registry.startup_error)


def _monitor(registry: Registry, metrics: ServiceMetrics, stopping: threading.Event) -> None:
    losses: list[float] = []  # when Spark's JVM was found gone
    while not stopping.wait(registry.settings.monitor_interval_s):
        if not registry.ready.is_set():
            continue
        try:
            from greta_stream.spark import jvm_gone

            gone = jvm_gone(registry.spark)
            if gone is not None:
                _recover(registry, metrics, gone, losses)
            else:
                registry.monitor_once()
        except Exception as exc:  # never let the monitor die
            log.warning("monitor: %s", short_error(exc))


def _recover(registry: Registry, metrics: ServiceMetrics, why: str, losses: list[float]) -> None:
    """Spark's JVM is gone (out of heap, killed): start a new one, whose streams resume from their checkpoints
    (no row lost: the sinks are exactly-once), unless it went more than `spark_restarts` times in
    `JVM_LOSS_WINDOW_S`: then the service stays down (`/readyz` 503, its queries failed) saying what to do."""
    from greta_stream.spark import forget_session

    now = time.monotonic()
    losses[:] = [t for t in losses if now - t < JVM_LOSS_WINDOW_S] + [now]
    registry.lost_spark(why)
    forget_session()
    if len(losses) > registry.settings.spark_restarts:
        times = "once" if len(losses) == 1 else f"{len(losses)} times"
        registry.startup_error = (f"{why} ({times} in {JVM_LOSS_WINDOW_S // 60} minutes, spark_restarts = "
                                  f"{registry.settings.spark_restarts}): the service stays down. Its log says why (an "
                                  "OutOfMemoryError: give Spark more heap with spark_driver_memory); restart the "
                                  "service, and its queries resume from their checkpoints")
        log.error("%s", registry.startup_error)
        return
    log.error("%s: every stream stopped with it. A new JVM starts, and the streams resume from their checkpoints "
              "(their queries are starting until then)", why)
    _boot(registry, metrics)


async def _service_error(request: Request, exc: ServiceError) -> JSONResponse:
    return JSONResponse({"detail": exc.detail, "errors": exc.errors}, status_code=exc.status)


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors: list[dict[str, Any]] = []
    body = _body_model(request)
    for e in exc.errors():
        loc = [x if isinstance(x, (str, int)) else str(x) for x in e.get("loc", ())]
        msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        if e.get("type") == "extra_forbidden" and loc and loc[0] == "body":
            msg = unknown_key(body, [str(p) for p in loc[1:]])
        errors.append({"msg": msg, "line": None, "column": None, "loc": loc})
    detail = errors[0]["msg"] if len(errors) == 1 else "invalid request"
    return JSONResponse({"detail": detail, "errors": errors}, status_code=422)


def _body_model(request: Request) -> Any:
    """The pydantic model the request's body is read into: the endpoint's model parameter."""
    endpoint = request.scope.get("endpoint")
    try:
        hints = typing.get_type_hints(endpoint) if endpoint is not None else {}
    except Exception:  # an annotation that does not resolve: no suggestion, still a 422
        return None
    models = (model_in(hint) for name, hint in hints.items() if name != "return")
    return next((m for m in models if m is not None), None)


class BodyLimit:
    """Answers 413 to a request body over `max_bytes` (declared or streamed) before any route runs."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._reject(scope, receive, send)
            return
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, receive, send)  # disconnect: let the app see it
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                await self._reject(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        msg = f"request body over the limit of {self.max_bytes:,} bytes (max_request_bytes)"
        response = JSONResponse({"detail": msg, "errors": [{"msg": msg, "line": None, "column": None}]},
                                status_code=413)
        await response(scope, receive, send)
