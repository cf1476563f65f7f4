"""`greta-stream evaluate`: a query over a file of events, in this process (no Spark).

Also the compiled query of a `--query` option (`load_query`), which `explain` and `run` read the same way.
The command is registered on the app by `greta_stream.cli`.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from greta_stream.cli_args import Engine, Mode, Trends, existing_file, fail
from greta_stream.cli_args import query_text as _query_text
from greta_stream.compiler import check_limits
from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.connectors.jsonl import dumps_payload, read_events
from greta_stream.engine import DeadLetter, FieldNames
from greta_stream.errors import ConfigError, QueryError
from greta_stream.runtime import RunSpec, evaluate_spec
from greta_stream.runtime.dead_letters import DeadLetters, name_problems
from greta_stream.runtime.spec import compile_once

QueryOpt = Annotated[str, typer.Option("--query", "-q", help="query file, or the query text itself")]


def load_query(query: str) -> CompiledQuery:
    """The compiled query of a `--query` option (a file, or the text itself); a query error is printed
    with its position, exit status 2."""
    text = _query_text(query)
    try:
        return check_limits(compile_once(text))
    except QueryError as exc:
        typer.echo(f"error: invalid query\n{exc}", err=True)
        raise typer.Exit(2) from None


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
    cq = load_query(query)
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
