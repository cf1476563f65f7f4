"""The planner's one cost model: a unit's estimated work per event, in lanes.

Every shared unit is a set of kernel passes over one preparation, and every
pass is a union (`engine/columnar/union.py`): a family's pass is a union of
one lane (its queries differ in windows and aggregates only, so they share
the lane), a union's pass carries a lane per query group around one Kleene
part. So one model prices them all:

- a unit's *preparation* (reading its events' columns, typing and windowing
  them, its rows) costs `prep_base` once per event;
- a pass costs, per state of its traversal, `prep_state` (the state's local
  predicates, ranking and sorting its vertices) plus `vertex` (a vertex
  visited) plus the vertex's lanes: the windows per event (`windows`) times
  the limbs of its cells (`cells`) times the lanes of the state's queries.

A query (or one lane's queries) *alone* is the unit of that one lane: its
own preparation and a one-lane pass. Sharing pays when the unit costs less
than its lanes alone. The numbers are fitted on `benchmarks/bench_sharing.py`
(`--lanes`: a vertex costs 6.4 ms + 0.45 ms per lane per 9,000 vertices, so
`vertex` is 14 lanes; `--choices`, 90,000 events: a preparation of 1 / 2 / 3
states takes 4.3 / 7.1 / 9.1 ms against 0.4 ms per unit of its kernel's
estimate, so `prep_base` is 5 and `prep_state` 6).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from greta_stream.query.aggregates import FIELD_KINDS

if TYPE_CHECKING:
    from greta_stream.engine.columnar import KernelPlan
    from greta_stream.engine.columnar.passes import PassSpec
    from greta_stream.engine.columnar.union import UnionPlan


@dataclass(frozen=True)
class CostModel:
    """Per-event estimates of units, passes and lanes (see the module docstring)."""

    prep_base: float = 5.0
    prep_state: float = 6.0
    vertex: float = 14.0

    def traversal(self, plan: KernelPlan, cells: float, spans: Sequence[int]) -> float:
        """One pass over `plan`'s states, the i-th carrying `spans[i]` lanes of `cells` limbs per window."""
        lanes = windows(plan) * cells
        return sum(self.prep_state + self.vertex + lanes * span for span in spans)

    def alone(self, plan: KernelPlan, fields: Iterable[Any]) -> float:
        """A lane alone: its own preparation and a one-lane pass with `fields`' cells."""
        return self.prep_base + self.traversal(plan, cell_units(fields), [1] * len(plan.states))

    def family_pass(self, spec: PassSpec) -> float:
        """A family's pass (a one-lane union), without the unit's preparation."""
        return self.traversal(spec.plan, cell_units(spec.fields), [1] * len(spec.plan.states))

    def union_pass(self, union: UnionPlan) -> float:
        """A union's pass without the unit's preparation: each state spans the lanes of its
        queries' range (`UnionPlan.qlo`, `qhi`)."""
        return self.traversal(union.plan, cell_units(union.fields),
                              [int(hi - lo) for lo, hi in zip(union.qlo, union.qhi, strict=True)])

    def union_lanes_alone(self, union: UnionPlan) -> float:
        """A union pass's lanes apart: each lane's queries a family of their own (or a query alone)."""
        total = 0.0
        for lane in range(union.nq):
            members = [m for m in union.members if m.lane == lane]
            total += self.alone(members[0].plan, {union.fields[j] for m in members for j in m.field_of})
        return total

    def unit(self, passes: Iterable[float]) -> float:
        """A unit of passes costing `passes` each: one preparation for all of them."""
        return self.prep_base + sum(passes)


COST = CostModel()


def cell_units(fields: Iterable[Any]) -> float:
    """Limbs per lane of a pass's cells: the trend count, one per COUNT(X), two per SUM, half a MIN/MAX."""
    return 1 + sum(FIELD_KINDS[f.kind] for f in fields)


def windows(plan: KernelPlan) -> int:
    """Windows per event of `plan`'s window spec."""
    return math.ceil(plan.within / plan.slide)
