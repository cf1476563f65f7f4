"""Where the JVM artifacts live.

`<cache>/spark-kafka/<spark version>/` holds Spark's Kafka connector and
`<cache>/spark-delta/<delta version>-spark<spark version>/` Delta Lake's
jars, as Spark's own resolver fetched them (`greta_stream.spark.connector`,
run by `make install`; their jars are handed to Spark as `spark.jars`),
`<cache>/kafka/` Apache Kafka for the local KRaft broker of the tests and
the demo (`scripts/setup_jvm.sh`, with Maven).
The cache is `$GRETA_JVM_CACHE` when set (the Docker image sets it), else a
checkout's `.cache/jvm/` when it is there, else the user's cache folder
`~/.cache/greta-stream/jvm` (`$XDG_CACHE_HOME/greta-stream/jvm`), where an
installed wheel looks. Imports nothing from the package, so any layer may
use it.
"""

from __future__ import annotations

import os
from pathlib import Path

SETUP_HINT = ("run `make setup-jvm` (scripts/setup_jvm.sh, with Maven) in a checkout to fetch them from Maven "
              "Central, or set GRETA_JVM_CACHE to a folder that holds them")
CONNECTOR_HINT = ("run `python -m greta_stream.spark.connector` (`make install` does) to have Spark fetch it, "
                  "or set GRETA_JVM_CACHE to a folder that holds it")
DELTA_HINT = ("install the delta extra (pip install 'greta-stream[delta]'; `make install` does), then run "
              "`python -m greta_stream.spark.connector` to have Spark fetch Delta Lake's jars")


CHECKOUT_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "jvm"  # where scripts/setup_jvm.sh puts them


def cache_dir() -> Path:
    """Where the jars are looked up (see the module docstring)."""
    env = os.environ.get("GRETA_JVM_CACHE")
    if env:
        return Path(env)
    if (CHECKOUT_CACHE.parents[1] / "pyproject.toml").is_file():  # running from a checkout (make install)
        return CHECKOUT_CACHE
    return user_cache_dir()


def user_cache_dir() -> Path:
    """The user's cache folder for the jars: $XDG_CACHE_HOME (default ~/.cache)/greta-stream/jvm."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "greta-stream" / "jvm"


def jars(profile: str) -> list[Path]:
    """The jars of one profile of jvm/pom.xml (`kafka`), sorted; [] when not fetched."""
    folder = cache_dir() / profile
    if not (folder / ".stamp").is_file():  # written last by setup_jvm.sh: the folder is complete
        return []
    return sorted(folder.glob("*.jar"))


def spark_kafka_dir(spark_version: str | None = None) -> Path:
    """Where Spark's Kafka connector for `spark_version` (default: the installed pyspark's) is kept."""
    return cache_dir() / "spark-kafka" / (spark_version or _version("pyspark"))


def spark_kafka_jars(spark_version: str | None = None) -> list[Path]:
    """The connector's jars as Spark's resolver retrieved them, sorted; [] when not fetched."""
    return _fetched(spark_kafka_dir(spark_version))


def delta_version() -> str | None:
    """The installed delta-spark's version (the `delta` extra), or None."""
    try:
        return _version("delta-spark")
    except Exception:  # noqa: BLE001 - PackageNotFoundError: not installed
        return None


def spark_delta_dir(spark_version: str | None = None) -> Path | None:
    """Where Delta Lake's jars for the installed delta-spark and `spark_version` are kept (None: no delta-spark)."""
    delta = delta_version()
    if delta is None:
        return None
    return cache_dir() / "spark-delta" / f"{delta}-spark{spark_version or _version('pyspark')}"


def spark_delta_jars(spark_version: str | None = None) -> list[Path]:
    """Delta Lake's jars as Spark's resolver retrieved them, sorted; [] when not fetched or not installed."""
    folder = spark_delta_dir(spark_version)
    return [] if folder is None else _fetched(folder)


def _fetched(folder: Path) -> list[Path]:
    if not (folder / ".stamp").is_file():  # written last by connector.fetch: the folder is complete
        return []
    return sorted((folder / "jars").glob("*.jar"))


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def kafka_classpath() -> str:
    """A java -cp value for the Kafka broker and its tools; raises when not fetched."""
    found = jars("kafka")
    if not found:
        raise FileNotFoundError(f"Apache Kafka jars are not in {cache_dir() / 'kafka'}: {SETUP_HINT}")
    return os.pathsep.join(str(j) for j in found)
