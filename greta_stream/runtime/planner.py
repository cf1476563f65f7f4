"""The sharing planner's entry point: `plan_units(queries)` (`greta_stream.runtime.plan.planner`).

This module re-exports the names it had: the plans (`SoloUnitPlan`, `QuerySetPlan`) are in
`greta_stream.runtime.plan`, the run-time `SoloUnit` in `greta_stream.runtime.units`.
"""

from greta_stream.runtime.plan.planner import QuerySetPlan, SoloUnitPlan, UnitPlan, plan_units
from greta_stream.runtime.units import SinkOf, SoloUnit, Unit

__all__ = ["QuerySetPlan", "SinkOf", "SoloUnit", "SoloUnitPlan", "Unit", "UnitPlan", "plan_units"]
