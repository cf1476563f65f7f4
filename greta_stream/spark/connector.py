"""Spark's Kafka connector, fetched the way Spark fetches packages.

`fetch()` (run by `make install`, or `python -m greta_stream.spark.connector`)
starts a local Spark once with `spark.jars.packages` naming the connector of
the installed pyspark: Spark's own resolver (Ivy) downloads it and its
dependencies from Maven Central into `<jvm cache>/spark-kafka/`, leaving out
what pyspark already ships. Sessions then hand those jars to Spark as local
paths (`greta_stream.jvm.spark_kafka_jars`): nothing is resolved or
downloaded when a pipeline starts, and no Maven is needed. A session for a
pipeline that reads or writes Kafka without the jars there names the package
instead (`package_conf`), and Spark resolves it itself.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyspark

from greta_stream.jvm import spark_kafka_dir, spark_kafka_jars

SCALA = "2.13"
# Already in pyspark's jars: another copy on the classpath would clash (lz4-java moved to
# at.yawk.lz4 in Spark 4.2; Hadoop's client is pyspark's own).
EXCLUDES = ("at.yawk.lz4:lz4-java", "org.lz4:lz4-java", "org.xerial.snappy:snappy-java",
            "com.github.luben:zstd-jni", "org.apache.hadoop:hadoop-client-runtime",
            "org.apache.hadoop:hadoop-client-api", "org.slf4j:slf4j-api", "com.google.code.findbugs:jsr305",
            f"org.scala-lang.modules:scala-parallel-collections_{SCALA}")


def package(spark_version: str = pyspark.__version__) -> str:
    """The connector's Maven coordinates for a Spark version."""
    return f"org.apache.spark:spark-sql-kafka-0-10_{SCALA}:{spark_version}"


def package_conf(folder: Path | None = None) -> dict[str, str]:
    """Spark settings that make Spark resolve the connector itself, into `folder` (Ivy's home)."""
    return {"spark.jars.packages": package(), "spark.jars.excludes": ",".join(EXCLUDES),
            "spark.jars.ivy": str(folder or spark_kafka_dir())}


_PROBE = """
import sys
from pyspark.sql import SparkSession
conf = dict(arg.split("=", 1) for arg in sys.argv[1:])
builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
for k, v in conf.items():
    builder = builder.config(k, v)
spark = builder.getOrCreate()
spark.read.format("kafka")  # the connector's data source is on the classpath
spark.stop()
"""


def fetch(echo: object = print) -> Path:
    """Have Spark resolve the connector into the cache (once per pyspark version); its folder."""
    dest = spark_kafka_dir()
    if spark_kafka_jars():
        return dest
    temp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(temp, ignore_errors=True)
    echo(f"fetching Spark's Kafka connector ({package()}) into {dest}")  # type: ignore[operator]
    conf = package_conf(temp)
    done = subprocess.run([sys.executable, "-c", _PROBE, *[f"{k}={v}" for k, v in conf.items()]],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or not list((temp / "jars").glob("*.jar")):
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"Spark could not fetch {package()} (is Maven Central reachable?):\n{tail}")
    (temp / ".stamp").write_text(pyspark.__version__ + "\n")  # written last: the folder is complete
    shutil.rmtree(dest, ignore_errors=True)
    temp.rename(dest)
    return dest


if __name__ == "__main__":
    try:
        print(f"Spark's Kafka connector: {fetch()}")
    except RuntimeError as exc:
        sys.exit(str(exc))
