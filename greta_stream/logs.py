"""Logging of the long-running commands (`run`, `serve`): plain lines, or one JSON object per line.

JSON lines carry `time` (ISO-8601, UTC), `level`, `logger`, `message` and,
for an exception, `error`: what log collectors (Loki, Elasticsearch, Cloud
Logging) index without parsing.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

PLAIN = "%(asctime)s %(levelname)s %(name)s %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
               "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup(level: str | int = "INFO", as_json: bool = False) -> None:
    """Root logging to stderr at `level`, plain or JSON; py4j's per-callback chatter kept at WARNING."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if as_json else logging.Formatter(PLAIN))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper() if isinstance(level, str) else level)
    logging.getLogger("py4j").setLevel(logging.WARNING)
