"""The columnar engine: Kleene queries evaluated on arrays by compiled kernels.

For the queries it covers, `greta_stream.evaluate` runs this instead of the
general engine and returns the same rows: a Kleene pattern `X+` (nested `+`
included) or a SEQ of events once or Kleene (one type at several positions
too), with a leading, middle and trailing NOT of one event each,
partitions by any GROUP-BY and equivalence attributes, edge predicates of
one Kleene alias, each a comparison `f(X) op g(NEXT(X))` with op in
`< <= > >= =` over numbers, local predicates of comparisons (numbers, or
an attribute and a string) joined by AND, OR and NOT, windows and slides in
any unit (whole seconds, or a common denominator, `timebase.Window`) on numeric
times or timestamps (microseconds since the epoch, as the general engine
reads them), and any aggregate; under each selection strategy, and a
counted repetition `X{n,m}` of one type (`iterations.py`). The flow:

    records / DataFrame --columns.py, times.py, prepare.py--> typed columns,
        windows per event; bad rows -> dead letters          (plan.py: may we?)
      --keys.py, cells.py--> partitions, key ranks, aggregate cells, in
        (partition, time) order
      --driver.py, blocks.py, kernel.py (numba)--> rows per (group, window)
        of each block of windows, in threads
      --rows.py--> summed per (group, window) --> result rows

`stream.ColumnarStream` runs the same over micro-batches.

What it cannot take exactly (a boolean attribute in a predicate, times of both kinds, a
SUM over a mix of ints and floats, numbers past 2**53 in a predicate,
...) raises `Unsupported` before any work, and the caller runs the general
engine. Results are identical to the general engine's: counts and sums are
exact integers (a float value v enters as the integer v * 2**S for the
smallest S that makes every value whole, in 31-bit digits), and a float SUM
or AVG is that exact value rounded once.
"""

from __future__ import annotations

from typing import Any

from greta_stream.engine.columnar.columns import Input, Unsupported
from greta_stream.engine.columnar.driver import compute, warm_up
from greta_stream.engine.columnar.plan import KernelPlan, State, columnar_plan
from greta_stream.engine.columnar.prepare import Prepared, prepare
from greta_stream.engine.ingest import DeadLetter, FieldNames


class ColumnarResult:
    """Rows, dead letters and metrics of one batch evaluation."""

    def __init__(self, rows: list[dict[str, Any]], dead: list[DeadLetter], metrics: dict[str, int],
                 other_types: dict[str, int] | None = None, typed: dict[str, int] | None = None) -> None:
        self.rows, self.dead, self.metrics = rows, dead, metrics
        self.other_types = other_types or {}  # events of types the query has not, by type (some names)
        self.typed = typed or {}  # events of the query's types (valid or refused), by type


def evaluate_columnar(plan: KernelPlan, events: Input, fields: FieldNames) -> ColumnarResult:
    """Result rows, dead letters and metrics, as the general engine gives them;
    raise `Unsupported` (before any result) when the input is not for us."""
    prep = prepare(plan, events, fields)
    rows = compute(plan, prep, events)
    prep.metrics["partitions"] = 0
    prep.metrics["rows_emitted"] = len(rows)
    return ColumnarResult(rows, prep.dead, dict(prep.metrics), prep.other_types, prep.typed)


__all__ = [
    "ColumnarResult", "Input", "KernelPlan", "Prepared", "State", "Unsupported", "columnar_plan", "compute",
    "evaluate_columnar", "prepare", "warm_up",
]
