"""The `greta-stream` command line: evaluate, explain (run and serve come with Spark).

Thin: parses options, calls the library, prints JSON lines. Query errors are
printed with their position and exit with status 2.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from greta_stream.api import compile_query
from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.connectors.jsonl import dumps, read_events
from greta_stream.engine import DeadLetter, Engine, FieldNames
from greta_stream.errors import QueryError

app = typer.Typer(help="Real-time event trend aggregation (GRETA).", no_args_is_help=True, add_completion=False)

QueryOpt = Annotated[str, typer.Option("--query", "-q", help="query file, or the query text itself")]


def _load_query(query: str) -> CompiledQuery:
    path = Path(query)
    text = sys.stdin.read() if query == "-" else path.read_text() if path.is_file() else query
    try:
        return compile_query(text)
    except QueryError as exc:
        typer.echo(f"error: invalid query\n{exc}", err=True)
        raise typer.Exit(2) from None


@app.command()
def explain(query: QueryOpt) -> None:
    """Print the compiled query: templates, transitions, predicates, partitions, panes."""
    typer.echo(_load_query(query).explain())


@app.command()
def evaluate(
    query: QueryOpt,
    events: Annotated[Path, typer.Option("--events", "-e", help="JSON lines file of events ('-' for stdin)")],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="write rows here instead of stdout")] = None,
    dead_letter: Annotated[Optional[Path], typer.Option(help="write skipped events with reasons here")] = None,
    type_field: Annotated[str, typer.Option(help="name of the event type field")] = "type",
    time_field: Annotated[str, typer.Option(help="name of the event time field")] = "time",
    id_field: Annotated[str, typer.Option(help="name of the event id field")] = "id",
    progress: Annotated[bool, typer.Option(help="report progress on stderr")] = True,
) -> None:
    """Aggregate trends over a file of events; print one JSON object per result row."""
    cq = _load_query(query)
    out = open(output, "w", encoding="utf-8") if output else sys.stdout  # noqa: SIM115
    dl_out = open(dead_letter, "w", encoding="utf-8") if dead_letter else None  # noqa: SIM115
    dead = 0

    def on_dead(dl: DeadLetter) -> None:
        nonlocal dead
        dead += 1
        if dl_out:
            dl_out.write(dumps(dl.to_dict()) + "\n")

    engine = Engine(cq, fields=FieldNames(type_field, time_field, id_field), dead_letter=on_dead)
    started = last = time.monotonic()
    source = sys.stdin if str(events) == "-" else events
    for n, rec in enumerate(read_events(source), 1):
        if isinstance(rec, DeadLetter):
            engine.metrics.inc("events_in")
            engine.reject(rec)
        else:
            engine.add(rec)
        if progress and time.monotonic() - last > 2:
            last = time.monotonic()
            typer.echo(f"read {n:,} events ({n / (last - started):,.0f}/s)", err=True)
    rows = engine.finish()
    for row in rows:
        out.write(dumps(row) + "\n")
    if output:
        out.close()
    if dl_out:
        dl_out.close()
    if progress:
        m = engine.metrics
        typer.echo(
            f"done: {m.get('events_in', 0):,} events, {len(rows):,} rows, {dead:,} dead-lettered, "
            f"{time.monotonic() - started:.2f} s",
            err=True,
        )


@app.command()
def run(
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="pipeline config (YAML or TOML)")] = None,
    query: Annotated[Optional[list[str]], typer.Option("--query", "-q", help="query file or text (repeatable)")] = None,
    input: Annotated[Optional[str], typer.Option("--input", "-i", help="folder of JSON lines event files")] = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="folder for result rows (JSON lines)")] = None,
    checkpoint: Annotated[Optional[str], typer.Option(help="checkpoint folder (restart resumes from it)")] = None,
    watermark: Annotated[float, typer.Option(help="allowed lateness in seconds")] = 0.0,
    once: Annotated[bool, typer.Option("--once", help="process what is there, emit passed windows, exit")] = False,
    dead_letter: Annotated[Optional[str], typer.Option(help="folder for dead letters (default OUTPUT/dead_letters)")] = None,
    master: Annotated[Optional[str], typer.Option(help="Spark master URL (default local[2])")] = None,
    shards: Annotated[Optional[int], typer.Option(help="state shards (default 2 x cores)")] = None,
    max_files_per_trigger: Annotated[Optional[int], typer.Option(help="files per micro-batch")] = None,
    trigger_interval: Annotated[Optional[float], typer.Option(help="seconds between micro-batches")] = None,
) -> None:
    """Run queries continuously on Spark Structured Streaming (the main job)."""
    import logging

    from greta_stream.spark.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig
    from greta_stream.spark.pipeline import run as run_pipeline

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if config is not None:
        cfg = PipelineConfig.from_file(config)
        if once:
            cfg.once = True
        if master:
            cfg.master = master
    else:
        if not (query and input and output and checkpoint):
            typer.echo("error: give --config, or --query, --input, --output and --checkpoint", err=True)
            raise typer.Exit(2)
        queries = []
        for i, q in enumerate(query):
            cq = _load_query(q)
            name = Path(q).stem if Path(q).is_file() else f"query{i + 1}"
            out = output if len(query) == 1 else str(Path(output) / name)
            dl = dead_letter or str(Path(out) / "dead_letters")
            queries.append(QueryConfig(name, cq.text, [SinkConfig("jsonl", out)], SinkConfig("jsonl", dl)))
        cfg = PipelineConfig(
            source=SourceConfig("jsonl", input, max_files_per_trigger), queries=queries, checkpoint=checkpoint,
            watermark_delay_s=watermark, once=once, trigger_interval_s=trigger_interval, master=master, shards=shards,
        )
    started = time.monotonic()
    counts = run_pipeline(cfg, echo=lambda line: typer.echo(line, err=True))
    for name, c in counts.items():
        typer.echo(f"{name}: {c['rows']:,} rows, {c['dead_letters']:,} dead letters ({time.monotonic() - started:.1f} s)",
                   err=True)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
