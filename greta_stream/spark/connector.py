"""Spark's Kafka connector and Delta Lake's jars, fetched the way Spark fetches packages.

`fetch()` (run by `make install`, or `python -m greta_stream.spark.connector`)
starts a local Spark once per package with `spark.jars.packages` naming it:
Spark's own resolver (Ivy) downloads it and its dependencies from Maven
Central into `<jvm cache>/spark-kafka/` (the Kafka connector of the
installed pyspark) and `<jvm cache>/spark-delta/` (the `delta-spark_<spark
line>_2.13` of the installed delta-spark, when the `delta` extra is
installed). Jars that pyspark already ships are left out: a second copy of
Jackson or Hadoop on the classpath would clash. Sessions then hand those jars
to Spark as local paths (`session.get_session`): nothing is resolved or
downloaded when a pipeline starts, and no Maven is needed. A session for a
pipeline that reads or writes Kafka or Delta without the jars there names the
package instead (`package_conf`), and Spark resolves it itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from greta_stream.jvm import delta_version, spark_delta_dir, spark_kafka_dir

SCALA = "2.13"
# Already in pyspark's jars: another copy on the classpath would clash (lz4-java moved to
# at.yawk.lz4 in Spark 4.2; Hadoop's client is pyspark's own).
EXCLUDES = ("at.yawk.lz4:lz4-java", "org.lz4:lz4-java", "org.xerial.snappy:snappy-java",
            "com.github.luben:zstd-jni", "org.apache.hadoop:hadoop-client-runtime",
            "org.apache.hadoop:hadoop-client-api", "org.slf4j:slf4j-api", "com.google.code.findbugs:jsr305",
            f"org.scala-lang.modules:scala-parallel-collections_{SCALA}")
# What a Delta session needs besides the jars: Delta's SQL commands and its catalog (Delta's own setup)
DELTA_CONF = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
              "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}


@dataclass(frozen=True)
class Package:
    """A Spark package greta-stream uses: its Maven coordinates, its cache folder, the data source it adds."""

    name: str  # kafka | delta
    coordinates: str
    folder: Path
    data_source: str  # spark.read.format(...) that proves it is on the classpath
    conf: dict[str, str] = field(default_factory=dict)  # session settings it needs


def kafka(spark_version: str = pyspark.__version__) -> Package:
    """Spark's Kafka connector for a Spark version."""
    return Package("kafka", f"org.apache.spark:spark-sql-kafka-0-10_{SCALA}:{spark_version}",
                   spark_kafka_dir(spark_version), "kafka")


def delta(spark_version: str = pyspark.__version__) -> Package | None:
    """Delta Lake for the installed delta-spark and a Spark version (None: the delta extra is not installed)."""
    version, folder = delta_version(), spark_delta_dir(spark_version)
    if version is None or folder is None:
        return None
    line = ".".join(spark_version.split(".")[:2])  # delta-spark_4.2_2.13: built per Spark line
    return Package("delta", f"io.delta:delta-spark_{line}_{SCALA}:{version}", folder, "delta", DELTA_CONF)


def package(spark_version: str = pyspark.__version__) -> str:
    """The Kafka connector's Maven coordinates for a Spark version."""
    return kafka(spark_version).coordinates


def package_conf(pkg: Package | None = None, folder: Path | None = None) -> dict[str, str]:
    """Spark settings that make Spark resolve `pkg` (default: the Kafka connector) itself, into `folder` (Ivy's home)."""
    pkg = pkg or kafka()
    return {"spark.jars.packages": pkg.coordinates, "spark.jars.excludes": ",".join(EXCLUDES),
            "spark.jars.ivy": str(folder or pkg.folder), **pkg.conf}


_PROBE = """
import sys
from pyspark.sql import SparkSession
fmt, *args = sys.argv[1:]
conf = dict(arg.split("=", 1) for arg in args)
builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
for k, v in conf.items():
    builder = builder.config(k, v)
spark = builder.getOrCreate()
spark.read.format(fmt)  # the package's data source is on the classpath
spark.stop()
"""


def fetch(pkg: Package | None = None, echo: object = print) -> Path:
    """Have Spark resolve `pkg` (default: the Kafka connector) into the cache, once per version; its folder."""
    pkg = pkg or kafka()
    dest = pkg.folder
    if (dest / ".stamp").is_file():
        return dest
    temp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(temp, ignore_errors=True)
    echo(f"fetching {pkg.coordinates} into {dest}")  # type: ignore[operator]
    conf = package_conf(pkg, temp)
    done = subprocess.run([sys.executable, "-c", _PROBE, pkg.data_source, *[f"{k}={v}" for k, v in conf.items()]],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or not list((temp / "jars").glob("*.jar")):
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"Spark could not fetch {pkg.coordinates} (is Maven Central reachable?):\n{tail}")
    ships = shipped()
    for jar in (temp / "jars").glob("*.jar"):
        if artifact(jar.name.split("_", 1)[-1]) in ships:  # Ivy names them group_artifact-version.jar
            jar.unlink()
    (temp / ".stamp").write_text(pyspark.__version__ + "\n")  # written last: the folder is complete
    shutil.rmtree(dest, ignore_errors=True)
    temp.rename(dest)
    return dest


def artifact(jar_name: str) -> str:
    """A jar's artifact name without its version: `parquet-hadoop-1.16.0.jar` -> `parquet-hadoop`."""
    return re.sub(r"-\d.*$", "", jar_name.removesuffix(".jar"))


def shipped() -> set[str]:
    """The artifacts whose jars pyspark ships."""
    return {artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}


def installed() -> list[Package]:
    """The packages the installed extras use: Kafka's connector always, Delta Lake with the delta extra."""
    return [p for p in (kafka(), delta()) if p is not None]


if __name__ == "__main__":
    failed = []
    for pkg in installed():
        try:
            print(f"{pkg.name}: {fetch(pkg)}")
        except RuntimeError as exc:
            failed.append(str(exc))
    if failed:
        sys.exit("\n".join(failed))
