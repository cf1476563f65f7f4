"""The library entry points: `compile_query` and `evaluate`.

`evaluate` runs a query over a finite collection of events with the pure
Python engine and returns the result rows of SEMANTICS.md section 4, or, in
CET mode, one record per trend (section 5, `greta_stream.cet`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from greta_stream.cet import CetConfig, TrendExtractor
from greta_stream.compiler.compiled import CompiledQuery, compile_query
from greta_stream.engine import DeadLetter, Engine, FieldNames

CET_COLUMNS = ["trend", "total", "truncated"]
COLUMNAR_MIN_EVENTS = 2000  # engine="auto" runs the columnar engine from this many events


class ResultRows(list):  # type: ignore[type-arg]
    """Result rows (a list of dicts) with what was skipped and the run's metrics."""

    columns: list[str]
    dead_letters: list[DeadLetter]
    metrics: dict[str, int]
    engine: str  # "columnar", "general" or "cet": what produced the rows

    def to_pandas(self) -> Any:
        import pandas as pd

        return pd.DataFrame(list(self), columns=self.columns)


def evaluate(
    query: str | CompiledQuery,
    events: Iterable[dict[str, Any]] | Any,
    *,
    type_field: str = "type",
    time_field: str = "time",
    id_field: str = "id",
    mode: str | None = None,
    trends: str = "complete",
    max_trends: int | None = None,
    with_events: bool = False,
    engine: str = "auto",
) -> ResultRows:
    """Aggregate the trends of `query` over `events` (dicts or a DataFrame), or list them.

    `mode` is "aggregate" (result rows) or "cet" (one record per trend:
    `window_start`, `window_end`, the GROUP-BY columns, `trend` = the event
    ids in time order, `total` and `truncated` of its window and group, and
    with `with_events` also `aliases` and `events`); by default "cet" when
    the query says `RETURN TRENDS`. In CET mode `trends` is "complete"
    (maximal trends) or "all", and `max_trends` caps the records of each
    (window, group). Trend numbers grow exponentially: set a cap.
    Bad events are skipped and listed in `.dead_letters`; they never raise.

    `engine` picks the aggregation engine: "columnar" (numba kernels over
    arrays; single Kleene patterns, see `greta_stream.engine.columnar`),
    "general" (every query), or "auto" (columnar where it applies and there
    are at least 2,000 events, else general; the results are the same).
    `.engine` says which one ran.
    """
    cq = compile_query(query)
    mode = mode or ("cet" if cq.query.trends else "aggregate")
    if mode not in ("aggregate", "cet"):
        raise ValueError(f"mode must be 'aggregate' or 'cet', got {mode!r}")
    if mode == "aggregate" and cq.query.trends:
        raise ValueError("RETURN TRENDS lists trends: use mode='cet'")
    dead: list[DeadLetter] = []
    fields = FieldNames(type_field, time_field, id_field)
    if mode == "cet":
        cfg = CetConfig(trends=trends, max_trends=max_trends, with_events=with_events)
        runner: Engine | TrendExtractor = TrendExtractor(cq, config=cfg, fields=fields, dead_letter=dead.append)
        columns = ["window_start", "window_end", *cq.group_columns, *CET_COLUMNS]
        columns += ["aliases", "events"] if with_events else []
    else:
        if engine not in ("auto", "general", "columnar"):
            raise ValueError(f"engine must be 'auto', 'general' or 'columnar', got {engine!r}")
        if engine != "general":
            events, fast = _columnar(cq, events, fields, forced=engine == "columnar")
            if fast is not None:
                return fast
        runner = Engine(cq, fields=fields, dead_letter=dead.append)
        columns = cq.columns
    runner.add_many(_records(events))
    rows = ResultRows(runner.finish())
    rows.columns = columns
    rows.dead_letters = dead
    rows.metrics = dict(runner.metrics)
    rows.engine = "cet" if mode == "cet" else "general"
    return rows


def _columnar(cq: CompiledQuery, events: Any, fields: FieldNames, *, forced: bool) -> tuple[Any, ResultRows | None]:
    """(events for the general engine, rows of the columnar engine or None when it does not apply)."""
    from greta_stream.engine.columnar import Input, Unsupported, columnar_plan, evaluate_columnar

    try:
        plan = columnar_plan(cq)
    except Unsupported as exc:
        if forced:
            raise ValueError(f"the columnar engine does not cover this query: {exc}") from None
        return events, None
    inp = Input(events)
    if not forced and inp.n < COLUMNAR_MIN_EVENTS:
        return inp.materialized(), None  # loading the compiled kernels costs more than the general engine takes
    try:
        res = evaluate_columnar(plan, inp, fields)
    except Unsupported as exc:
        if forced:
            raise ValueError(f"the columnar engine cannot take this input: {exc}") from None
        return inp.materialized(), None
    rows = ResultRows(res.rows)
    rows.columns = cq.columns
    rows.dead_letters = res.dead
    rows.metrics = res.metrics
    rows.engine = "columnar"
    return inp.materialized(), rows


def _records(events: Any) -> Iterator[dict[str, Any]]:
    """Dicts from an iterable of dicts, or from a pandas DataFrame (NaN and NaT = missing)."""
    if hasattr(events, "to_dict") and hasattr(events, "columns"):
        from greta_stream.engine.columnar.stream import frame_records

        yield from frame_records(events)
        return
    yield from events


__all__ = ["ResultRows", "compile_query", "evaluate"]
