"""A Python client of the greta-stream service (`greta-stream serve`).

Standard library only (urllib, json): it runs wherever greta-stream is
installed, with or without Spark or the service.

    from greta_stream.client import ServiceClient

    svc = ServiceClient("http://127.0.0.1:8000", api_key=None)
    svc.add("q1", open("configs/q1_stock.greta").read(),
            source={"format": "jsonl", "path": "samples/stock"})
    for row in svc.results("q1"):
        print(row)

Queries are addressed by id or by name. Every error of the service is a
`ServiceError` carrying the HTTP status, the service's message and its
itemized errors (a query's line and column).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000"
API_KEY_HEADER = "X-API-Key"


class ServiceError(Exception):
    """The service answered with an error, or could not be reached (status 0)."""

    def __init__(self, status: int, detail: str, errors: list[dict[str, Any]] | None = None) -> None:
        self.status, self.detail, self.errors = status, detail, errors or []
        where = [f"line {e['line']}, column {e['column']}: {e['msg']}" for e in self.errors if e.get("line")]
        super().__init__(f"{status}: {detail}" + "".join(f"\n  {w}" for w in where) if status else detail)


class ServiceClient:
    """Register, inspect, stop, start and delete queries; read their results."""

    def __init__(self, url: str | None = None, *, api_key: str | None = None, timeout_s: float = 60.0) -> None:
        self.url = (url or os.environ.get("GRETA_URL") or DEFAULT_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("GRETA_API_KEY")
        self.timeout_s = timeout_s

    # -- queries -----------------------------------------------------------------
    def queries(self) -> list[dict[str, Any]]:
        """Every registered query with its status and progress."""
        return self._call("GET", "/queries")["queries"]

    def query(self, ref: str) -> dict[str, Any]:
        """One query by id or name."""
        return self._call("GET", f"/queries/{self.resolve(ref)}")

    def add(self, name: str, text: str, *, source: dict[str, Any], sinks: list[dict[str, Any]] | None = None,
            dead_letter: dict[str, Any] | None = None, mode: str | None = None, **options: Any) -> dict[str, Any]:
        """Register and start a query; `options` are the API's query options
        (lateness_s, engine, trends, max_trends, with_events, distribute_over, shards, operator,
        trigger_interval_s, fields, backfill: `greta_service.schemas.QueryOptions`)."""
        body: dict[str, Any] = {"name": name, "text": text, "source": source, "sinks": sinks or [],
                                "options": options}
        if dead_letter is not None:
            body["dead_letter"] = dead_letter
        if mode is not None:
            body["mode"] = mode
        return self._call("POST", "/queries", body)

    def validate(self, text: str, mode: str | None = None) -> dict[str, Any]:
        """Compile a query without registering it: its explain and result columns."""
        return self._call("POST", "/queries/validate", {"text": text, **({"mode": mode} if mode else {})})

    def update(self, ref: str, **changes: Any) -> dict[str, Any]:
        """Change a query's text, mode, sinks, dead_letter or options (the service says what keeps its state)."""
        return self._call("PATCH", f"/queries/{self.resolve(ref)}", changes)

    def stop(self, ref: str) -> dict[str, Any]:
        return self._call("POST", f"/queries/{self.resolve(ref)}/stop")

    def start(self, ref: str) -> dict[str, Any]:
        return self._call("POST", f"/queries/{self.resolve(ref)}/start")

    def delete(self, ref: str) -> None:
        self._call("DELETE", f"/queries/{self.resolve(ref)}")

    def plan(self) -> dict[str, Any]:
        """How the running queries share streams and evaluation."""
        return self._call("GET", "/plan")

    def ready(self) -> bool:
        try:
            self._call("GET", "/readyz")
        except ServiceError:
            return False
        return True

    # -- results -----------------------------------------------------------------
    def results(self, ref: str, *, window_from: float | str | None = None, window_to: float | str | None = None,
                group: list[Any] | None = None, page_rows: int = 1000) -> Iterator[dict[str, Any]]:
        """The query's stored result rows, ordered by window then group, page by page."""
        query_id = self.resolve(ref)
        params: dict[str, Any] = {"limit": page_rows}
        if window_from is not None:
            params["from"] = window_from
        if window_to is not None:
            params["to"] = window_to
        if group is not None:
            params["group"] = json.dumps(group)
        offset: int | None = 0
        while offset is not None:
            page = self._call("GET", f"/queries/{query_id}/results?" + urllib.parse.urlencode({**params,
                                                                                              "offset": offset}))
            yield from page["rows"]
            offset = page["next_offset"]

    def wait(self, ref: str, *, rows: int = 1, timeout_s: float = 120.0, poll_s: float = 0.5) -> dict[str, Any]:
        """Wait until the query has stored `rows` result rows; its info. Raises
        ServiceError when it fails, TimeoutError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            info = self.query(ref)
            if info["status"] == "failed":
                raise ServiceError(409, f"query {info['name']} failed: {info.get('error')}")
            if info["progress"]["result_rows"] >= rows:
                return info
            if time.monotonic() > deadline:
                raise TimeoutError(f"query {info['name']}: {info['progress']['result_rows']} of {rows} rows "
                                   f"after {timeout_s:g} s")
            time.sleep(poll_s)

    # -- plumbing ----------------------------------------------------------------
    def resolve(self, ref: str) -> str:
        """The id of the query `ref` (an id or a name)."""
        matches = [q["id"] for q in self.queries() if ref in (q["id"], q["name"])]
        if not matches:
            raise ServiceError(404, f"no query with id or name {ref!r}")
        if len(matches) > 1:
            raise ServiceError(409, f"{len(matches)} queries are named {ref!r}: use an id ({', '.join(matches)})")
        return matches[0]

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers[API_KEY_HEADER] = self.api_key
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 - the user's URL
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise _error(exc.code, exc.read()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServiceError(0, f"cannot reach the service at {self.url}: {reason}") from None
        return json.loads(raw) if raw else None


def _error(status: int, raw: bytes) -> ServiceError:
    try:
        body = json.loads(raw)
    except ValueError:
        return ServiceError(status, raw.decode(errors="replace")[:500] or "no detail")
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list):  # FastAPI's own validation errors
        return ServiceError(status, "invalid request", [{"msg": d.get("msg", ""), "loc": d.get("loc")}
                                                        for d in detail if isinstance(d, dict)])
    return ServiceError(status, str(detail or body), body.get("errors") if isinstance(body, dict) else None)
