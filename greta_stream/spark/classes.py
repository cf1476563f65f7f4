"""Build the archive of Spark's classes that a driver JVM maps at its start (class data sharing).

A JVM reads, parses and verifies every class it loads from its jars, and Spark's driver loads many
thousands before its first micro-batch. A JVM given an archive of them (`-XX:SharedArchiveFile`,
`greta_stream.jvm.archive_options`, which `get_session` adds) maps them instead. Measured on an
idle 2-core machine, `greta-stream run --once --flush-at-end` over the bundled stock sample:
34.4 s -> 25.9 s, and 57 s -> 44 s of CPU, with the JVM's default compilers.

`build` (run by `greta-stream warm-up`) runs a small stream in a child process whose JVM writes the
classes it loaded when it exits (`-XX:ArchiveClassesAtExit`), then starts Spark once more on the new
file with sharing required (`-Xshare:on`: a file the JVM cannot map fails that start), and only then
moves it to `class_archive()`: a half-written archive would crash the JVM that maps it.

    python -m greta_stream.spark.classes dump|check FILE    # the two child steps
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from greta_stream.connectors.jsonl import dumps
from greta_stream.jvm import ARCHIVE_ENV, QUIET_CDS, class_archive, java_option

# The work whose classes are archived: what a run loads (the file source, the stateful operator with its
# Python worker and RocksDB state, the sink, the flush at the end of the input)
QUERY = ("RETURN company, COUNT(*), AVG(S.price) PATTERN Stock S+ WHERE [company] AND S.price > NEXT(S).price "
         "GROUP-BY company WITHIN 20 seconds SLIDE 5 seconds")


def build(echo: Callable[[str], None] = print, timeout_s: float = 900) -> Path | None:
    """Build `class_archive()` unless it is there; its path, or None (said through `echo`) when there is no
    JDK, archives are off, or a step failed (a run then starts without one, as before)."""
    path = class_archive()
    if path is None:
        echo(f"Spark's classes not archived: no JDK (JAVA_HOME, java on the PATH), no pyspark, or {ARCHIVE_ENV}=off")
        return None
    if path.is_file():
        echo(f"Spark's classes: archive kept ({path})")
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    started = time.monotonic()
    try:
        for step in ("dump", "check"):
            try:
                done = subprocess.run([sys.executable, "-m", __name__, step, str(part)], capture_output=True,
                                      text=True, timeout=timeout_s, check=False)
            except subprocess.TimeoutExpired:
                echo(f"warning: Spark's classes not archived: the {step} step took over {timeout_s:g} s")
                return None
            if done.returncode != 0 or not part.is_file():
                said = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
                echo(f"warning: Spark's classes not archived: the {step} step failed (exit {done.returncode}): {said}")
                return None
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    if ARCHIVE_ENV not in os.environ:  # the cache's own folder: the archives of another pyspark or JDK go
        for old in path.parent.glob("spark-*.jsa"):
            if old != path:
                old.unlink(missing_ok=True)
    echo(f"Spark's classes archived in {time.monotonic() - started:.1f} s: {path} "
         f"({path.stat().st_size / 2**20:.0f} MB); each Spark start maps them")
    return path


def _dump(part: Path) -> int:
    """Run the work of `QUERY` with a JVM that writes the classes it loaded to `part` when it exits."""
    from greta_stream.pipeline import PipelineConfig
    from greta_stream.spark.flush import run_to_end

    os.environ[ARCHIVE_ENV] = "off"  # not mapping one: writing one
    _submit_options(java_option("-XX:ArchiveClassesAtExit=", part), QUIET_CDS)
    with tempfile.TemporaryDirectory(prefix="greta-classes-") as tmp:
        root = Path(tmp)
        (root / "in").mkdir()
        rnd = random.Random(7)
        prices = {c: 100.0 for c in ("ACME", "GLOBEX", "INITECH")}
        events = []
        for i in range(600):
            company = rnd.choice(sorted(prices))
            prices[company] = round(prices[company] + rnd.gauss(0, 1), 2)
            events.append({"type": "Stock", "time": i / 2, "company": company, "price": prices[company]})
        events.append({"type": "Stock", "time": 1.5, "company": "ACME"})  # a dead letter: no price
        (root / "in" / "events.jsonl").write_text("".join(dumps(e) + "\n" for e in events))
        cfg = PipelineConfig.from_dict({
            "source": {"format": "jsonl", "path": str(root / "in")}, "checkpoint": str(root / "checkpoint"),
            "once": True, "queries": [{"name": "classes", "text": QUERY,
                                       "sinks": [{"format": "jsonl", "path": str(root / "out")}],
                                       "dead_letter": {"format": "jsonl", "path": str(root / "dead")}}]},
            origin="class archive")
        counts = run_to_end(cfg, echo=lambda line: None)
        if not counts["classes"]["rows"]:
            print("the archive's stream wrote no row", file=sys.stderr)
            return 1
    return _exit_jvm()


def _check(part: Path) -> int:
    """Start Spark with `part` mapped, sharing required, and run a job on it."""
    from greta_stream.spark.session import get_session

    os.environ[ARCHIVE_ENV] = str(part)
    _submit_options("-Xshare:on")
    spark = get_session()
    if spark.range(1000).selectExpr("sum(id) AS s").collect()[0]["s"] != 499500:
        return 1
    return _exit_jvm()


def _submit_options(*options: str) -> None:
    """Add `options` to the JVM options that Spark's launcher gives the driver (SPARK_SUBMIT_OPTS)."""
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join([os.environ.get("SPARK_SUBMIT_OPTS", ""), *options]).strip()


def _exit_jvm() -> int:
    """Stop Spark and wait for its JVM to exit as it does when its Python process ends (its stdin closes),
    so that it writes its archive first; its exit status."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    proc = SparkContext._gateway.proc  # type: ignore[union-attr]
    proc.stdin.close()
    return int(proc.wait(timeout=600))


if __name__ == "__main__":
    step, where = sys.argv[1], Path(sys.argv[2])
    sys.exit({"dump": _dump, "check": _check}[step](where))
