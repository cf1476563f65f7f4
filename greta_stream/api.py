"""The library entry points: `compile_query`, `evaluate` and `open_stream`.

`evaluate` runs a query over a finite collection of events and returns the
result rows of docs/QUERY_LANGUAGE.md section 4, or, in CET mode, one record per trend
(section 5, `greta_stream.cet`). `open_stream` returns a runner for a stream
of micro-batches. Both build a `RunSpec` and go through the runner interface
(`greta_stream.runtime`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

from greta_stream.compiler.compiled import CompiledQuery, compile_query
from greta_stream.engine import FieldNames
from greta_stream.runtime import ResultRows, Runner, RunSpec, evaluate_spec


def evaluate(
    query: str | CompiledQuery | RunSpec,
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
    `.engine` says which one ran. A `RunSpec` may stand for the query and
    its options.

    A run that processed no event says why where the input shows it: no
    event of the query's types (a misspelled type; the types the events have
    and the closest one), or every event of a type dead-lettered for one
    attribute it lacks (a misspelled attribute). Each such problem is in
    `.problems` and is also issued as a `UserWarning`.
    """
    spec = query if isinstance(query, RunSpec) else RunSpec.create(
        query, mode=mode, engine=engine, fields=FieldNames(type_field, time_field, id_field),
        trends=trends, max_trends=max_trends, with_events=with_events)
    rows = evaluate_spec(spec, events)
    for problem in rows.problems:
        warnings.warn(problem, UserWarning, stacklevel=2)
    return rows


def open_stream(
    query: str | CompiledQuery | RunSpec,
    *,
    dead_letter: Any = None,
    **options: Any,
) -> Runner:
    """A runner for a stream of events (`greta_stream.runtime.Runner`).

    `options` are those of `RunSpec.create` (`mode`, `engine`, `fields`,
    `trends`, `max_trends`, `with_events`, `time_kind`, ...). The runner is
    the columnar stream where its kernels cover the query (it hands over to
    the general engine by itself when some input needs it), the general
    engine otherwise, or CET extraction. `dead_letter` receives each record
    that is not processed, with its reason. Call order::

        stream = open_stream(query)
        stream.add_many(records)          # any order; bad or late -> dead letters
        rows = stream.advance(watermark)  # rows of every window that ended
        rows = stream.finish()            # end of input
    """
    if isinstance(query, RunSpec):
        if options:
            raise TypeError(f"options {sorted(options)} given with a RunSpec: set them on the spec")
        return query.build(dead_letter=dead_letter)
    return RunSpec.create(query, **options).build(dead_letter=dead_letter)


__all__ = ["ResultRows", "compile_query", "evaluate", "open_stream"]
