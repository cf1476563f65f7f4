"""The control plane: a FastAPI service that registers queries, runs them on Spark and serves their results.

`create_app(settings)` builds the app; `greta-stream serve` runs it with uvicorn.
Uses the public API of `greta_stream` only (the package, `greta_stream.connectors`
and `greta_stream.spark`); nothing in `greta_stream` imports it.

  settings.py   Settings (defaults < config file < GRETA_* environment < flags)
  store.py      RegistryStore / ResultStore interfaces and the SQLite implementation
  runner.py     one query -> one Spark stream (foreachBatch into sinks and store), progress
  registry.py   checks, life cycle (running / stopped / failed), resume after restart, limits
  recheck.py    the registration's checks run again on registered queries, at each start
  relocation.py a data folder moved or copied elsewhere: its paths rebased before any stream starts
  schemas.py    request and response bodies
  routes/       one router per resource: queries, results (+ SSE), health and metrics, the page
  app.py        create_app and the lifespan that owns Spark and the streams
"""

from greta_service.app import create_app
from greta_service.settings import Settings

__all__ = ["Settings", "create_app"]
