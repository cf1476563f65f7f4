"""`/docs` (Swagger UI) and `/redoc` (ReDoc), served from the package's own assets.

FastAPI's default pages load their scripts from a CDN and stay blank without
the internet; these pages load the copies in `static/vendor` (see its
README.txt for the versions and licenses).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

VENDOR = Path(__file__).resolve().parent.parent / "static" / "vendor"
ASSETS = "/docs-assets"

router = APIRouter(include_in_schema=False)


def mount_assets(app: FastAPI) -> None:
    app.mount(ASSETS, StaticFiles(directory=VENDOR), name="docs-assets")


@router.get("/openapi.json")
def openapi(request: Request) -> JSONResponse:
    """The API's OpenAPI schema (behind the read key, as the pages that show it)."""
    return JSONResponse(request.app.openapi())


@router.get("/docs")
def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title="greta-stream API",
                               swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                               swagger_css_url=f"{ASSETS}/swagger-ui.css",
                               swagger_favicon_url=f"{ASSETS}/favicon-32x32.png")


@router.get("/redoc")
def redoc() -> HTMLResponse:
    return get_redoc_html(openapi_url="/openapi.json", title="greta-stream API",
                          redoc_js_url=f"{ASSETS}/redoc.standalone.js",
                          redoc_favicon_url=f"{ASSETS}/favicon-32x32.png", with_google_fonts=False)
