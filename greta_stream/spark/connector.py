"""The Spark packages of the formats (`greta_stream.choices.PACKAGES`: Spark's Kafka connector,
Delta Lake), fetched the way Spark fetches packages.

`fetch` (run by `make install`, or `python -m greta_stream.spark.connector`)
starts a local Spark once per package with `spark.jars.packages` naming it
(`resolve`: its coordinates for the installed pyspark, and the installed
distribution it follows): Spark's own resolver (Ivy) downloads it and its
dependencies from Maven Central into `<jvm cache>/spark-<name>/`
(`greta_stream.jvm.package_dir`): `spark-kafka/` the Kafka connector of the
installed pyspark, `spark-delta/` the `delta-spark_<spark line>_2.13` of the
installed delta-spark, when the `delta` extra is installed. Jars that pyspark
already ships are left out: a second copy of Jackson or Hadoop on the
classpath would clash. Sessions then hand those jars to Spark as local paths
(`session.get_session`): nothing is resolved or downloaded when a pipeline
starts, and no Maven is needed. A session for a pipeline whose formats need a
package whose jars are not there names the package instead (`package_conf`),
and Spark resolves it itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyspark

from greta_stream.choices import PACKAGES, Package
from greta_stream.jvm import installed_version, package_dir

SCALA = "2.13"
# Already in pyspark's jars: another copy on the classpath would clash (lz4-java moved to
# at.yawk.lz4 in Spark 4.2; Hadoop's client is pyspark's own).
EXCLUDES = ("at.yawk.lz4:lz4-java", "org.lz4:lz4-java", "org.xerial.snappy:snappy-java",
            "com.github.luben:zstd-jni", "org.apache.hadoop:hadoop-client-runtime",
            "org.apache.hadoop:hadoop-client-api", "org.slf4j:slf4j-api", "com.google.code.findbugs:jsr305",
            f"org.scala-lang.modules:scala-parallel-collections_{SCALA}")


@dataclass(frozen=True)
class Resolved:
    """A package for one Spark version and the installed distribution it follows: the coordinates
    Spark resolves and the cache folder its jars are kept in."""

    package: Package
    coordinates: str
    folder: Path

    @property
    def name(self) -> str:
        return self.package.name


def resolve(pkg: Package, spark_version: str = pyspark.__version__) -> Resolved | None:
    """`pkg` for a Spark version (None: the distribution it follows, its format's extra, is not installed)."""
    version = spark_version if pkg.follows is None else installed_version(pkg.follows)
    folder = package_dir(pkg, spark_version)
    if version is None or folder is None:
        return None
    line = ".".join(spark_version.split(".")[:2])
    return Resolved(pkg, pkg.coordinates.format(scala=SCALA, spark=spark_version, spark_line=line, version=version),
                    folder)


def package_conf(pkg: Resolved, folder: Path | None = None) -> dict[str, str]:
    """Spark settings that make Spark resolve `pkg` itself, into `folder` (Ivy's home; default: its cache folder)."""
    return {"spark.jars.packages": pkg.coordinates, "spark.jars.excludes": ",".join(EXCLUDES),
            "spark.jars.ivy": str(folder or pkg.folder), **pkg.package.conf}


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


def fetch(pkg: Resolved, echo: object = print) -> Path:
    """Have Spark resolve `pkg` into the cache, once per version; its folder."""
    dest = pkg.folder
    if (dest / ".stamp").is_file():
        return dest
    temp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(temp, ignore_errors=True)
    echo(f"fetching {pkg.coordinates} into {dest}")  # type: ignore[operator]
    conf = package_conf(pkg, temp)
    done = subprocess.run([sys.executable, "-c", _PROBE, pkg.package.data_source, *[f"{k}={v}" for k, v in conf.items()]],
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


def installed() -> list[Resolved]:
    """The packages the installed extras use: Kafka's connector always, Delta Lake with the delta extra."""
    return [r for p in PACKAGES if (r := resolve(p)) is not None]


if __name__ == "__main__":
    failed = []
    for pkg in installed():
        try:
            print(f"{pkg.name}: {fetch(pkg)}")
        except RuntimeError as exc:
            failed.append(str(exc))
    if failed:
        sys.exit("\n".join(failed))
