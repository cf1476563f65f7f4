"""The Spark side of the format registry (`greta_stream.spark.formats`): it fills in every format of
`choices.FORMATS` and nothing else, and a session asks for the Spark packages of a run's formats."""

from __future__ import annotations

from pathlib import Path

import pyspark
import pytest

from greta_stream.choices import DELTA, KAFKA
from greta_stream.jvm import installed_version, package_dir
from greta_stream.spark.formats import IMPLEMENTATIONS, Implementation, checked
from greta_stream.spark.session import _packages_conf


def test_the_registry_fills_in_every_format_and_nothing_else() -> None:
    without_kafka = {n: i for n, i in IMPLEMENTATIONS.items() if n != "kafka"}
    with pytest.raises(TypeError, match="format 'kafka' is not implemented"):
        checked(without_kafka)
    with pytest.raises(TypeError, match="format 'iceberg' is not declared in FORMATS"):
        checked({**IMPLEMENTATIONS, "iceberg": IMPLEMENTATIONS["delta"]})
    with pytest.raises(TypeError, match="format 'console': a reader for a source format"):
        checked({**IMPLEMENTATIONS, "console": Implementation(IMPLEMENTATIONS["jsonl"].reader, IMPLEMENTATIONS["console"].writer)})
    assert checked(dict(IMPLEMENTATIONS)) == IMPLEMENTATIONS


def test_a_session_asks_spark_for_the_packages_of_a_run_that_are_not_fetched(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRETA_JVM_CACHE", str(tmp_path))
    kafka = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    assert _packages_conf(()) == {}
    conf = _packages_conf((KAFKA,))
    assert conf["spark.jars.packages"] == kafka and "spark.jars" not in conf
    assert conf["spark.jars.ivy"] == str(tmp_path / "spark-kafka" / pyspark.__version__)
    delta_version = installed_version("delta-spark")
    if delta_version is None:  # the delta extra is not installed: Spark is not asked for Delta Lake
        assert _packages_conf((KAFKA, DELTA)) == conf
        return
    line = ".".join(pyspark.__version__.split(".")[:2])
    both = _packages_conf((KAFKA, DELTA))
    assert both["spark.jars.packages"] == f"{kafka},io.delta:delta-spark_{line}_2.13:{delta_version}"
    assert both["spark.jars.ivy"] == conf["spark.jars.ivy"]  # the first one's folder
    assert both["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    # Kafka's connector fetched: its jar is on the classpath, whatever the run's formats; Spark resolves Delta only
    folder = package_dir(KAFKA)
    assert folder is not None
    (folder / "jars").mkdir(parents=True)
    (folder / "jars" / "spark-sql-kafka.jar").write_bytes(b"")
    (folder / ".stamp").write_text(pyspark.__version__)
    assert _packages_conf(()) == {"spark.jars": str(folder / "jars" / "spark-sql-kafka.jar")}
    fetched = _packages_conf((KAFKA, DELTA))
    assert fetched["spark.jars"] == str(folder / "jars" / "spark-sql-kafka.jar")
    assert fetched["spark.jars.packages"] == f"io.delta:delta-spark_{line}_2.13:{delta_version}"
    assert fetched["spark.jars.ivy"] == str(package_dir(DELTA))


def test_a_run_with_fewer_shards_than_cores_gets_one_operator_partition_a_shard() -> None:
    from greta_stream.spark.session import operator_partitions

    assert operator_partitions(2) == 2 and operator_partitions(8, shards=16) == 8  # one a core
    assert operator_partitions(2, shards=1) == 1 and operator_partitions(8, shards=3) == 3  # no task without a shard
    assert operator_partitions(2, shards=1, asked=4) == 4  # a session asked for its own
