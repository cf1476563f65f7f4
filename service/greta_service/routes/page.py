"""`/`: the results page (one static HTML file; it reads the JSON API like any client).

The page comes with what the API would answer first (the query list and
the first results of the cards it opens), so that it draws data before any
request: a slow client, or a screenshot taken once the page has loaded,
sees the plots.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from greta_service.registry import ServiceError
from greta_service.routes.deps import (
    API_KEY_COOKIE,
    API_KEY_HEADER,
    RegistryDep,
    SettingsDep,
    key_matches,
    require_read_key,
)
from greta_service.routes.queries import list_queries

router = APIRouter(tags=["page"])

OPEN_CARDS = 4  # the page's MAX_OPEN: the newest queries' cards open at first
FIRST_ROWS = 1000  # the page's first results request


@lru_cache(maxsize=1)
def _page() -> str:
    return files("greta_service").joinpath("static/index.html").read_text(encoding="utf-8")


@router.get("/", response_class=HTMLResponse, responses={303: {}, 401: {}})
def index(request: Request, registry: RegistryDep, settings: SettingsDep,
          key: Annotated[str | None, Query(description="the API key, once: kept in a cookie")] = None) -> Response:
    """The registered queries with their status, and a live plot of each query's aggregates per window.
    With an API key set, open it once as `/?key=<key>`: the key is kept in a cookie for the page's reads."""
    if key is not None and settings.api_key and key_matches(key, settings.api_key):
        moved = RedirectResponse("/", status_code=303)  # the key leaves the address bar and the history
        moved.set_cookie(API_KEY_COOKIE, key, httponly=True, samesite="strict", secure=request.url.scheme == "https")
        return moved
    try:
        require_read_key(request, request.headers.get(API_KEY_HEADER))
    except ServiceError:
        return HTMLResponse("<!doctype html><title>greta-stream</title><p>This service needs its API key: open "
                            "<code>/?key=&lt;key&gt;</code> once (it is kept in a cookie).</p>", status_code=401)
    listed = list_queries(registry).model_dump(mode="json")["queries"]
    results = {}
    for q in listed[-OPEN_CARDS:]:
        last_seq = registry.store.last_seq(q["id"])
        total, payloads = registry.store.page(q["id"], start_min=None, start_max=None, grp=None,
                                              limit=FIRST_ROWS, offset=0)
        results[q["id"]] = {"rows": [json.loads(p) for p in payloads], "last_seq": last_seq,
                            "next_offset": len(payloads) if len(payloads) < total else None}
    initial = json.dumps({"queries": listed, "results": results}).replace("</", "<\\/")
    return HTMLResponse(_page().replace("__INITIAL__", initial, 1))
