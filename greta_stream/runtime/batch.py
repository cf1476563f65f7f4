"""A whole run over a finite collection of events: `evaluate_spec`.

The batch driver of the runner interface: build the spec's runner, add every
event, finish. For the columnar engine it hands the events over at once (the
kernels' batch path: one preparation, one pass), and below
`COLUMNAR_MIN_EVENTS` events it takes the general engine (loading the
compiled kernels costs more than the general engine takes).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from greta_stream.engine import DeadLetter
from greta_stream.engine.columnar import Input, Unsupported, evaluate_columnar
from greta_stream.engine.columnar.columns import INPUT_LIMITS, frame_records
from greta_stream.engine.columnar.valueruns import equivalence_notes
from greta_stream.errors import ConfigError
from greta_stream.runtime.dead_letters import name_problems, tally
from greta_stream.runtime.spec import RunSpec

COLUMNAR_MIN_EVENTS = 2000  # engine="auto" runs the columnar engine from this many events


class ResultRows(list):  # type: ignore[type-arg]
    """Result rows (a list of dicts) with what was skipped and the run's metrics."""

    columns: list[str]
    dead_letters: list[DeadLetter]
    metrics: dict[str, int]
    engine: str  # "columnar", "general" or "cet": what produced the rows
    engine_reason: str | None  # for the general engine: why not the columnar one (the query, few events, input)
    problems: list[str]  # the query's names the input shows to be mistakes: a type or an attribute no event has
    other_types: dict[str, int]  # events of types the query has not, by type (some names)
    typed: dict[str, int]  # events of the query's types (valid or refused), by type

    @classmethod
    def of(cls, rows: Iterable[dict[str, Any]], spec: RunSpec, dead: list[DeadLetter], metrics: dict[str, int],
           engine: str, other_types: Mapping[str, int] | None = None,
           typed: Mapping[str, int] | None = None) -> ResultRows:
        out = cls(rows)
        out.columns, out.dead_letters, out.metrics, out.engine = spec.columns, dead, dict(metrics), engine
        out.engine_reason = None
        out.other_types, out.typed = dict(other_types or {}), dict(typed or {})
        out.problems = name_problems(spec.query, out.typed, out.other_types, tally(dead).carried)
        return out

    def to_pandas(self) -> Any:
        import pandas as pd

        return pd.DataFrame(list(self), columns=self.columns)


def evaluate_spec(spec: RunSpec, events: Iterable[dict[str, Any]] | Any) -> ResultRows:
    """The rows of `spec` over `events` (dicts or a DataFrame); bad events in `.dead_letters`."""
    kind, why = spec.runner_kind, spec.columnar_refusal or None
    if kind == "columnar":
        events, rows, why = _columnar(spec, events)
        if rows is not None:
            return rows
        kind = "general"
    dead: list[DeadLetter] = []
    runner = spec.build(dead_letter=dead.append, kind=kind)
    runner.add_many(_records(events))
    out = ResultRows.of(runner.finish(), spec, dead, runner.metrics, kind, runner.other_types, runner.typed)
    out.engine_reason = why if kind == "general" else None
    return out


def runs_on(spec: RunSpec) -> str:
    """What a run of `spec` runs on, as `explain` says it: the engine, why not the columnar one, and
    when a run of the columnar engine's query takes the general one (few events, input it does not take)."""
    if spec.runner_kind == "cet":
        return "runs on: CET extraction (the trends themselves)"
    if spec.runner_kind == "general":
        return f"runs on: the general engine (the columnar engine does not take {spec.columnar_refusal})"
    limits = "".join(f"\n  - {limit}" for limit in INPUT_LIMITS)
    plan = spec.columnar
    assert plan is not None
    notes = "".join(f"  {note}\n" for note in equivalence_notes(plan.cq, plan.states, plan.value_runs, plan.part_attrs))
    return ("runs on: the columnar engine\n" + notes +
            f"  evaluate takes the general engine below {COLUMNAR_MIN_EVENTS:,} events, where it is done before the "
            "kernels load (same rows; `engine` says which ran); streams start on the columnar engine\n"
            "  the general engine takes over, and the run says so (`engine` of the rows, the stream's progress), "
            f"on input the columnar engine does not take:{limits}")


def _columnar(spec: RunSpec, events: Any) -> tuple[Any, ResultRows | None, str | None]:
    """(events for the general engine, rows of the columnar engine or None when it does not run, and why not)."""
    forced = spec.engine == "columnar"
    inp = Input(events)
    if not forced and inp.n < COLUMNAR_MIN_EVENTS:
        return inp.materialized(), None, f"{inp.n:,} events, below {COLUMNAR_MIN_EVENTS:,}: it is done first"
    assert spec.columnar is not None
    try:
        res = evaluate_columnar(spec.columnar, inp, spec.fields)
    except Unsupported as exc:
        if forced:
            raise ConfigError(f"the columnar engine cannot take this input: {exc}") from None
        return inp.materialized(), None, f"input the columnar engine does not take: {exc}"
    return inp.materialized(), ResultRows.of(res.rows, spec, res.dead, res.metrics, "columnar", res.other_types,
                                                    res.typed), None


def _records(events: Any) -> Iterator[dict[str, Any]]:
    """Dicts from an iterable of dicts, or from a pandas DataFrame (NaN and NaT = missing)."""
    if hasattr(events, "to_dict") and hasattr(events, "columns"):
        yield from frame_records(events)
        return
    yield from events
