"""The archive of Spark's classes (class data sharing, `greta_stream.spark.classes`): `make install`'s
warm-up built it, and every Spark start of this suite is given it and maps it. A start on a class path
the archive does not fit runs without it and says nothing (with sharing required, as `build`'s check
step requires it, it fails). A build that fails says why and leaves no file behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from greta_stream.jvm import ARCHIVE_ENV, class_archive
from greta_stream.spark.classes import build

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("subprocesses")]

START = """
import json, os
from greta_stream.spark.session import get_session
spark = get_session(conf=json.loads(os.environ.get("GRETA_START_CONF", "{}")))
print(spark.range(10).count())
print(list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()))
"""


def _child(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, check=False)


def test_spark_starts_map_the_archive_warm_up_built(spark: object) -> None:
    archive = class_archive()
    assert archive is not None and archive.is_file(), "no class archive: run `greta-stream warm-up` (make install does)"
    given = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())  # type: ignore[attr-defined]
    assert f"-XX:SharedArchiveFile={archive}" in given
    # sharing required (-Xshare:on): a JVM that could not map the archive would not start
    done = _child("-m", "greta_stream.spark.classes", "check", str(archive))
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_start_on_another_class_path_runs_without_the_archive_and_says_nothing() -> None:
    archive = class_archive()
    assert archive is not None and archive.is_file()
    jar = next((Path(pyspark.__file__).parent / "jars").glob("py4j-*.jar"))  # put first: not the archive's path
    extra = {"GRETA_START_CONF": json.dumps({"spark.driver.extraClassPath": str(jar)})}
    started = _child("-c", START, env=extra)
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.splitlines()[0] == "10"
    assert f"-XX:SharedArchiveFile={archive}" in started.stdout
    assert "archive" not in started.stderr.lower() and "cds" not in started.stderr.lower(), started.stderr
    # what `build`'s check step requires (-Xshare:on) fails that start: the archive was not mapped
    required = _child("-c", START, env={**extra, "SPARK_SUBMIT_OPTS": "-Xshare:on"})
    said = required.stdout + required.stderr  # the JVM's own words on the stdout it shares with its Python
    assert required.returncode != 0 and "Unable to use shared archive" in said, said[-2000:]


def test_a_failed_build_says_why_and_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "classes" / "spark.jsa"
    monkeypatch.setenv(ARCHIVE_ENV, str(target))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))  # Spark's launcher finds no java
    said: list[str] = []
    assert build(echo=said.append) is None
    assert len(said) == 1 and said[0].startswith("warning: Spark's classes not archived: the dump step failed"), said
    assert list(target.parent.iterdir()) == []


def test_a_build_that_takes_too_long_is_given_up_and_leaves_no_file(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "spark.jsa"
    monkeypatch.setenv(ARCHIVE_ENV, str(target))
    said: list[str] = []
    assert build(echo=said.append, timeout_s=0.5) is None  # the dump step is still importing
    assert said == ["warning: Spark's classes not archived: the dump step took over 0.5 s"]
    assert list(tmp_path.iterdir()) == []


def test_off_builds_and_maps_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ARCHIVE_ENV, "off")
    said: list[str] = []
    assert class_archive() is None and build(echo=said.append) is None
    assert said == [f"Spark's classes not archived: no JDK (JAVA_HOME, java on the PATH), no pyspark, or {ARCHIVE_ENV}=off"]
