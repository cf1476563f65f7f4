"""Shared dependencies: the registry, the settings, the API key check, documented error responses."""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from fastapi import Depends, Path, Request, Security
from fastapi.security import APIKeyHeader

from greta_service.registry import Registry, ServiceError
from greta_service.schemas import ErrorResponse
from greta_service.settings import Settings

API_KEY_HEADER = "X-API-Key"
_api_key = APIKeyHeader(name=API_KEY_HEADER, auto_error=False,
                        description="the service's API key; required on mutating endpoints when one is set")


def get_registry(request: Request) -> Registry:
    return request.app.state.registry  # type: ignore[no-any-return]


def get_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


API_KEY_COOKIE = "greta_api_key"  # the page's: set once from /?key=<key>


def key_matches(given: str | None, expected: str) -> bool:
    return bool(given) and hmac.compare_digest(str(given).encode(), expected.encode())


def require_api_key(request: Request, key: Annotated[str | None, Security(_api_key)] = None) -> None:
    expected = get_settings(request).api_key
    if expected and not key_matches(key, expected):
        raise ServiceError(401, f"missing or wrong API key (header {API_KEY_HEADER})")


def require_read_key(request: Request, key: Annotated[str | None, Security(_api_key)] = None) -> None:
    """Reads need the key too when one is set (unless `public_reads`): the header, or the page's cookie."""
    settings = get_settings(request)
    expected = settings.api_key
    if not expected or settings.public_reads:
        return
    if not (key_matches(key, expected) or key_matches(request.cookies.get(API_KEY_COOKIE), expected)):
        raise ServiceError(401, f"missing or wrong API key (header {API_KEY_HEADER}; in a browser, open the page "
                                "once as /?key=<key>)")


RegistryDep = Annotated[Registry, Depends(get_registry)]


def query_id_of(query_id: Annotated[str, Path(description="the query's id, or its name")],
                registry: RegistryDep) -> str:
    """The id of the query a path names by id or by name (404 when neither)."""
    return registry.get(query_id).id


QueryId = Annotated[str, Depends(query_id_of)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
Mutating = [Depends(require_api_key)]
Reading = [Depends(require_read_key)]


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a route answers with."""
    text = {400: "malformed request body (not JSON)", 401: "missing or wrong API key", 404: "no such query",
            409: "conflict with the query's state",
            413: "request body too large", 422: "invalid request or query (with line and column)",
            429: "too many queries", 503: "the service failed to start (or is starting: Spark is not up yet)"}
    return {c: {"model": ErrorResponse, "description": text[c]} for c in codes}
