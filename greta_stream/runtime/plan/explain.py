"""A plan's explain: the text `greta-stream explain` prints and its dict (`--json`, the service).

Each unit plan's `explain()` and `to_dict()` (`greta_stream.runtime.plan.planner`) are these.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from greta_stream.engine.columnar.union import UnionPlan

if TYPE_CHECKING:
    from greta_stream.runtime.plan.planner import FamilyUnitPlan, QuerySetPlan, SoloUnitPlan


def query_set_text(plan: QuerySetPlan) -> str:
    nq, nu = len(plan.queries), len(plan.units)
    head = (f"{nq} quer{'y' if nq == 1 else 'ies'} in {nu} unit{'' if nu == 1 else 's'}; each query shards by "
            "its own GROUP-BY "
            f"attributes and keeps its own lateness; each micro-batch is read once for all of them")
    return "\n".join([head, *(u.explain() for u in plan.units)])


def query_set_dict(plan: QuerySetPlan) -> dict[str, Any]:
    return {"queries": list(plan.queries.names),
            "shard_attributes": {name: list(spec.query.group_by) for name, spec in plan.queries},
            "lateness_s": {name: spec.lateness_s for name, spec in plan.queries},
            "units": [u.to_dict() for u in plan.units]}


def solo_text(unit: SoloUnitPlan) -> str:
    why = f" ({unit.why})" if unit.why else ""
    return f"solo {unit.name}: {unit.spec.runner_kind} runner{why}"


def solo_dict(unit: SoloUnitPlan) -> dict[str, Any]:
    return {"kind": "solo", "queries": list(unit.names), "runner": unit.spec.runner_kind, "why": unit.why}


def family_text(unit: FamilyUnitPlan) -> str:
    what = ("shared family" if unit.kind == "family" else
            f"shared union around {_core_text(unit.passes[0].lanes)} (patterns differ around it)")
    lines = [f"{what} of {len(unit.members)} queries ({', '.join(unit.names)}): one preparation, "
             f"{len(unit.passes)} kernel pass(es); estimated cost per event {unit.shared_cost:.1f} vs "
             f"{unit.separate_cost:.1f} {'alone' if unit.kind == 'family' else 'apart (a family per lane)'}"]
    for p in unit.passes:
        lanes = "" if p.lanes is None else f", {p.lanes.nq} lane(s), {_states_text(p.lanes)}"
        lines.append(f"  pass WITHIN {_seconds(p.plan.within)} s SLIDE {_seconds(p.plan.slide)} s: "
                     f"{', '.join(m.name for m in p.members)}; {len(p.fields)} aggregate field(s), "
                     f"GROUP-BY {list(p.group_by) or 'none'}{lanes}")
    return "\n".join(lines)


def family_dict(unit: FamilyUnitPlan) -> dict[str, Any]:
    return {"kind": "shared" if unit.kind == "family" else "union", "queries": list(unit.names),
            "shared_cost": unit.shared_cost, "separate_cost": unit.separate_cost,
            "passes": [{"within_s": _seconds(p.plan.within), "slide_s": _seconds(p.plan.slide),
                        "queries": [m.name for m in p.members], "fields": len(p.fields),
                        "group_by": list(p.group_by),
                        **({} if p.lanes is None else {"lanes": p.lanes.nq, "states": _states(p.lanes)})}
                       for p in unit.passes]}


def _seconds(x: int | Fraction) -> int | float:
    """A window length in seconds as JSON and text show it: an int when whole (300), else a decimal (5.5)."""
    return int(x) if x == int(x) else float(x)


def _core_text(union: UnionPlan) -> str:
    return f"{union.plan.states[0].type}+"


def _states(union: UnionPlan) -> list[dict[str, Any]]:
    """Each state of a union's traversal: its type and the queries that have it."""
    def side(i: int) -> str:
        m = next(m for m in union.members if i in m.states)
        return "core" if i == 0 else "before" if m.states.index(i) < m.states.index(0) else "after"

    return [{"type": s.type, "kleene": s.kleene, "side": side(i),
             "queries": [m.name for m in union.members if i in m.states]} for i, s in enumerate(union.plan.states)]


def _states_text(union: UnionPlan) -> str:
    return "states " + ", ".join(
        f"{s['type']}{'+' if s['kleene'] else ''}{'' if s['side'] == 'core' else ' ' + s['side']} "
        f"({len(s['queries'])} quer{'y' if len(s['queries']) == 1 else 'ies'})" for s in _states(union))
