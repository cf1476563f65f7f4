"""SparkSession for greta-stream: local or cluster, with the settings that matter.

Measured: shuffle partitions default to the number of cores (200 makes
every stateful micro-batch 10-70x slower here); Python workers must be this
interpreter (pyarrow lives in its environment); times are UTC. Spark's own
log is errors only ($GRETA_SPARK_LOG_LEVEL sets another level), through
`log4j2.properties` beside this module, so its start-up warnings stay out of
the command line's output. The driver JVM maps the archive of Spark's classes
when `greta-stream warm-up` built it (`greta_stream.spark.classes`): a start
about a quarter shorter.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from pyspark.sql import SparkSession

from greta_stream.choices import PACKAGES, Package
from greta_stream.errors import ConfigError
from greta_stream.jvm import archive_options, package_jars, rocksdb_library_dir

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# RocksDB, writing a changelog per micro-batch: what transformWithStateInPandas needs, and state that costs
# what changed. A checkpoint keeps the provider it was started with. The one place it is configured.
ROCKSDB_CONF = {"spark.sql.streaming.stateStore.providerClass": ROCKSDB,
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
PANDAS_WARNING = "ignore:PySpark does not yet fully support pandas:FutureWarning"


def get_session(
    master: str | None = None, *, app_name: str = "greta-stream", shuffle_partitions: int | None = None,
    conf: dict[str, str] | None = None, ui: bool = False, packages: Iterable[Package] = (), shards: int | None = None,
) -> SparkSession:
    """A SparkSession on `master` (default local[2]) tuned for the stateful operator.
    The Spark packages of the formats (`choices.PACKAGES`: Spark's Kafka
    connector, Delta Lake with its SQL extension and catalog) are on its
    classpath when they were fetched (`greta_stream.spark.connector`);
    `packages` (a run's: `choices.packages_of`), when not fetched: Spark
    resolves them now. `shards`: a run's state shards (`operator_partitions`)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # pyspark 4.2 warns in every Python worker that it does not fully support pandas 3; greta-stream's
    # tests run this very pair (docs/SPARK.md): the workers (which inherit this) need not say it
    os.environ.setdefault("PYTHONWARNINGS", PANDAS_WARNING)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ and not master  # under spark-submit: its --master wins
    master = master or os.environ.get("GRETA_SPARK_MASTER", "local[2]")
    level = log_level()
    cores = _cores(master)
    shuffle_partitions = operator_partitions(cores, shards, shuffle_partitions)
    builder = SparkSession.builder if submitted else SparkSession.builder.master(master)
    builder = (
        builder
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .config("spark.driver.extraJavaOptions", f"{_log_options(level)} {archive_options()}".strip())
    )
    for k, v in ROCKSDB_CONF.items():
        builder = builder.config(k, v)
    native = rocksdb_library_dir()
    if native is not None:
        builder = builder.config("spark.driver.extraLibraryPath", str(native))
    for k, v in _packages_conf(packages).items():
        builder = builder.config(k, v)
    # Delta rebuilds a table's state (for an idempotent write's transaction ids) in 50 tasks by default:
    # measured 11.4 s per micro-batch's append on local[2], against about 3 s with one task per core
    builder = builder.config("spark.databricks.delta.snapshotPartitions", str(shuffle_partitions))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    if not submitted:
        _quiet_gateway(dict(builder._options))  # type: ignore[attr-defined]  # the settings getOrCreate would pass
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(level)
    return spark


# What pyspark's driver-side worker for transformWithStateInPandas prints at each stream start (five
# lines naming the UDF and the state server: pyspark's own debugging output, on the JVM's stderr), and
# the JVM's note that Spark uses an incubating module, at each start
CHATTER = (b"Streaming TransformWithStateInPandas Python worker", b"WARNING: Using incubator modules:")


def _quiet_gateway(options: dict[str, str]) -> None:
    """Start Spark's JVM (as getOrCreate would, with `options`) with its stderr read through a
    filter that drops pyspark's worker chatter (`CHATTER`) and passes every other line on to this
    process's stderr as it comes. Nothing when a JVM already runs in this process."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    gateway = launch_gateway(SparkConf(loadDefaults=False).setAll(list(options.items())),
                             popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=_filter_stderr, args=(gateway.proc.stderr,), name="spark-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def jvm_gone(spark: SparkSession) -> str | None:
    """Why the JVM behind `spark` can run nothing more (it exited, or its SparkContext says it stopped), or
    None while it may. A JVM this process did not start (spark-submit's) is only asked about its context."""
    from pyspark import SparkContext
    proc = getattr(SparkContext._gateway, "proc", None)
    code = proc.poll() if proc is not None else None
    if code is not None:
        return f"Spark's JVM exited with code {code}"
    try:
        stopped = spark.sparkContext._jsc.sc().isStopped()  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - a call that failed while the process runs: not a verdict on it
        return None
    return "Spark's context stopped" if stopped else None


def forget_session() -> None:
    """Drop this process's handles on a JVM that is gone or broken (`jvm_gone`): it is killed if it still
    runs, and the next `get_session` starts a new one. Streams and DataFrames of the old one are dead."""
    from pyspark import SparkContext
    from pyspark.sql import SQLContext
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.poll() is None:
        proc.kill()
        with contextlib.suppress(Exception):
            proc.wait(timeout=30)
    with contextlib.suppress(Exception):
        gateway.shutdown()  # type: ignore[union-attr]  # its sockets and callback server
    with SparkContext._lock:
        SparkContext._active_spark_context = None
        SparkContext._gateway = None
        SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    SQLContext._instantiatedContext = None


def _filter_stderr(stream: IO[bytes]) -> None:
    dropped = False
    for line in iter(stream.readline, b""):
        if any(c in line for c in CHATTER) or (dropped and not line.strip()):  # its lines end in a blank line each
            dropped = True
            continue
        dropped = False
        with contextlib.suppress(OSError):  # this process's stderr closed: read on, or the JVM would block
            os.write(2, line)


def _packages_conf(packages: Iterable[Package]) -> dict[str, str]:
    """Settings for the formats' Spark packages: every fetched one's jars as local paths (nothing resolved
    at run time) with the settings it needs; `packages` not fetched, for Spark to resolve."""
    from greta_stream.spark import connector

    out: dict[str, str] = {}
    fetched = {p.name: package_jars(p) for p in PACKAGES}
    jars = [str(j) for p in PACKAGES for j in fetched[p.name]]
    if jars:
        out["spark.jars"] = ",".join(jars)
    for p in PACKAGES:
        if fetched[p.name]:
            out.update(p.conf)
    wanted = [r for p in packages if not fetched.get(p.name) and (r := connector.resolve(p)) is not None]
    if wanted:  # Spark resolves them itself, each into its own cache folder's Ivy home (the first one's)
        out.update(connector.package_conf(wanted[0]))
        out["spark.jars.packages"] = ",".join(r.coordinates for r in wanted)
        for r in wanted:
            out.update(r.package.conf)
    return out


def need_package(spark: SparkSession, fetched: bool, artifact: str, what: str, hint: str) -> None:
    """Fail clearly when a JVM package is neither fetched into the cache (`fetched`) nor given to the
    session (`artifact` in spark.jars or spark.jars.packages)."""
    given = f'{spark.conf.get("spark.jars", "")},{spark.conf.get("spark.jars.packages", "")}'
    if not fetched and artifact not in given:
        raise ConfigError(f"{what} is not on Spark's classpath: {hint}")


def log_level() -> str:
    """The level of Spark's JVM log: $GRETA_SPARK_LOG_LEVEL, default ERROR."""
    return os.environ.get("GRETA_SPARK_LOG_LEVEL", "ERROR").upper()


def _log_options(level: str) -> str:
    """Driver JVM options that configure log4j from the start (before Spark's default profile speaks)."""
    config = Path(__file__).with_name("log4j2.properties").resolve().as_uri()
    root = level if level in ("INFO", "DEBUG", "TRACE", "ALL") else "WARN"
    return f"-Dlog4j.configurationFile={config} -Dgreta.spark.log.level={level} -Dgreta.spark.root.level={root}"


def operator_partitions(cores: int, shards: int | None = None, asked: int | None = None) -> int:
    """Spark's shuffle partitions (the stateful operator's) for a new stream: `asked`, else one a core, or
    one a shard when the run has fewer `shards` than cores: every partition's task runs and commits its
    state store at each micro-batch, with events or not (measured at 1,000 events/s: one shard on one
    partition, 0.47-0.56 s a micro-batch; two on two, 0.71 s). A checkpoint keeps the partitions it began with."""
    return asked or (min(shards, cores) if shards else cores)


def _cores(master: str) -> int:
    if master.startswith("local["):
        inner = master[len("local["):-1]
        return os.cpu_count() or 2 if inner == "*" else int(inner.split(",")[0])
    return os.cpu_count() or 2
