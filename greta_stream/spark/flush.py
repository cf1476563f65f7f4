"""`greta-stream run --once --flush-at-end`: every window of a bounded input, emitted.

A stream emits a window when the watermark passes its end, so when a bounded
input is drained its last windows stay open in the checkpoint's state,
waiting for later events: fewer rows than `evaluate` gives over the same file,
which treats the end of the file as the end of time. To flush them:

1. each JSON-lines source is read through a glob that covers its folder and
   an empty folder of greta-stream's own, `<checkpoint>/flush/<source key>`;
2. the pipeline runs once (`availableNow`) over the input;
3. one event of a type no query uses (`FLUSH_TYPE`) at `FLUSH_TIME_S` is
   written to each flush folder and the pipeline runs once more from its
   checkpoint: the operator hands it to every shard, which then emits every
   window it holds.

An event of another type moves event time but is never evaluated; its time
is written in the kind the stream's times have (seconds or a timestamp) so
that no validator dead-letters it. The checkpoint's watermark then stands
past every window: later input to it would be late.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from greta_stream.connectors.jsonl import dumps
from greta_stream.engine import FieldNames
from greta_stream.engine.timebase import TIMESTAMP
from greta_stream.errors import ConfigError
from greta_stream.pipeline import PipelineConfig, SourceConfig, source_key, streams
from greta_stream.spark.pipeline import counts, drive, session_for
from greta_stream.spark.shard import end_of_input

_GLOB_CHARS = set("{}[]*?,\\")


def run_to_end(cfg: PipelineConfig, spark: SparkSession | None = None, echo: Any = print) -> dict[str, dict[str, Any]]:
    """Run a bounded pipeline (`once`), then flush every window still open;
    the rows and dead letters written, per query, over both runs."""
    if not cfg.once:
        raise ConfigError("--flush-at-end needs a bounded run: add --once (or once: true in the config)")
    staged, folders = flushable(cfg)
    spark = spark or session_for(cfg)
    labels = [s.label for s in streams(cfg)]  # as the user gave the sources, not their flush globs
    first, stopped = drive(spark, staged, echo, labels)
    if stopped:
        return counts(first)
    kinds = {source_key(s.source): set(w.time_kinds.values()) for s, (_, w) in zip(streams(staged), first, strict=True)}
    for key, folder in folders.items():
        write_flush(folder, staged.fields.type, staged.fields.time, kinds.get(key, set()))
    echo("input drained: flushing every open window")
    second, _ = drive(spark, staged, echo, labels)
    total = counts(first)
    for name, c in counts(second).items():
        before = total.setdefault(name, {})
        for k, v in c.items():
            if isinstance(v, int):
                before[k] = before.get(k, 0) + v
            elif k == "dead" and k in before:
                before[k].merge(v)
            elif k == "problem":  # the second run reads only the end of input
                before[k] = before.get(k) or v
            else:
                before[k] = v
    return total


def flushable(cfg: PipelineConfig) -> tuple[PipelineConfig, dict[str, Path]]:
    """`cfg` with each source read through its flush glob, and the flush folder
    of each rewritten source (by `source_key`)."""
    folders: dict[str, Path] = {}

    def rewrite(src: SourceConfig) -> SourceConfig:
        if src.format != "jsonl" or not src.path:
            raise ConfigError(f"--flush-at-end works with jsonl folders, not a {src.format} source")
        folder = Path(cfg.checkpoint).resolve() / "flush" / source_key(src)
        new = src.model_copy(update={"path": flush_glob(src.path, folder)})
        folders[source_key(new)] = folder
        return new

    cfg = cfg.compile()  # the copies keep each query's RunSpec
    queries = [q if q.source is None else q.model_copy(update={"source": rewrite(q.source)}) for q in cfg.queries]
    return cfg.model_copy(update={"source": rewrite(cfg.source), "queries": queries}), folders


def flush_glob(path: str, folder: Path) -> str:
    """A Hadoop glob matching the files of folder `path` and of `folder` (made here)."""
    if "://" in path:
        raise ConfigError(f"--flush-at-end reads local folders, not {path!r}")
    if _GLOB_CHARS & set(path + str(folder)):
        raise ConfigError(f"--flush-at-end: the paths may not hold any of {''.join(sorted(_GLOB_CHARS))}: {path!r}")
    folder.mkdir(parents=True, exist_ok=True)
    source = Path(path).resolve()
    common = os.path.commonpath([source, folder])
    # Hadoop expands {a,b} holding slashes, but not when a part starts with one
    return f"{common.rstrip('/')}/{{{os.path.relpath(source, common)},{os.path.relpath(folder, common)}}}"


def write_flush(folder: Path, type_field: str, time_field: str, time_kinds: set[str]) -> Path:
    """Write the flush event into `folder` (atomically: Spark may list it any time)."""
    event = end_of_input(FieldNames(type=type_field, time=time_field), TIMESTAMP in time_kinds)
    target = folder / f"flush-{time.time_ns()}.jsonl"
    temp = folder / f".{target.name}.tmp"
    temp.write_text(dumps(event) + "\n")
    temp.rename(target)
    return target
