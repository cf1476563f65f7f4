"""Spark fixture for the CET tests: the session-scoped local[2] session of tests/spark."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from greta_stream.spark.session import get_session

    session = get_session("local[2]", app_name="greta-stream-tests", shuffle_partitions=2)  # getOrCreate: shared
    yield session
    session.stop()
