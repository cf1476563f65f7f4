"""The `greta-stream` command line: evaluate, explain (run and serve come with Spark).

Thin: parses options, calls the library, prints JSON lines. Query errors are
printed with their position and exit with status 2.
"""

from __future__ import annotations

import io
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from greta_stream import logs
from greta_stream.cli_args import (
    Engine,
    LogLevel,
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
from greta_stream.cli_args import query_text as _query_text
from greta_stream.client_cli import app as queries_app
from greta_stream.compiler import check_limits
from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.connectors.jsonl import dumps_payload, read_events
from greta_stream.engine import DeadLetter, FieldNames
from greta_stream.errors import ConfigError, QueryError, SpoolFull
from greta_stream.runtime import RunSpec, evaluate_spec, runs_on
from greta_stream.runtime.dead_letters import DeadLetters, name_problems
from greta_stream.runtime.spec import compile_once

if TYPE_CHECKING:
    from greta_stream.pipeline import PipelineConfig

app = typer.Typer(help="Real-time event trend aggregation (GRETA).", no_args_is_help=True, add_completion=False)
app.add_typer(queries_app, name="queries")


def _version(show: bool) -> None:
    if show:
        from greta_stream import __version__

        typer.echo(f"greta-stream {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="print the version and exit")] = False) -> None:
    """Real-time event trend aggregation (GRETA)."""

QueryOpt = Annotated[str, typer.Option("--query", "-q", help="query file, or the query text itself")]


def _load_query(query: str) -> CompiledQuery:
    text = _query_text(query)
    try:
        return check_limits(compile_once(text))
    except QueryError as exc:
        typer.echo(f"error: invalid query\n{exc}", err=True)
        raise typer.Exit(2) from None


@app.command()
def explain(
    query: Annotated[str | None, typer.Option("--query", "-q", help="query file, or the query text itself")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help=(
        "pipeline config: the shared plan of its queries, per source"))] = None,
) -> None:
    """Print the compiled query (templates, transitions, predicates, partitions, panes), or a pipeline's shared plan."""
    if (query is None) == (config is None):
        fail("give --query or --config")
    if config is not None:
        existing_file(config, "config")
    if query is not None:
        cq = _load_query(query)
        typer.echo(cq.explain())
        spec = RunSpec.create(cq)
        typer.echo(runs_on(spec))
        return
    from greta_stream.pipeline import default_shards, streams

    cfg = _pipeline_file(config)  # type: ignore[arg-type]
    from greta_stream.runtime.planner import plan_units

    shards = cfg.shards or default_shards()
    for stream in streams(cfg):
        typer.echo(f"stream {stream.name} ({stream.source.format} {stream.source.path or stream.source.topic}):")
        queries = stream.query_set()
        typer.echo("  " + plan_units(queries).explain().replace("\n", "\n  "))
        keyed = [f"{name} by {', '.join(spec.query.group_by)}" for name, spec in queries if spec.query.group_by]
        alone = [name for name, spec in queries if not spec.query.group_by]
        if keyed:
            typer.echo(f"  shards: {shards} per GROUP-BY ({'; '.join(keyed)})")
        if alone:
            typer.echo(f"  one shard (no GROUP-BY): {', '.join(alone)}")


@app.command()
def evaluate(
    query: QueryOpt,
    events: Annotated[Path, typer.Option("--events", "-e", help="JSON lines file of events ('-' for stdin)")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write rows here instead of stdout")] = None,
    dead_letter: Annotated[Path | None, typer.Option(help="write skipped events with reasons here")] = None,
    type_field: Annotated[str, typer.Option(help="name of the event type field")] = "type",
    time_field: Annotated[str, typer.Option(help="name of the event time field")] = "time",
    id_field: Annotated[str, typer.Option(help="name of the event id field")] = "id",
    progress: Annotated[bool, typer.Option(help="report progress on stderr")] = True,
    mode: Annotated[Mode | None, typer.Option(
        help="aggregate (result rows) or cet (one row per trend); default cet for RETURN TRENDS")] = None,
    trends: Annotated[Trends, typer.Option(help="CET mode: complete (maximal trends) or all")] = "complete",
    max_trends: Annotated[int | None, typer.Option(
        help="CET mode: at most this many trends per window and group")] = None,
    with_events: Annotated[bool, typer.Option(help="CET mode: also print each trend's aliases and events")] = False,
    engine_name: Annotated[Engine, typer.Option("--engine", help=(
        "aggregate mode: auto (columnar where the query allows, else general), columnar or general"))] = "auto",
) -> None:
    """Aggregate trends over a file of events, or list them (--mode cet); print one JSON object per row."""
    existing_file(events, "events file")
    cq = _load_query(query)
    spec = _run_spec(cq, mode=mode, engine=engine_name,
                     fields=FieldNames(type_field, time_field, id_field), trends=trends, max_trends=max_trends,
                     with_events=with_events)
    out = open(output, "w", encoding="utf-8") if output else sys.stdout  # noqa: SIM115
    dl_out = open(dead_letter, "w", encoding="utf-8") if dead_letter else None  # noqa: SIM115
    dead = DeadLetters()

    def on_dead(dl: DeadLetter) -> None:
        dead.add(dl)
        if dl_out:
            dl_out.write(dumps_payload(dl.to_dict()) + "\n")

    try:
        if spec.runner_kind == "columnar":
            typed, others = _evaluate_at_once(spec, events, out, on_dead, progress)
        else:
            typed, others = _evaluate_streamed(spec, events, out, on_dead, progress)
        if dead.total:
            typer.echo(dead.summary(), err=True)
        problems = name_problems(spec.query, typed, others, dead.carried)
        for problem in problems:
            typer.echo(f"error: {problem}", err=True)
        if problems:
            raise typer.Exit(1)
    finally:
        if output:
            out.close()
        if dl_out:
            dl_out.close()


def _run_spec(cq: CompiledQuery, **options: Any) -> RunSpec:
    """The run's spec, or a one-line error and exit status 2."""
    try:
        return RunSpec.create(cq, **options)
    except ConfigError as exc:
        fail(str(exc))


def _read(spec: RunSpec, events: Path, on_dead: Any, progress: bool) -> Any:
    """The records of a JSON lines file (or stdin), unreadable lines to `on_dead`; progress on stderr.
    As on Spark, an object that gives its time or a GROUP-BY attribute twice is unreadable."""
    started = last = time.monotonic()
    source = (io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape")
              if str(events) == "-" else events)
    unique = (spec.fields.time, *spec.query.group_by)
    for n, rec in enumerate(read_events(source, unique), 1):
        if isinstance(rec, DeadLetter):
            on_dead(rec)
        else:
            yield rec
        if progress and time.monotonic() - last > 2:
            last = time.monotonic()
            typer.echo(f"read {n:,} events ({n / (last - started):,.0f}/s)", err=True)


def _evaluate_streamed(spec: RunSpec, events: Path, out: Any, on_dead: Any,
                       progress: bool) -> tuple[dict[str, int], dict[str, int]]:
    """Add records to the run's runner as they are read, then finish (general engine, CET); the events
    of the query's types and those of other types, by type."""
    started = time.monotonic()
    read_dead = [0]

    def unreadable(dl: DeadLetter) -> None:
        read_dead[0] += 1
        on_dead(dl)

    runner = spec.build(dead_letter=on_dead)
    runner.add_many(_read(spec, events, unreadable, progress))
    rows = runner.finish()
    for row in rows:
        out.write(dumps_payload(row) + "\n")
    if progress:
        m = runner.metrics
        engine, why = spec.engine_ran(runner)
        typer.echo(
            f"done: {m.get('events_in', 0) + read_dead[0]:,} events, {len(rows):,} rows, "
            f"{m.get('events_dead_lettered', 0) + read_dead[0]:,} dead-lettered, {engine} engine"
            f"{f' ({why})' if why else ''}, {time.monotonic() - started:.2f} s",
            err=True,
        )
    return runner.typed, runner.other_types


def _evaluate_at_once(spec: RunSpec, events: Path, out: Any, on_dead: Any,
                      progress: bool) -> tuple[dict[str, int], dict[str, int]]:
    """Read every record, then evaluate them at once (columnar engine; the general one if the input needs it);
    the events of the query's types and those of other types, by type."""
    started = time.monotonic()
    read_dead: list[DeadLetter] = []

    def unreadable(dl: DeadLetter) -> None:
        read_dead.append(dl)
        on_dead(dl)

    records = list(_read(spec, events, unreadable, progress))
    if progress:
        typer.echo(f"read {len(records) + len(read_dead):,} events; evaluating", err=True)
    try:
        rows = evaluate_spec(spec, records)
    except ValueError as exc:
        fail(str(exc))
    for dl in rows.dead_letters:
        on_dead(dl)
    for row in rows:
        out.write(dumps_payload(row) + "\n")
    if progress:
        typer.echo(
            f"done: {len(records) + len(read_dead):,} events, {len(rows):,} rows, "
            f"{len(read_dead) + len(rows.dead_letters):,} dead-lettered, {rows.engine} engine"
            f"{f' ({rows.engine_reason})' if rows.engine_reason else ''}, "
            f"{time.monotonic() - started:.2f} s",
            err=True,
        )
    return rows.typed, rows.other_types


@app.command("warm-up")
def warm_up() -> None:
    """Compile every numba kernel (columnar engine, incremental stream, CET) into numba's on-disk cache now
    (install time, an image build), so that no run compiles them: a process then loads them in about a second."""
    import os

    from greta_stream.cet.warm import compile_kernels as compile_cet
    from greta_stream.engine.columnar.warm import compile_all

    started = time.monotonic()
    where = compile_all()
    compile_cet()
    cache = os.environ.get("NUMBA_CACHE_DIR") or f"__pycache__ beside each kernel module under {where.parents[1]}"
    typer.echo(f"kernels compiled in {time.monotonic() - started:.1f} s (cache: {cache})", err=True)


@app.command()
def run(
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
    (--once, --master) and the operator override the file; the file holds the queries' own settings."""
    import logging
    import os

    from greta_stream.spark.flush import run_to_end
    from greta_stream.spark.pipeline import run as run_pipeline

    if spark_logs:
        os.environ["GRETA_SPARK_LOG_LEVEL"] = "WARN"
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # one line per Python callback otherwise
    lateness = lateness_flag(lateness, watermark)
    flags = RunFlags(query=query, input=input, output=output, checkpoint=checkpoint, lateness=lateness, once=once,
                     dead_letter=dead_letter, master=master, shards=shards, operator=operator,
                     max_files_per_trigger=max_files_per_trigger, trigger_interval=trigger_interval,
                     engine=engine_name, input_format=input_format, output_format=output_format, mode=mode,
                     trends=trends, max_trends=max_trends, with_events=with_events, distribute_over=distribute_over,
                     type_field=type_field, time_field=time_field, id_field=id_field)
    try:
        cfg = pipeline_config(config, flags)
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


@dataclass
class RunFlags:
    """`run`'s flags (None: not given)."""

    query: list[str] | None = None
    input: str | None = None
    output: str | None = None
    checkpoint: str | None = None
    lateness: float | None = None
    once: bool = False
    dead_letter: str | None = None
    master: str | None = None
    shards: int | None = None
    operator: Operator | None = None
    max_files_per_trigger: int | None = None
    trigger_interval: float | None = None
    engine: StreamEngine = "auto"
    input_format: TableFormat = "jsonl"
    output_format: TableFormat = "jsonl"
    mode: Mode | None = None
    trends: Trends | None = None
    max_trends: int | None = None
    with_events: bool = False
    distribute_over: int | None = None
    type_field: str | None = None
    time_field: str | None = None
    id_field: str | None = None

    def query_options(self) -> dict[str, Any]:
        """The queries' own settings given as flags."""
        given = {"lateness_s": self.lateness, "trends": self.trends, "max_trends": self.max_trends,
                 "with_events": self.with_events or None, "distribute_over": self.distribute_over,
                 "mode": self.mode}
        return {k: v for k, v in given.items() if v is not None}

    def fields(self) -> dict[str, str]:
        given = {"type": self.type_field, "time": self.time_field, "id": self.id_field}
        return {k: v for k, v in given.items() if v is not None}


def pipeline_config(config: Path | None, flags: RunFlags) -> PipelineConfig:
    """The run's pipeline, compiled: a config file with the flags that override it, or the flags alone."""
    from greta_stream.pipeline import PipelineConfig

    if config is not None:
        existing_file(config, "config")
        own = [f"--{k.removesuffix('_s').replace('_', '-')}" for k in flags.query_options()]
        own += [f"--{k}-field" for k in flags.fields()]
        if own:
            fail(f"{', '.join(own)}: the config file holds the queries' settings; set them there")
        cfg = _pipeline_file(config, engine=None if flags.engine == "auto" else flags.engine)
        return cfg.model_copy(update={"once": cfg.once or flags.once, "master": flags.master or cfg.master,
                                      "operator": flags.operator or cfg.operator})
    if not (flags.query and flags.input and flags.output and flags.checkpoint):
        fail("give --config, or --query, --input, --output and --checkpoint")
    existing_folder(flags.input, "input folder")
    output, fmt = flags.output, flags.output_format
    options = {k: v for k, v in flags.query_options().items() if k != "lateness_s"}
    queries = []
    for i, q in enumerate(flags.query):
        cq = _load_query(q)
        name = Path(q).stem if is_file(q) else f"query{i + 1}"
        out = output if len(flags.query) == 1 else str(Path(output) / name)
        # a Delta table owns its folder (VACUUM removes what its log does not name): its dead letters go beside it
        dl = flags.dead_letter or (f"{out.rstrip('/')}_dead_letters" if fmt == "delta"
                                   else str(Path(out) / "dead_letters"))
        queries.append({"name": name, "text": cq.text, "sinks": [{"format": fmt, "path": out}],
                        "dead_letter": {"format": fmt, "path": dl}, "engine": flags.engine, **options})
    raw = {"source": {"format": flags.input_format, "path": flags.input,
                      "max_files_per_trigger": flags.max_files_per_trigger},
           "queries": queries, "checkpoint": flags.checkpoint, "lateness_s": flags.lateness, "once": flags.once,
           "trigger_interval_s": flags.trigger_interval, "master": flags.master, "shards": flags.shards,
           "operator": flags.operator, "fields": flags.fields()}
    return PipelineConfig.from_dict(_given(raw), origin="command line")


def _pipeline_file(path: Path, engine: str | None = None) -> PipelineConfig:
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


@app.command()
def serve(
    config: Annotated[Path | None, typer.Option("--config", "-c", help="service config (TOML or YAML)")] = None,
    host: Annotated[str | None, typer.Option(help="address to bind (default 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="port (default 8000)")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="state folder (default greta-data)")] = None,
    master: Annotated[str | None, typer.Option(help="Spark master URL (default local[2])")] = None,
    log_level: Annotated[LogLevel | None, typer.Option(help="uvicorn log level (default info)")] = None,
    log_json: Annotated[bool, typer.Option("--log-json", envvar="GRETA_LOG_JSON",
                                           help="log one JSON object per line")] = False,
    restore_registry: Annotated[bool, typer.Option(
        "--restore-registry", help="put the registry's queries back from its backup (an empty or unreadable "
                                   "registry; the backup is <registry>.queries.json, written after each change)")] = False,
) -> None:
    """Run the HTTP control plane: register queries, read their results (API key: GRETA_API_KEY)."""

    try:
        import uvicorn

        from greta_service import Settings, create_app
    except ImportError as exc:
        typer.echo(f"error: the service is not installed ({exc.name}): pip install greta-stream-service", err=True)
        raise typer.Exit(2) from None

    try:
        settings = Settings.load(config and existing_file(config, "config"), host=host, port=port,
                                 data_dir=data_dir, spark_master=master, log_level=log_level and log_level.value)
        logs.setup(settings.log_level, as_json=log_json)
        application = create_app(settings, restore_registry=restore_registry)
    except ConfigError as exc:
        fail(str(exc))
    # A bounded graceful shutdown: open result streams (SSE) would otherwise hold it forever.
    uvicorn.run(application, host=settings.host, port=settings.port, log_level=settings.log_level,
                timeout_graceful_shutdown=5, log_config=None)  # uvicorn's loggers through ours


@app.command()
def demo(
    workdir: Annotated[Path, typer.Option(help="folder for the broker's data, the checkpoint and the logs")] = Path(
        "out/demo"),
    rate: Annotated[float, typer.Option(help="events per second that the producer replays")] = 200.0,
    seconds: Annotated[float | None, typer.Option(help="stop after this many seconds (default: Ctrl-C)")] = None,
    rows: Annotated[int | None, typer.Option(help="stop after this many result rows")] = None,
    config: Annotated[Path | None, typer.Option(
        help="pipeline config (default: the demo's own, configs/demo/pipeline.yaml)")] = None,
) -> None:
    """Kafka (KRaft), the event producer and the pipeline as local processes: docker-compose.yml without Docker."""
    from greta_stream.demo import DEFAULT_CONFIG, run_demo
    from greta_stream.jvm import CONNECTOR_HINT, SETUP_HINT, jars, spark_kafka_jars

    if config is not None:
        existing_file(config, "config")
    if not jars("kafka"):
        fail(f"Apache Kafka's jars are missing: {SETUP_HINT}")
    if not spark_kafka_jars():
        fail(f"Spark's Kafka connector is missing: {CONNECTOR_HINT}")
    code = run_demo(workdir, config or DEFAULT_CONFIG, rate=rate, seconds=seconds, rows=rows, echo=typer.echo)
    raise typer.Exit(code)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
