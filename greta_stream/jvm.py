"""Where the JVM artifacts fetched by `scripts/setup_jvm.sh` live.

`.cache/jvm/spark-kafka/` holds Spark's Kafka connector jars (handed to Spark
as `spark.jars`), `.cache/jvm/kafka/` Apache Kafka for the local KRaft broker.
`GRETA_JVM_CACHE` points elsewhere (the Docker image sets it). Imports nothing
from the package, so any layer may use it.
"""

from __future__ import annotations

import os
from pathlib import Path

SETUP_HINT = "run `make setup-jvm` (scripts/setup_jvm.sh) to fetch them from Maven Central"


def cache_dir() -> Path:
    env = os.environ.get("GRETA_JVM_CACHE")
    return Path(env) if env else Path(__file__).resolve().parents[1] / ".cache" / "jvm"


def jars(profile: str) -> list[Path]:
    """The jars of one profile of jvm/pom.xml (`spark-kafka` or `kafka`), sorted; [] when not fetched."""
    folder = cache_dir() / profile
    if not (folder / ".stamp").is_file():  # written last by setup_jvm.sh: the folder is complete
        return []
    return sorted(folder.glob("*.jar"))


def spark_kafka_jars() -> list[Path]:
    return jars("spark-kafka")


def kafka_classpath() -> str:
    """A java -cp value for the Kafka broker and its tools; raises when not fetched."""
    found = jars("kafka")
    if not found:
        raise FileNotFoundError(f"Apache Kafka jars are not in {cache_dir() / 'kafka'}: {SETUP_HINT}")
    return os.pathsep.join(str(j) for j in found)
