"""Spark fixtures: one session-scoped local[2] SparkSession, few shuffle partitions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from greta_stream.spark.session import get_session

    session = get_session("local[2]", app_name="greta-stream-tests", shuffle_partitions=2)
    yield session
    session.stop()
