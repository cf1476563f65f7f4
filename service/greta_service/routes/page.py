"""`/`: the results page (one static HTML file; it reads the JSON API like any client)."""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(tags=["page"])


@lru_cache(maxsize=1)
def _page() -> str:
    return files("greta_service").joinpath("static/index.html").read_text(encoding="utf-8")


@router.get("/", response_class=HTMLResponse)
def index() -> HTMLResponse:
    """The registered queries with their status, and a live plot of each query's aggregates per window."""
    return HTMLResponse(_page())
