"""The planner's one cost model (runtime/plan/cost.py): a family is priced as a union of one lane."""

from __future__ import annotations

from runtime_support import spec_of, template

from greta_stream import QuerySet, RunSpec
from greta_stream.engine.columnar.union import union_plan
from greta_stream.runtime.plan import COST, plan_family, plan_union, plan_units


def _members(picks: list[int]) -> list[tuple[str, RunSpec]]:
    return [(f"q{i}", spec_of(template(i), 0)) for i in picks]


def test_a_family_pass_costs_what_the_same_queries_cost_as_a_one_lane_union() -> None:
    """Queries equal but for their aggregates: their union has one lane, and the model prices the family's pass
    and that union's pass alike, and the family's queries alone as that lane alone."""
    members = _members([0, 18])  # COUNT(*) and the same with AVG(S.price): one window spec
    family = plan_family(members)
    union = union_plan([(n, s.columnar) for n, s in members if s.columnar is not None])
    assert union.nq == 1 and len(family.passes) == 1
    assert family.shared_cost == COST.unit([COST.union_pass(union)])
    assert COST.family_pass(family.passes[0]) == COST.union_pass(union)
    plans = {n: s.columnar for n, s in members if s.columnar is not None}
    alone = [COST.alone(plans[n], s.query.fields) for n, s in members]
    assert family.separate_cost == sum(alone)
    assert COST.union_lanes_alone(union) == COST.alone(plans["q0"], {f for _, s in members for f in s.query.fields})


def test_a_unit_saves_the_preparations_of_its_queries_and_shows_both_estimates() -> None:
    """A family of n queries of one window spec costs one preparation where its queries alone cost n; explain
    prints both estimates of the one model."""
    picks = [0, 1, 18, 19]  # one grouping; two window specs of lengths within 4x, aggregates that differ
    members = _members(picks)
    family = plan_family(members)
    assert family.shared_cost < family.separate_cost
    assert family.separate_cost - sum(COST.family_pass(p) for p in family.passes) >= len(picks) * COST.prep_base
    text = plan_units(QuerySet.of(members)).explain()
    assert f"estimated cost per event {family.shared_cost:.1f} vs {family.separate_cost:.1f} alone" in text


def test_a_union_is_one_preparation_and_one_traversal_whose_core_spans_its_lanes() -> None:
    """Patterns that differ around one Kleene part: a unit of one preparation whose pass spans both lanes at
    the core state; apart, each lane pays its own preparation and traversal."""
    texts = ["RETURN sector, COUNT(*) PATTERN Stock S+ WHERE [sector] AND S.price < NEXT(S).price GROUP-BY sector "
             "WITHIN 20 s SLIDE 10 s",
             "RETURN sector, SUM(S.price) PATTERN SEQ(Halt H, Stock S+) WHERE [sector] AND S.price < NEXT(S).price "
             "GROUP-BY sector WITHIN 20 s SLIDE 10 s"]
    members = [(f"q{i}", RunSpec.create(t)) for i, t in enumerate(texts)]
    unit = plan_union(members)
    (union,) = [p.lanes for p in unit.passes]
    assert union is not None and union.nq == 2
    assert [int(hi - lo) for lo, hi in zip(union.qlo, union.qhi, strict=True)] == [2, 1]  # core, Halt before it
    assert unit.shared_cost == COST.unit([COST.union_pass(union)])
    assert unit.separate_cost == sum(COST.alone(s.columnar, s.query.fields) for _, s in members if s.columnar)
    assert unit.shared_cost < unit.separate_cost
