"""The sharing planner: which queries of a stream are evaluated together, and its cost model.

`plan_units(queries)` cuts a `QuerySet` into *unit plans*, each evaluated by
one piece of work per micro-batch (the run-time units of
`greta_stream.runtime.units`): a `SoloUnitPlan` runs one query on its own
runner (`RunSpec.build`); a `FamilyUnitPlan` runs a family or a union of
columnar queries together. `QuerySetPlan.explain()` prints the plan
(`greta_stream.runtime.plan.explain`).

**Families.** Queries whose patterns, predicates, partitioning, lateness
and GROUP-BY attributes are the same (`family_key`: alias names do not
matter; window specs and aggregates may differ) see the same events build
the same event graph (a stream shards each query by its own GROUP-BY
attributes, so only queries of the same ones meet in a shard). Their validation may differ (an aggregate makes an attribute
needed and numeric): a family validates with everything any of its queries
asks, gives each query its own wording of a rejection, and splits by
validation at the first record its queries would judge differently. A family is evaluated by one `ColumnarStream` with one
kernel pass per window spec (`greta_stream.engine.columnar.passes`): the
events are validated, typed and kept once; a pass computes the union of its
queries' aggregates per group of the union of their GROUP-BY attributes,
and each query rolls that up into its own rows, on exact values.

**Unions.** Queries whose patterns differ around one Kleene part (the
same type, edge predicates, partitioning, slide, GROUP-BY and lateness:
`union_group_key`) form a union (`share_unions`) before families are
formed: a family unit whose passes carry a lane per query
(`engine/columnar/union.py`; a family's queries, equal in all but their
aggregates, share one lane), one pass per window spec that has two lanes
or more, where the union costs less than each lane's queries apart (a
family of their own, or a query alone). The queries no union takes form
families of one pattern, or run alone.

**Cost model.** One model (`plan.cost.CostModel`) prices every unit: a
preparation per event, then per pass and state a vertex and its lanes (a
family's pass is a union of one lane). That always favours a family, but
streaming adds a cost the batch does not have: a family keeps every event
until its longest window is reported, and each pass re-reads the kept events
whenever one of its windows closes, so a 10-second window next to a 1-day
window would re-read a day of events every 10 seconds. So a unit only spans
window lengths within `MAX_WITHIN_RATIO` of each other; queries further
apart form units of their own (or run alone). `FamilyUnitPlan.explain()`
shows the estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from greta_stream.engine.columnar import KernelPlan
from greta_stream.engine.columnar.passes import PassSpec, shared_pass
from greta_stream.engine.columnar.union import UnionPlan, union_pass, union_plan
from greta_stream.runtime.plan import explain
from greta_stream.runtime.plan.cost import COST
from greta_stream.runtime.plan.keys import family_key, union_group_key
from greta_stream.runtime.queryset import QuerySet
from greta_stream.runtime.spec import RunSpec

if TYPE_CHECKING:
    from greta_stream.runtime.units import FamilyUnit, SinkOf, SoloUnit, Unit

MAX_WITHIN_RATIO = 4  # a family spans window lengths within this factor (streaming re-reads kept events)

LONELY = (f"no other query shares its pattern (with windows within a length ratio of {MAX_WITHIN_RATIO}), "
          "nor its Kleene part, edge predicates, partitioning and window spec")

Member = tuple[str, RunSpec]  # a query of a unit: its name and run spec


class Candidate(NamedTuple):
    """A query the planner left out of the units it formed, and why (it may run alone)."""

    name: str
    spec: RunSpec
    reason: str


class UnitPlan(Protocol):
    """What every unit plan offers: its queries, the run-time unit it builds, its explain."""

    @property
    def names(self) -> tuple[str, ...]: ...

    def build(self, sink_of: SinkOf) -> Unit: ...

    def explain(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SoloUnitPlan:
    """A unit of one query on its own runner (`build` makes its `SoloUnit`)."""

    name: str
    spec: RunSpec
    why: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,)

    def build(self, sink_of: SinkOf) -> SoloUnit:
        from greta_stream.runtime.units import SoloUnit

        return SoloUnit(self.name, self.spec, sink_of(self.name))

    def explain(self) -> str:
        return explain.solo_text(self)

    def to_dict(self) -> dict[str, Any]:
        return explain.solo_dict(self)


@dataclass(frozen=True)
class FamilyUnitPlan:
    """A unit of queries evaluated together (`build` makes its `FamilyUnit`): their
    passes and the cost estimate that chose them. `kind`: "family" (one pattern)
    or "union" (patterns around one Kleene part, a lane per query: `plan_union`)."""

    members: tuple[Member, ...]
    passes: tuple[PassSpec, ...]
    shared_cost: float
    separate_cost: float
    kind: str = "family"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.members)

    def build(self, sink_of: SinkOf) -> FamilyUnit:
        from greta_stream.runtime.units import FamilyUnit

        return FamilyUnit(self, sink_of)

    def replan(self, names: tuple[str, ...]) -> FamilyUnitPlan:
        """The plan of some of its queries (a part of them, after a restart), of its kind."""
        specs = dict(self.members)
        return (plan_union if self.kind == "union" else plan_family)([(n, specs[n]) for n in names])

    def explain(self) -> str:
        return explain.family_text(self)

    def to_dict(self) -> dict[str, Any]:
        return explain.family_dict(self)


@dataclass(frozen=True)
class QuerySetPlan:
    """How a query set is run: its units (`SoloUnitPlan`s and shared `FamilyUnitPlan`s)."""

    queries: QuerySet
    units: tuple[UnitPlan, ...]

    def explain(self) -> str:
        return explain.query_set_text(self)

    def to_dict(self) -> dict[str, Any]:
        return explain.query_set_dict(self)


def plan_units(queries: QuerySet) -> QuerySetPlan:
    """The units of `queries`: shared families where sharing pays, solo runners for the rest."""
    if queries.sharing:
        families, solos = share_families(queries)
    else:
        families, solos = [], [Candidate(name, spec, "sharing is off") for name, spec in queries]
    units: list[UnitPlan] = list(families)
    units += [SoloUnitPlan(c.name, c.spec, c.reason) for c in solos]
    order = {n: i for i, n in enumerate(queries.names)}
    units.sort(key=lambda u: min(order[n] for n in u.names))
    return QuerySetPlan(queries, tuple(units))


def share_families(queries: QuerySet) -> tuple[list[FamilyUnitPlan], list[Candidate]]:
    """(shared units, solo queries with the reason they run alone). Queries around one Kleene part form
    unions first, a family of them one lane (`share_unions`); the rest form families of one pattern."""
    solos: list[Candidate] = []
    columnar: list[Member] = []
    keys: dict[str, Any] = {}
    for name, spec in queries:
        keys[name] = family_key(spec)
        if keys[name] is None:
            solos.append(Candidate(name, spec, "" if spec.mode == "cet" else f"not columnar: {spec.columnar_refusal}"))
        else:
            columnar.append((name, spec))
    unions, rest = share_unions(columnar)
    in_union = {n for u in unions for n in u.names}
    why = {c.name: c.reason for c in rest}
    groups: dict[Any, list[Member]] = {}
    for name, spec in columnar:
        if name not in in_union:
            groups.setdefault(keys[name], []).append((name, spec))
    families: list[FamilyUnitPlan] = []
    for members in groups.values():
        for chunk in _by_window_length(members):
            if len(chunk) == 1:
                name, spec = chunk[0]
                solos.append(Candidate(name, spec, why.get(name, LONELY)))
                continue
            _if_it_pays(plan_family(chunk), "sharing would cost more than it saves", families, solos)
    return families + unions, solos


def share_unions(candidates: list[Member]) -> tuple[list[FamilyUnitPlan], list[Candidate]]:
    """Queries grouped into unions around a shared Kleene part where the cost model says it pays: (unions,
    the other queries with the reason they are in none; they may still form families of one pattern)."""
    groups: dict[Any, list[Member]] = {}
    rest: list[Candidate] = []
    for name, spec in candidates:
        key = union_group_key(spec)
        if key is None:
            rest.append(Candidate(name, spec, LONELY))
        else:
            groups.setdefault(key, []).append((name, spec))
    unions: list[FamilyUnitPlan] = []
    for members in groups.values():
        for chunk in _by_window_length(members):
            kept: set[str] = set()
            passes: list[UnionPlan] = []
            for spec_members in _by_window_spec(chunk).values():
                union = union_plan(_plans(spec_members))
                if union.nq == 1:
                    # one lane (a query, or a family's queries) shares no traversal, and its preparation
                    # would keep what every query's local predicates drop: alone, or a family
                    rest += [Candidate(n, s, LONELY) for n, s in spec_members]
                    continue
                apart, shared = union_estimates(union)  # each pass weighed on its own (`bench_sharing.py --choices`)
                if shared < apart:
                    kept.update(n for n, _ in spec_members)
                    passes.append(union)
                else:
                    rest += [Candidate(n, s, "a union of its window spec's queries would cost more than it saves")
                             for n, s in spec_members]
            if passes:  # every pass pays on its own, so their unit (one preparation) pays too
                unions.append(_union_unit([(n, s) for n, s in chunk if n in kept], passes))
    return unions, rest


def _plans(members: list[Member]) -> list[tuple[str, KernelPlan]]:
    """Each member's name and columnar plan (members of a unit are columnar)."""
    return [(n, s.columnar) for n, s in members]  # type: ignore[misc]


def _within(member: Member) -> int | Fraction:
    plan = member[1].columnar
    assert plan is not None
    return plan.within


def _by_window_spec(members: list[Member]) -> dict[tuple[int | Fraction, int | Fraction], list[Member]]:
    """Members by window spec (WITHIN, SLIDE), in their order."""
    out: dict[tuple[int | Fraction, int | Fraction], list[Member]] = {}
    for name, spec in members:
        plan = spec.columnar
        assert plan is not None
        out.setdefault((plan.within, plan.slide), []).append((name, spec))
    return out


def _by_window_length(members: list[Member]) -> list[list[Member]]:
    """Members cut into runs of window lengths within MAX_WITHIN_RATIO (shortest first)."""
    ordered = sorted(members, key=_within)
    chunks: list[list[Member]] = []
    for m in ordered:
        if chunks and _within(m) <= MAX_WITHIN_RATIO * _within(chunks[-1][0]):
            chunks[-1].append(m)
        else:
            chunks.append([m])
    order = {n: i for i, (n, _) in enumerate(members)}
    return [sorted(c, key=lambda m: order[m[0]]) for c in chunks]


def _if_it_pays(unit: FamilyUnitPlan, why_not: str, shared: list[FamilyUnitPlan], solos: list[Candidate]) -> None:
    """The unit among the shared ones where its estimate is below its queries' alone, else its queries alone."""
    if unit.shared_cost < unit.separate_cost:
        shared.append(unit)
    else:
        solos += [Candidate(n, s, why_not) for n, s in unit.members]


def plan_family(members: list[Member]) -> FamilyUnitPlan:
    """The passes of a family (one per window spec, each a one-lane union) and its cost estimate."""
    separate = 0.0
    for _, spec in members:
        assert spec.columnar is not None
        separate += COST.alone(spec.columnar, spec.query.fields)
    passes = tuple(shared_pass(_plans(spec_members)) for spec_members in _by_window_spec(members).values())
    return FamilyUnitPlan(tuple(members), passes, COST.unit(COST.family_pass(p) for p in passes), separate)


def plan_union(members: list[Member]) -> FamilyUnitPlan:
    """The union passes of queries of one `union_group_key` (one per window spec) and their cost estimate."""
    return _union_unit(members, [union_plan(_plans(spec_members))
                                 for spec_members in _by_window_spec(members).values()])


def _union_unit(members: list[Member], unions: list[UnionPlan]) -> FamilyUnitPlan:
    """The unit of union passes `unions` (of `members`) and its cost estimate per event."""
    separate = sum(COST.union_lanes_alone(u) for u in unions)
    shared = COST.unit(COST.union_pass(u) for u in unions)
    return FamilyUnitPlan(tuple(members), tuple(union_pass(u) for u in unions), shared, separate, kind="union")


def union_estimates(union: UnionPlan) -> tuple[float, float]:
    """One union pass's estimates per event: its lanes apart (each lane's queries as a family of their own,
    or a query alone), and the union as a unit of its own."""
    return COST.union_lanes_alone(union), COST.unit([COST.union_pass(union)])
