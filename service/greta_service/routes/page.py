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

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from greta_service.routes.deps import RegistryDep
from greta_service.routes.queries import list_queries

router = APIRouter(tags=["page"])

OPEN_CARDS = 4  # the page's MAX_OPEN: the newest queries' cards open at first
FIRST_ROWS = 1000  # the page's first results request


@lru_cache(maxsize=1)
def _page() -> str:
    return files("greta_service").joinpath("static/index.html").read_text(encoding="utf-8")


@router.get("/", response_class=HTMLResponse)
def index(registry: RegistryDep) -> HTMLResponse:
    """The registered queries with their status, and a live plot of each query's aggregates per window."""
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
