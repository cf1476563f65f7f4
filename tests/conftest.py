"""Suite-wide options and the one Spark fixture.

`GRETA_HYPOTHESIS_SCALE=K` multiplies every property test's `max_examples`
by K (a deeper search than the default suite's, e.g. overnight)::

    GRETA_HYPOTHESIS_SCALE=20 .venv/bin/python -m pytest tests/engine tests/cet -m "not spark"
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

SCALE = os.environ.get("GRETA_HYPOTHESIS_SCALE", "")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    if not SCALE:
        return
    k = float(SCALE)
    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and getattr(test, "is_hypothesis_test", False):
            test._hypothesis_internal_use_settings = settings(own, max_examples=max(1, int(own.max_examples * k)))


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for every test that asks (Spark, CET, Kafka), few shuffle partitions."""
    from greta_stream.spark.session import get_session

    session = get_session("local[2]", app_name="greta-stream-tests", shuffle_partitions=2)
    yield session
    session.stop()
