"""`greta-stream run`: its flags, or a pipeline config with the flags that override it, into one
compiled pipeline (`pipeline_config`), run on Spark Structured Streaming.

The command is registered on the app by `greta_stream.cli`; `explain --config` reads a config file with
`pipeline_file` as `run` does.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from greta_stream.cli_args import (
    Mode,
    Operator,
    StreamEngine,
    TableFormat,
    Trends,
    existing_file,
    existing_folder,
    fail,
    is_file,
    lateness_flag,
)
from greta_stream.cli_evaluate import load_query
from greta_stream.errors import ConfigError, QueryError, SpoolFull

if TYPE_CHECKING:
    from greta_stream.pipeline import PipelineConfig


def run(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="pipeline config (YAML or TOML)")] = None,
    query: Annotated[list[str] | None, typer.Option("--query", "-q", help="query file or text (repeatable)")] = None,
    input: Annotated[str | None, typer.Option("--input", "-i", help="folder of event files (or a Delta table)")] = None,
    output: Annotated[str | None, typer.Option("--output", "-o", help="folder for result rows")] = None,
    input_format: Annotated[TableFormat, typer.Option(help="what --input holds: JSON lines files, Parquet files or "
                                                      "a Delta table")] = "jsonl",
    output_format: Annotated[TableFormat, typer.Option(help=(
        "how rows and dead letters are written: JSON lines files, Parquet files (OUTPUT, OUTPUT/dead_letters) or "
        "Delta tables (OUTPUT, OUTPUT_dead_letters)"))] = "jsonl",
    checkpoint: Annotated[str | None, typer.Option(help="checkpoint folder (restart resumes from it)")] = None,
    lateness: Annotated[float | None, typer.Option(help="allowed lateness in seconds (default 0)")] = None,
    watermark: Annotated[float | None, typer.Option(hidden=True, help="the old name of --lateness")] = None,
    once: Annotated[bool, typer.Option("--once", help="process what is there, emit passed windows, exit")] = False,
    flush_at_end: Annotated[bool, typer.Option("--flush-at-end", help=(
        "with --once: when the input is drained, emit every window still open, as if the watermark passed the "
        "end of time (the rows `evaluate` gives)"))] = False,
    dead_letter: Annotated[str | None, typer.Option(help=(
        "folder for dead letters (default OUTPUT/dead_letters; for Delta, OUTPUT_dead_letters)"))] = None,
    master: Annotated[str | None, typer.Option(help="Spark master URL (default local[2])")] = None,
    shards: Annotated[int | None, typer.Option(help="state shards (default 2 x cores)")] = None,
    operator: Annotated[Operator | None, typer.Option(help=(
        "the stateful operator of a new checkpoint (default transformWithStateInPandas: state written as it "
        "changes; applyInPandasWithState: state rewritten whole each micro-batch)"))] = None,
    max_files_per_trigger: Annotated[int | None, typer.Option(help="files per micro-batch")] = None,
    trigger_interval: Annotated[float | None, typer.Option(help="seconds between micro-batches")] = None,
    engine_name: Annotated[StreamEngine, typer.Option("--engine", help=(
        "auto: the columnar engine for the queries it covers, general: always the general engine"))] = "auto",
    mode: Annotated[Mode | None, typer.Option(
        help="aggregate (result rows) or cet (one row per trend); default cet for RETURN TRENDS")] = None,
    trends: Annotated[Trends | None, typer.Option(help="CET mode: complete (maximal trends) or all")] = None,
    max_trends: Annotated[int | None, typer.Option(
        help="CET mode: at most this many trends per window and group")] = None,
    with_events: Annotated[bool, typer.Option(help="CET mode: also write each trend's aliases and events")] = False,
    distribute_over: Annotated[int | None, typer.Option(help=(
        "CET mode: extract a window of one partition with more vertices by a distributed Spark job"))] = None,
    type_field: Annotated[str | None, typer.Option(help="name of the event type field (default type)")] = None,
    time_field: Annotated[str | None, typer.Option(help="name of the event time field (default time)")] = None,
    id_field: Annotated[str | None, typer.Option(help="name of the event id field (default id)")] = None,
    spark_logs: Annotated[bool, typer.Option("--spark-logs", help=(
        "show Spark's own warnings (default: its errors only; $GRETA_SPARK_LOG_LEVEL sets any level)"))] = False,
) -> None:
    """Run queries continuously on Spark Structured Streaming (the main job).

    Give a pipeline config (--config), or the queries and their input and output as flags; either way the
    same pipeline model is built (greta_stream.pipeline). With --config, the flags of the engine, the run
    (--once, --master, --shards, --trigger-interval) and the operator override the file; the file holds the
    source, the sinks, the checkpoint and the queries' own settings."""
    import logging
    import os

    from greta_stream.spark.flush import run_to_end
    from greta_stream.spark.pipeline import run as run_pipeline

    if spark_logs:
        os.environ["GRETA_SPARK_LOG_LEVEL"] = "WARN"
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # one line per Python callback otherwise
    # The flags as the document a config file gives (None: not given): the run's settings and one query
    # entry, the settings, sinks and dead letters of every query of its `text` (the --query values)
    flags = {"source": {"format": input_format, "path": input, "max_files_per_trigger": max_files_per_trigger},
             "checkpoint": checkpoint, "lateness_s": lateness_flag(lateness, watermark), "once": once,
             "trigger_interval_s": trigger_interval, "master": master, "shards": shards, "operator": operator,
             "fields": {"type": type_field, "time": time_field, "id": id_field},
             "queries": [{"trends": trends, "max_trends": max_trends, "with_events": with_events or None,
                          "distribute_over": distribute_over, "mode": mode, "engine": engine_name, "text": query,
                          "sinks": [{"format": output_format, "path": output}],
                          "dead_letter": {"format": output_format, "path": dead_letter}}]}
    try:
        cfg = pipeline_config(config, flags, given=_given_flags(ctx))
    except (ConfigError, QueryError) as exc:
        fail(str(exc))
    if flush_at_end and not cfg.once:
        fail("--flush-at-end needs a bounded run: add --once")
    started = time.monotonic()
    try:
        counts = (run_to_end if flush_at_end else run_pipeline)(cfg, echo=lambda line: typer.echo(line, err=True))
    except (ConfigError, SpoolFull) as exc:
        fail(str(exc))
    for name, c in counts.items():
        typer.echo(f"{name}: {c['rows']:,} rows, {c['dead_letters']:,} dead letters ({time.monotonic() - started:.1f} s)",
                   err=True)
        if c["dead_letters"]:
            typer.echo(f"{name}: {c['dead'].summary()}", err=True)
    suspects = {name: c.get("problem") for name, c in counts.items()}
    for name, suspect in suspects.items():
        if suspect:
            typer.echo(f"error: query {name}: {suspect}", err=True)
    failed = {name: c["failed"] for name, c in counts.items() if c.get("failed")}
    for name, reason in failed.items():
        typer.echo(f"error: query {name} failed (the others ran on): {reason}. Run again from the same checkpoint "
                   "to resume it: what its sinks could not take is delivered first", err=True)
    if failed or any(suspects.values()):
        raise typer.Exit(1)


# A query entry's keys of the flags that are no query setting: where the queries are and where their rows go
_PLACES = ("engine", "text", "sinks", "dead_letter")


# `run`'s flags that say where events come from and where rows go: a config file says it, so beside
# --config they are refused rather than left unread
_PLACE_FLAGS = ("query", "input", "input_format", "output", "output_format", "dead_letter", "checkpoint",
                "max_files_per_trigger")
# the run's own settings that a flag overrides in a config file
_RUN_FLAGS = ("master", "operator", "shards", "trigger_interval_s")


def _given_flags(ctx: typer.Context) -> frozenset[str]:
    """The parameters of `run` given on the command line (or by an environment variable), not defaulted."""
    sources = {name: ctx.get_parameter_source(name) for name in ctx.params}
    # by name: typer may carry its own copy of click, whose ParameterSource is not click's
    return frozenset(name for name, source in sources.items() if source is not None and source.name != "DEFAULT")


def pipeline_config(config: Path | None, flags: dict[str, Any], given: frozenset[str] = frozenset()) -> PipelineConfig:
    """The run's pipeline, compiled: a config file with the flags that override it, or the flags alone.
    `flags`: `run`'s flags as the document a config file gives (None: not given), its one query entry
    standing for every query of its `text` (files or texts); `given`: the parameters given on the command
    line (`_given_flags`), which beside a config file must be ones that override it."""
    from greta_stream.pipeline import PipelineConfig, StreamOptions
    from greta_stream.pipeline.validation import validated

    flags = _given(flags)
    each = _given(flags.pop("queries")[0])
    if config is not None:
        existing_file(config, "config")
        places = [f"--{k.replace('_', '-')}" for k in _PLACE_FLAGS if k in given]
        if places:
            fail(f"{', '.join(places)}: the config file holds the queries, the source, the sinks and the checkpoint; "
                 "set them there")
        own = [k for k in ("lateness_s",) if k in flags] + [k for k in each if k not in _PLACES]
        named = [f"--{k.removesuffix('_s').replace('_', '-')}" for k in own] + [f"--{k}-field" for k in flags["fields"]]
        if named:
            fail(f"{', '.join(named)}: the config file holds the queries' settings; set them there")
        cfg = pipeline_file(config, engine=None if each["engine"] == "auto" else each["engine"])
        run = {k: flags[k] for k in _RUN_FLAGS if flags.get(k) is not None}
        validated(StreamOptions, {k: v for k, v in run.items() if k in StreamOptions.model_fields}, "command line")
        return cfg.model_copy(update={"once": cfg.once or flags["once"], **run})
    texts, (sink,), fmt = each.pop("text", None), each.pop("sinks"), each["dead_letter"]["format"]
    if not (texts and flags["source"].get("path") and sink.get("path") and flags.get("checkpoint")):
        fail("give --config, or --query, --input, --output and --checkpoint")
    existing_folder(flags["source"]["path"], "input folder")
    queries = []
    for i, q in enumerate(texts):
        cq = load_query(q)
        name = Path(q).stem if is_file(q) else f"query{i + 1}"
        out = sink["path"] if len(texts) == 1 else str(Path(sink["path"]) / name)
        # a Delta table owns its folder (VACUUM removes what its log does not name): its dead letters go beside it
        dl = each["dead_letter"].get("path") or (f"{out.rstrip('/')}_dead_letters" if fmt == "delta"
                                                 else str(Path(out) / "dead_letters"))
        queries.append({**each, "name": name, "text": cq.text, "sinks": [{"format": fmt, "path": out}],
                        "dead_letter": {"format": fmt, "path": dl}})
    return PipelineConfig.from_dict({**flags, "queries": queries}, origin="command line")


def pipeline_file(path: Path, engine: str | None = None) -> PipelineConfig:
    """The compiled pipeline of a config file; its renamed settings as `warning:` lines, its errors
    as one `error:` (exit status 2)."""
    import warnings

    from greta_stream.pipeline import PipelineConfig

    try:
        with warnings.catch_warnings(record=True) as renamed:
            warnings.simplefilter("always")
            cfg = PipelineConfig.from_file(path, engine=engine)
    except (ConfigError, QueryError) as exc:
        fail(str(exc))
    for w in renamed:
        if issubclass(w.category, FutureWarning):
            typer.echo(f"warning: {w.message}", err=True)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return cfg


def _given(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` without the settings not given (None), so that the model's defaults apply."""
    return {k: _given(v) if isinstance(v, dict) else v for k, v in raw.items() if v is not None}
