"""The `greta-stream` command line: evaluate, explain (run and serve come with Spark).

Thin: parses options, calls the library, prints JSON lines. Query errors are
printed with their position and exit with status 2.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from greta_stream import logs
from greta_stream.cli_args import LogLevel, existing_file, fail
from greta_stream.cli_evaluate import evaluate, load_query
from greta_stream.cli_run import pipeline_config, pipeline_file, run
from greta_stream.client_cli import app as queries_app
from greta_stream.errors import ConfigError
from greta_stream.runtime import RunSpec, runs_on

__all__ = ["app", "main", "pipeline_config"]  # pipeline_config: run's, importable from here

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
        cq = load_query(query)
        typer.echo(cq.explain())
        spec = RunSpec.create(cq)
        typer.echo(runs_on(spec))
        return
    from greta_stream.pipeline import default_shards, streams

    cfg = pipeline_file(config)  # type: ignore[arg-type]
    from greta_stream.runtime.plan import plan_units

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


app.command()(evaluate)  # the commands of their own modules, in the order `--help` lists them


@app.command("warm-up")
def warm_up(
    jvm: Annotated[bool, typer.Option("--jvm/--no-jvm", help=(
        "also archive the classes Spark's JVM loads (about a minute, once per JDK and pyspark): each Spark "
        "start then maps them, a quarter shorter"))] = True,
) -> None:
    """Compile every numba kernel (columnar engine, incremental stream, CET) into numba's on-disk cache now
    (install time, an image build), so that no run compiles them: a process then loads them in about a second.
    Unpack RocksDB's native library once for every run's JVM. Then archive Spark's classes for its JVM's start
    (class data sharing; $GRETA_JVM_ARCHIVE=off: never)."""
    import os

    from greta_stream.cet.warm import compile_kernels as compile_cet
    from greta_stream.engine.columnar.warm import compile_all

    started = time.monotonic()
    where = compile_all()
    compile_cet()
    cache = os.environ.get("NUMBA_CACHE_DIR") or f"__pycache__ beside each kernel module under {where.parents[1]}"
    typer.echo(f"kernels compiled in {time.monotonic() - started:.1f} s (cache: {cache})", err=True)
    from greta_stream.jvm import rocksdb_library_dir

    native = rocksdb_library_dir()  # else the first run unpacks it (an image's cache may be read-only then)
    typer.echo(f"RocksDB's native library: {native or 'none for this machine; each JVM unpacks its own'}", err=True)
    if jvm:
        from greta_stream.spark.classes import build

        build(echo=lambda line: typer.echo(line, err=True))


app.command()(run)


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
