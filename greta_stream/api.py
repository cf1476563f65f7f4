"""The library entry points: `compile_query` and `evaluate`.

`evaluate` runs a query over a finite collection of events with the pure
Python engine and returns the result rows of SEMANTICS.md section 4.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from greta_stream.compiler.compiled import CompiledQuery, compile_query
from greta_stream.engine import DeadLetter, Engine, FieldNames


class ResultRows(list):  # type: ignore[type-arg]
    """Result rows (a list of dicts) with what was skipped and the run's metrics."""

    columns: list[str]
    dead_letters: list[DeadLetter]
    metrics: dict[str, int]

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
) -> ResultRows:
    """Aggregate the trends of `query` over `events` (dicts or a DataFrame).

    Bad events are skipped and listed in `.dead_letters`; they never raise.
    """
    cq = compile_query(query)
    dead: list[DeadLetter] = []
    engine = Engine(cq, fields=FieldNames(type_field, time_field, id_field), dead_letter=dead.append)
    engine.add_many(_records(events))
    rows = ResultRows(engine.finish())
    rows.columns = cq.columns
    rows.dead_letters = dead
    rows.metrics = dict(engine.metrics)
    return rows


def _records(events: Any) -> Iterator[dict[str, Any]]:
    """Dicts from an iterable of dicts, or from a pandas DataFrame (NaN = missing)."""
    if hasattr(events, "to_dict") and hasattr(events, "columns"):
        for rec in events.to_dict("records"):
            yield {k: v for k, v in rec.items() if not (isinstance(v, float) and math.isnan(v)) and v is not None}
        return
    yield from events


__all__ = ["ResultRows", "compile_query", "evaluate"]
