"""Shared evaluation of columnar queries, now in two places (this module re-exports their names):

- plan time, `greta_stream.runtime.plan`: families' and unions' grouping keys (`plan.keys`), the
  planner (`plan.planner`) with its cost model (`plan.cost`) and the unit plans, their explain (`plan.explain`);
- run time, `greta_stream.runtime.units`: `FamilyUnit`, its restore and split.

Kept so importers of the old names and states pickled under them keep working.
"""

from greta_stream.runtime.plan.keys import family_key, union_group_key, validation_plan
from greta_stream.runtime.plan.keys import frozen as _frozen
from greta_stream.runtime.plan.planner import (
    LONELY,
    MAX_WITHIN_RATIO,
    Candidate,
    FamilyUnitPlan,
    plan_family,
    plan_union,
    share_families,
    share_unions,
    union_estimates,
)
from greta_stream.runtime.units import FAMILY_TAG, FamilyUnit, _as_stream, _Solo, restore_alone

__all__ = [
    "FAMILY_TAG", "LONELY", "MAX_WITHIN_RATIO", "Candidate",
    "FamilyUnit", "FamilyUnitPlan", "_Solo", "_as_stream", "_frozen", "family_key", "plan_family",
    "plan_union", "restore_alone", "share_families", "share_unions", "union_estimates", "union_group_key",
    "validation_plan",
]
