"""`greta-stream queries ...`: the service's queries from the command line (through `greta_stream.client`).

    greta-stream queries add --name q1 --query configs/q1_stock.greta --source jsonl:samples/stock
    greta-stream queries list
    greta-stream queries results q1
    greta-stream queries stop q1 | start q1 | delete q1

The service's address comes from `--url` or $GRETA_URL (default
http://127.0.0.1:8000), its API key from `--api-key` or $GRETA_API_KEY.
Sources and sinks are JSON objects (`{"format": "kafka", "topic": "stock"}`)
or `FORMAT:WHERE` shorthands: `jsonl:PATH`, `parquet:PATH`, `kafka:TOPIC` or
`kafka:TOPIC@HOST:PORT`, `console:`. A relative file path is relative to the
folder the command runs in, and sent as an absolute path (symbolic links as
they are: the service checks the path as you typed it against its roots).
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

import typer

from greta_stream.choices import PATH_FORMATS
from greta_stream.cli_args import Mode, Operator, StreamEngine, Trends, lateness_flag, query_text
from greta_stream.client import DEFAULT_URL, ServiceClient, ServiceError
from greta_stream.connectors.jsonl import dumps_payload

app = typer.Typer(help="Queries of a running service (greta-stream serve).", no_args_is_help=True)

UrlOpt = Annotated[str | None, typer.Option("--url", envvar="GRETA_URL", help=f"the service (default {DEFAULT_URL})")]
KeyOpt = Annotated[str | None, typer.Option("--api-key", envvar="GRETA_API_KEY", show_default=False,
                                            help="API key for changes")]
Ref = Annotated[str, typer.Argument(help="query id or name")]


def _client(url: str | None, api_key: str | None) -> ServiceClient:
    return ServiceClient(url, api_key=api_key)


def _fail(exc: ServiceError) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(1)


def endpoint(spec: str) -> dict[str, Any]:
    """A source or sink from JSON or a `FORMAT:WHERE` shorthand."""
    text = spec.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise typer.BadParameter(f"not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise typer.BadParameter("a JSON object is needed")
        if isinstance(value.get("path"), str) and value["path"] and value.get("format") in PATH_FORMATS:
            value["path"] = os.path.abspath(value["path"])
        return value
    fmt, sep, where = text.partition(":")
    if not sep or not fmt:
        raise typer.BadParameter(f"{spec!r}: use FORMAT:WHERE (jsonl:PATH, kafka:TOPIC[@HOST:PORT]) or JSON")
    if fmt == "kafka":
        topic, _, servers = where.partition("@")
        return {"format": "kafka", "topic": topic, **({"bootstrap_servers": servers} if servers else {})}
    if fmt == "console":
        return {"format": "console"}
    return {"format": fmt, "path": os.path.abspath(where) if where else where}


@app.command("list")
def list_(url: UrlOpt = None, api_key: KeyOpt = None) -> None:
    """Every query: name, id, status, mode, result rows, dead letters; under it why it failed and the problem
    its input shows."""
    try:
        queries = _client(url, api_key).queries()
    except ServiceError as exc:
        raise _fail(exc) from None
    typer.echo(f"{'name':20} {'id':14} {'status':8} {'mode':9} {'rows':>8} {'dead':>6}")
    for q in queries:
        p = q["progress"]
        typer.echo(f"{q['name']:20} {q['id']:14} {q['status']:8} {q['mode']:9} {p['result_rows']:>8} "
                   f"{p['dead_letters']:>6}")
        if q.get("error"):  # why it failed: under its row
            typer.echo(f"  error: {q['error']}")
        if p.get("problem"):  # a name of the query its input shows to be a mistake: under its row
            typer.echo(f"  problem: {p['problem']}")


@app.command()
def show(ref: Ref, url: UrlOpt = None, api_key: KeyOpt = None) -> None:
    """One query's record and progress, as JSON."""
    try:
        typer.echo(json.dumps(_client(url, api_key).query(ref), indent=2))
    except ServiceError as exc:
        raise _fail(exc) from None


@app.command()
def add(
    name: Annotated[str, typer.Option(help="the query's name (letters, digits, _ . -)")],
    query: Annotated[str, typer.Option("--query", "-q", help="query file, or the query text itself")],
    source: Annotated[str, typer.Option(help="where events come from: jsonl:PATH, kafka:TOPIC, or JSON")],
    sink: Annotated[list[str] | None, typer.Option(help="where rows go too (repeatable); the service stores them "
                                                   "anyway")] = None,
    dead_letter: Annotated[str | None, typer.Option(help="where bad and late events go")] = None,
    lateness: Annotated[float | None, typer.Option(help="allowed lateness in seconds (default 0)")] = None,
    watermark: Annotated[float | None, typer.Option(hidden=True, help="the old name of --lateness")] = None,
    backfill: Annotated[bool, typer.Option(help="read the source from its start on a stream of its own")] = False,
    mode: Annotated[Mode | None, typer.Option(
        help="aggregate (result rows) or cet (one row per trend); default cet for RETURN TRENDS")] = None,
    engine: Annotated[StreamEngine | None, typer.Option(
        help="auto: the columnar engine where it covers the query, general: always the general engine")] = None,
    trends: Annotated[Trends | None, typer.Option(help="CET mode: complete (maximal trends) or all")] = None,
    max_trends: Annotated[int | None, typer.Option(help="CET mode: at most this many trends per window and "
                                                   "group")] = None,
    with_events: Annotated[bool, typer.Option(help="CET mode: each trend's aliases and events as well")] = False,
    distribute_over: Annotated[int | None, typer.Option(help=(
        "CET mode: extract a window of one partition with more vertices by a distributed Spark job"))] = None,
    shards: Annotated[int | None, typer.Option(help="state shards of the stream this query starts")] = None,
    operator: Annotated[Operator | None, typer.Option(help="stateful operator of the stream this query "
                                                      "starts")] = None,
    trigger_interval: Annotated[float | None, typer.Option(help="seconds between micro-batches")] = None,
    type_field: Annotated[str | None, typer.Option(help="name of the event type field (default type)")] = None,
    time_field: Annotated[str | None, typer.Option(help="name of the event time field (default time)")] = None,
    id_field: Annotated[str | None, typer.Option(help="name of the event id field (default id)")] = None,
    url: UrlOpt = None, api_key: KeyOpt = None,
) -> None:
    """Register and start a query; prints its id."""
    text = query_text(query)
    lateness = lateness_flag(lateness, watermark)
    fields = {k: v for k, v in (("type", type_field), ("time", time_field), ("id", id_field)) if v is not None}
    given = {"lateness_s": lateness, "engine": engine, "trends": trends, "max_trends": max_trends,
             "with_events": with_events or None, "distribute_over": distribute_over, "shards": shards,
             "operator": operator, "trigger_interval_s": trigger_interval, "fields": fields or None,
             "backfill": backfill or None}
    options = {k: v for k, v in given.items() if v is not None}
    try:
        made = _client(url, api_key).add(name, text, source=endpoint(source),
                                          sinks=[endpoint(s) for s in sink or []],
                                          dead_letter=endpoint(dead_letter) if dead_letter else None, mode=mode,
                                          **options)
    except ServiceError as exc:
        raise _fail(exc) from None
    typer.echo(f"{made['name']} {made['id']} {made['status']}")


def _change(action: str, ref: str, url: str | None, api_key: str | None) -> None:
    client = _client(url, api_key)
    try:
        if action == "delete":
            client.delete(ref)
            typer.echo(f"{ref} deleted")
        else:
            info = getattr(client, action)(ref)
            typer.echo(f"{info['name']} {info['id']} {info['status']}")
    except ServiceError as exc:
        raise _fail(exc) from None


@app.command()
def stop(ref: Ref, url: UrlOpt = None, api_key: KeyOpt = None) -> None:
    """Stop a query; its state and results stay (start resumes it)."""
    _change("stop", ref, url, api_key)


@app.command()
def start(ref: Ref, url: UrlOpt = None, api_key: KeyOpt = None) -> None:
    """Start a stopped query again, from where it stopped."""
    _change("start", ref, url, api_key)


@app.command()
def delete(ref: Ref, url: UrlOpt = None, api_key: KeyOpt = None) -> None:
    """Stop a query and forget it with its stored results."""
    _change("delete", ref, url, api_key)


@app.command()
def results(
    ref: Ref,
    window_from: Annotated[str | None, typer.Option("--from", help="least window start (seconds or ISO-8601)")] = None,
    window_to: Annotated[str | None, typer.Option("--to", help="greatest window start")] = None,
    group: Annotated[str | None, typer.Option(help='GROUP-BY values as JSON, e.g. \'["tech"]\'')] = None,
    url: UrlOpt = None, api_key: KeyOpt = None,
) -> None:
    """The query's stored result rows as JSON lines, by window then group."""
    try:
        groups = None if group is None else json.loads(group)
    except ValueError:
        groups = [group]
    try:
        for row in _client(url, api_key).results(ref, window_from=window_from, window_to=window_to,
                                                 group=groups if isinstance(groups, list) or groups is None
                                                 else [groups]):
            typer.echo(dumps_payload(row))
    except ServiceError as exc:
        raise _fail(exc) from None


@app.command()
def plan(url: UrlOpt = None, api_key: KeyOpt = None) -> None:
    """How the running queries share streams and evaluation, as JSON."""
    try:
        typer.echo(json.dumps(_client(url, api_key).plan(), indent=2))
    except ServiceError as exc:
        raise _fail(exc) from None
