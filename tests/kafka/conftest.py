"""Kafka fixtures: one real KRaft broker on 127.0.0.1 for the session, a local[2] SparkSession.

The broker runs from the jars of `make setup-jvm` (scripts/setup_jvm.sh) in a
temporary folder; each test makes its own topics (`topics`), so tests share
the broker without seeing each other's messages.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from greta_stream.demo.broker import KafkaBroker
from greta_stream.jvm import CONNECTOR_HINT, SETUP_HINT, jars, spark_kafka_jars

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory, subprocesses: None) -> Iterator[KafkaBroker]:
    if not jars("kafka"):
        pytest.fail(f"Apache Kafka's jars are missing: {SETUP_HINT}")
    if not spark_kafka_jars():
        pytest.fail(f"Spark's Kafka connector is missing: {CONNECTOR_HINT}")
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def topics(kafka_broker: KafkaBroker) -> Callable[..., list[str]]:
    """make(names, partitions=1) -> unique topic names, created on the broker."""

    def make(*names: str, partitions: int = 1) -> list[str]:
        unique = [f"{n}-{uuid.uuid4().hex[:8]}" for n in names]
        kafka_broker.create_topics(unique, partitions=partitions)
        return unique

    return make


@pytest.fixture(scope="session")
def generators() -> Any:
    """benchmarks/generators.py: seeded stock, cluster and traffic streams."""
    spec = importlib.util.spec_from_file_location("greta_generators", ROOT / "benchmarks" / "generators.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
