"""Fixtures of the service tests: one real server for the whole test session (see service_helpers)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from service_helpers import Service


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory, subprocesses: None) -> Iterator[Service]:
    svc = Service(tmp_path_factory.mktemp("service"))
    svc.start()
    yield svc
    svc.stop()


@pytest.fixture
def api(service: Service) -> Iterator[httpx.Client]:
    with service.client() as client:
        yield client
