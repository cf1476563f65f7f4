"""The format registry below Spark (`greta_stream.choices.FORMATS`): the table options a sink of a
format takes, and the Spark packages a run needs, are read from each format's entry."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from greta_stream.choices import DELTA, FORMATS, KAFKA, PACKAGES, packages_of, table_options_refused
from greta_stream.errors import ConfigError
from greta_stream.pipeline import PipelineConfig
from greta_stream.pipeline.model import packages

Q = "RETURN COUNT(*) PATTERN Stock S+ WITHIN 10 s SLIDE 5 s"


def pipeline(source: dict[str, Any], *sinks: dict[str, Any], dead: dict[str, Any] | None = None) -> PipelineConfig:
    query = {"name": "q", "text": Q, "sinks": list(sinks), **({"dead_letter": dead} if dead else {})}
    return PipelineConfig.from_dict({"source": source, "checkpoint": "c", "queries": [query]})


def test_a_table_option_is_refused_naming_the_format_and_the_options_it_takes() -> None:
    with pytest.raises(ConfigError, match="partition_by, merge_schema apply to delta sinks only: "
                                          "parquet sinks take no table options"):
        pipeline({"path": "in"}, {"format": "parquet", "path": "x", "partition_by": ["g"], "merge_schema": True})
    assert pipeline({"path": "in"}, {"format": "delta", "table": "t", "partition_by": ["g"], "counts": "text"})


def test_a_format_that_takes_some_table_options_refuses_the_others() -> None:
    """A table format that takes fewer table options than Delta: what it takes passes, the rest is refused
    with the formats that take it."""
    formats = {**FORMATS, "iceberg": replace(FORMATS["delta"], name="iceberg",
                                             table_options=frozenset({"table", "partition_by"}))}
    assert table_options_refused("iceberg", ["table", "partition_by"], formats) == ""
    assert table_options_refused("iceberg", ["partition_by", "merge_schema"], formats) == (
        "merge_schema apply to delta sinks only: iceberg sinks take partition_by, table")
    assert table_options_refused("jsonl", ["table"], formats) == (
        "table apply to delta and iceberg sinks only: jsonl sinks take no table options")


def test_the_packages_of_a_run_are_the_union_of_its_formats() -> None:
    assert packages_of(["jsonl", "parquet", "console"]) == ()
    assert packages_of(["delta", "jsonl", "delta"]) == (DELTA,)
    assert packages_of(["delta", "kafka"]) == packages_of(["kafka", "delta"]) == (KAFKA, DELTA)  # PACKAGES' order
    assert packages(pipeline({"path": "in"}, {"format": "jsonl", "path": "out"})) == ()
    kafka_in = {"format": "kafka", "topic": "events"}
    assert packages(pipeline(kafka_in, {"format": "jsonl", "path": "out"})) == (KAFKA,)
    assert packages(pipeline(kafka_in, {"format": "jsonl", "path": "out"}, dead={"format": "delta", "path": "d"})) == (
        KAFKA, DELTA)


def test_every_package_of_a_format_is_put_on_the_classpath() -> None:
    """A session puts the fetched jars of `PACKAGES` on the classpath: a format's package must be one of them."""
    assert {f.package for f in FORMATS.values() if f.package is not None} == set(PACKAGES)
