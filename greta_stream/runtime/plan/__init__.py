"""Plan time: which queries of a stream are evaluated together, and why.

- `keys`: grouping keys (`family_key`, `union_group_key`) and a family's validation.
- `cost`: the one cost model (`CostModel`) that prices every unit: a family is a one-lane union.
- `planner`: the planner that forms families and unions (`plan_units`) and the unit plans it
  returns (`SoloUnitPlan`, `FamilyUnitPlan`, `QuerySetPlan`).
- `explain`: the plan's explain text and dict.

The run-time units the plans build are `greta_stream.runtime.units`.
"""

from greta_stream.runtime.plan.cost import COST, CostModel
from greta_stream.runtime.plan.keys import family_key, union_group_key, validation_plan
from greta_stream.runtime.plan.planner import (
    Candidate,
    FamilyUnitPlan,
    QuerySetPlan,
    SoloUnitPlan,
    UnitPlan,
    plan_family,
    plan_union,
    plan_units,
    share_families,
    share_unions,
    union_estimates,
)

__all__ = [
    "COST", "Candidate", "CostModel", "FamilyUnitPlan", "QuerySetPlan", "SoloUnitPlan", "UnitPlan", "family_key",
    "plan_family", "plan_union", "plan_units", "share_families", "share_unions", "union_estimates", "union_group_key",
    "validation_plan",
]
