"""Shared evaluation of columnar queries: families, the planner's cost model, and their unit.

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
or more. Its cost estimate (`plan_union`) counts a vertex as `VERTEX`
lanes plus the lanes its state spans, against each lane's queries apart
(a family of their own, or a query alone). The queries no union takes form
families of one pattern, or run alone.

**Cost model.** Per event, a query alone costs a preparation (validation,
typing, windows: `PREPARE` units) and a kernel pass of `W` windows times its
cells (`1 + cells` limbs per lane, `cell_units`); a family costs one
preparation and one pass per window spec over the union of cells. That
always favours sharing, but streaming adds a cost the batch does not have:
a family keeps every event until its longest window is reported, and each
pass re-reads the kept events whenever one of its windows closes, so a
10-second window next to a 1-day window would re-read a day of events every
10 seconds. So a family only spans window lengths within `MAX_WITHIN_RATIO`
of each other; queries further apart form families of their own (or run
alone). `FamilyUnitPlan.explain()` shows the estimate.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from greta_stream.compiler.expressions import format_expr
from greta_stream.engine import DeadLetter
from greta_stream.engine.columnar import KernelPlan, columnar_plan
from greta_stream.engine.columnar.columns import Unsupported
from greta_stream.engine.columnar.passes import PassSpec, shared_pass, single_pass
from greta_stream.engine.columnar.stream import ColumnarStream, Diverged, handed
from greta_stream.engine.columnar.union import UnionPlan, union_key, union_pass, union_plan
from greta_stream.query import ast
from greta_stream.query.aggregates import FIELD_KINDS
from greta_stream.runtime.queryset import QuerySet, QueryWatermarkOf, run_fingerprint
from greta_stream.runtime.spec import RunSpec

PREPARE = 2.0  # units per event of validating, typing and windowing it (a 1-window COUNT(*) pass is 1)
# A kernel vertex costs about VERTEX + LANE per lane it carries (`bench_sharing.py --lanes`: 6.4 ms + 0.45 ms
# per lane per 9,000 vertices): what one traversal for many queries saves is the vertex part
VERTEX = 14.0  # in lanes
# A query's preparation (reading its events' columns, its local predicates, ranking and sorting its vertices)
# and its rows, in the same lanes: PREP_BASE + PREP_STATE per state (`bench_sharing.py --choices`, 90,000
# events: 4.3 / 7.1 / 9.1 ms for 1 / 2 / 3 states, against 0.4 ms per unit of its kernel's estimate)
PREP_BASE, PREP_STATE = 5.0, 6.0
MAX_WITHIN_RATIO = 4  # a family spans window lengths within this factor (streaming re-reads kept events)
FAMILY_TAG = b"F"  # a family's state in a stream's state, under each of its queries' names


def family_key(spec: RunSpec) -> tuple[Any, ...] | None:
    """What queries must share to be evaluated together (None: not a columnar aggregate query)."""
    plan = spec.columnar
    if spec.mode != "aggregate" or plan is None:
        return None
    index = {s.alias: i for i, s in enumerate(plan.states)}
    index.update({n.alias: plan.state_of_neg(n) for n in plan.negs})
    single = plan.states[0].alias if len(plan.states) == 1 else None

    def canon(e: ast.Expr) -> str:
        return format_expr(_renamed(e, index, single))

    edges = tuple((op, canon(x), canon(y)) for op, x, y in plan.all_edges)
    # Validation may differ (one query aggregates an attribute another does not read):
    # the family validates with what any of them asks and splits at the first record
    # they would judge differently (`ColumnarStream._judged`).
    return (
        tuple((s.type, s.kleene) for s in plan.states), None if plan.neg is None else plan.neg.type,
        None if plan.trail is None else plan.trail.type, tuple((i, n.type) for i, n in plan.mids),
        edges, plan.edge_state, tuple(sorted((i, canon(e)) for i, e in plan.local)),
        frozenset(plan.part_attrs), spec.fields, spec.lateness_s, spec.max_future_s, spec.time_kind,
        # a stream keeps each query with the queries of its GROUP-BY attributes (the shard
        # slot of spark/layout.py): a family never spans two slots
        tuple(spec.query.group_by),
    )


def validation_plan(plans: list[KernelPlan]) -> KernelPlan:
    """The first plan with what every plan's validation asks of each event type: needed
    attributes, and numbers where any query aggregates them."""
    base = plans[0]
    cq = base.cq
    if all(_frozen(p.cq.needed_by_type) == _frozen(cq.needed_by_type) and
           _frozen(p.cq.numeric_by_type) == _frozen(cq.numeric_by_type) for p in plans):
        return base
    aliases = {}
    for name, a in cq.aliases.items():
        needed = set().union(*(p.cq.needed_by_type.get(a.type, set()) for p in plans))
        numeric = set().union(*(p.cq.numeric_by_type.get(a.type, set()) for p in plans))
        aliases[name] = dataclasses.replace(a, needed=needed, numeric=numeric)
    return dataclasses.replace(base, cq=dataclasses.replace(cq, aliases=aliases))


def _renamed(e: ast.Expr, index: dict[str, int], single: str | None) -> ast.Expr:
    """`e` with every alias replaced by its state's number (a query's alias names are its own)."""
    if isinstance(e, ast.AttrRef):
        alias = e.alias if e.alias is not None else single
        return dataclasses.replace(e, alias=f"s{index[alias]}" if alias in index else alias)
    if isinstance(e, ast.Unary):
        return dataclasses.replace(e, operand=_renamed(e.operand, index, single))
    if isinstance(e, ast.Binary):
        return dataclasses.replace(e, left=_renamed(e.left, index, single), right=_renamed(e.right, index, single))
    return e


def _frozen(by_type: dict[str, set[str]]) -> tuple[Any, ...]:
    return tuple(sorted((t, tuple(sorted(v))) for t, v in by_type.items()))


def cell_units(fields: Any) -> float:
    """Limbs per lane of a pass's cells: the trend count, one per COUNT(X), two per SUM, half a MIN/MAX."""
    return 1 + sum(FIELD_KINDS[f.kind] for f in fields)


def _windows(plan: KernelPlan) -> int:
    return math.ceil(plan.within / plan.slide)


@dataclass(frozen=True)
class FamilyUnitPlan:
    """A unit of queries evaluated together (`build` makes its `FamilyUnit`): their
    passes and the cost estimate that chose them. `kind`: "family" (one pattern)
    or "union" (patterns around one Kleene part, a lane per query: `plan_union`)."""

    members: tuple[tuple[str, RunSpec], ...]
    passes: tuple[PassSpec, ...]
    shared_cost: float
    separate_cost: float
    kind: str = "family"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.members)

    def build(self, sink_of: Callable[[str], Callable[[DeadLetter], None]]) -> FamilyUnit:
        return FamilyUnit(self, sink_of)

    def explain(self) -> str:
        what = ("shared family" if self.kind == "family" else
                f"shared union around {_core_text(self.passes[0].lanes)} (patterns differ around it)")
        lines = [f"{what} of {len(self.members)} queries ({', '.join(self.names)}): one preparation, "
                 f"{len(self.passes)} kernel pass(es); estimated cost per event {self.shared_cost:.1f} vs "
                 f"{self.separate_cost:.1f} {'alone' if self.kind == 'family' else 'apart (a family per lane)'}"]
        for p in self.passes:
            lanes = "" if p.lanes is None else f", {p.lanes.nq} lane(s), {_states_text(p.lanes)}"
            lines.append(f"  pass WITHIN {p.plan.within} s SLIDE {p.plan.slide} s: "
                         f"{', '.join(m.name for m in p.members)}; {len(p.fields)} aggregate field(s), "
                         f"GROUP-BY {list(p.group_by) or 'none'}{lanes}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "shared" if self.kind == "family" else "union", "queries": list(self.names),
                "shared_cost": self.shared_cost, "separate_cost": self.separate_cost,
                "passes": [{"within_s": p.plan.within, "slide_s": p.plan.slide,
                            "queries": [m.name for m in p.members], "fields": len(p.fields),
                            "group_by": list(p.group_by),
                            **({} if p.lanes is None else {"lanes": p.lanes.nq, "states": _states(p.lanes)})}
                           for p in self.passes]}


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


def share_families(queries: QuerySet) -> tuple[list[FamilyUnitPlan], list[tuple[str, RunSpec, str]]]:
    """(shared units, solo queries with the reason they run alone). Queries around one Kleene part form
    unions first, a family of them one lane (`share_unions`); the rest form families of one pattern."""
    solos: list[tuple[str, RunSpec, str]] = []
    columnar: list[tuple[str, RunSpec]] = []
    keys: dict[str, Any] = {}
    for name, spec in queries:
        keys[name] = family_key(spec)
        if keys[name] is None:
            solos.append((name, spec, "" if spec.mode == "cet" else f"not columnar: {spec.columnar_refusal}"))
        else:
            columnar.append((name, spec))
    unions, rest = share_unions(columnar)
    in_union = {n for u in unions for n in u.names}
    why = {n: reason for n, _, reason in rest}
    groups: dict[Any, list[tuple[str, RunSpec]]] = {}
    for name, spec in columnar:
        if name not in in_union:
            groups.setdefault(keys[name], []).append((name, spec))
    families: list[FamilyUnitPlan] = []
    for members in groups.values():
        for chunk in _by_window_length(members):
            if len(chunk) == 1:
                name, spec = chunk[0]
                solos.append((name, spec, why.get(name, LONELY)))
                continue
            _if_it_pays(plan_family(chunk), "sharing would cost more than it saves", families, solos)
    return families + unions, solos


LONELY = (f"no other query shares its pattern (with windows within a length ratio of {MAX_WITHIN_RATIO}), "
          "nor its Kleene part, edge predicates, partitioning and window spec")


def union_group_key(spec: RunSpec) -> tuple[Any, ...] | None:
    """What queries must share to be evaluated in one union (None: never)."""
    plan = spec.columnar
    if spec.mode != "aggregate" or plan is None:
        return None
    try:
        key = union_key(plan)
    except Unsupported:
        return None
    return key, spec.fields, spec.lateness_s, spec.max_future_s, spec.time_kind


def share_unions(candidates: list[tuple[str, RunSpec]]) -> tuple[list[FamilyUnitPlan], list[tuple[str, RunSpec, str]]]:
    """Queries grouped into unions around a shared Kleene part where the cost model says it pays: (unions,
    the other queries with the reason they are in none; they may still form families of one pattern)."""
    groups: dict[Any, list[tuple[str, RunSpec]]] = {}
    rest: list[tuple[str, RunSpec, str]] = []
    for name, spec in candidates:
        key = union_group_key(spec)
        if key is None:
            rest.append((name, spec, LONELY))
        else:
            groups.setdefault(key, []).append((name, spec))
    unions: list[FamilyUnitPlan] = []
    for members in groups.values():
        for chunk in _by_window_length(members):
            kept: set[str] = set()
            passes: list[UnionPlan] = []
            for spec_members in _by_window_spec(chunk).values():
                union = union_plan([(n, s.columnar) for n, s in spec_members])  # type: ignore[misc]
                if union.nq == 1:
                    # one lane (a query, or a family's queries) shares no traversal, and its preparation
                    # would keep what every query's local predicates drop: alone, or a family
                    rest += [(n, s, LONELY) for n, s in spec_members]
                    continue
                apart, shared = union_estimates(union)  # each pass weighed on its own (`bench_sharing.py --choices`)
                if shared < apart:
                    kept.update(n for n, _ in spec_members)
                    passes.append(union)
                else:
                    rest += [(n, s, "a union of its window spec's queries would cost more than it saves")
                             for n, s in spec_members]
            if passes:  # every pass pays on its own, so their unit (one preparation) pays too
                unions.append(_union_unit([(n, s) for n, s in chunk if n in kept], passes))
    return unions, rest


def _by_window_spec(members: list[tuple[str, RunSpec]]) -> dict[tuple[int, int], list[tuple[str, RunSpec]]]:
    """Members by window spec (WITHIN, SLIDE), in their order."""
    out: dict[tuple[int, int], list[tuple[str, RunSpec]]] = {}
    for name, spec in members:
        plan = spec.columnar
        assert plan is not None
        out.setdefault((plan.within, plan.slide), []).append((name, spec))
    return out


def _if_it_pays(unit: FamilyUnitPlan, why_not: str, shared: list[FamilyUnitPlan],
                solos: list[tuple[str, RunSpec, str]]) -> None:
    """The unit among the shared ones where its estimate is below its queries' alone, else its queries alone."""
    if unit.shared_cost < unit.separate_cost:
        shared.append(unit)
    else:
        solos += [(n, s, why_not) for n, s in unit.members]


def plan_union(members: list[tuple[str, RunSpec]]) -> FamilyUnitPlan:
    """The union passes of queries of one `union_group_key` (one per window spec) and their cost estimate."""
    return _union_unit(members, [union_plan([(n, s.columnar) for n, s in spec_members])  # type: ignore[misc]
                                 for spec_members in _by_window_spec(members).values()])


def _union_unit(members: list[tuple[str, RunSpec]], unions: list[UnionPlan]) -> FamilyUnitPlan:
    """The unit of union passes `unions` (of `members`) and their cost estimate per event, counting each
    state as one event type: a preparation costs PREP_BASE plus PREP_STATE per state, a vertex VERTEX plus
    its lanes."""
    separate = sum(union_estimates(u)[0] for u in unions)
    shared = PREP_BASE + sum(_union_cost(u) for u in unions)
    return FamilyUnitPlan(tuple(members), tuple(union_pass(u) for u in unions), shared, separate, kind="union")


def union_estimates(union: UnionPlan) -> tuple[float, float]:
    """One union pass's estimates per event: its lanes apart (each lane's queries as a family of their own,
    or a query alone), and the union (`plan_union`'s model)."""
    return sum(_lane_cost(union, lane) for lane in range(union.nq)), PREP_BASE + _union_cost(union)


def _lane_cost(union: UnionPlan, lane: int) -> float:
    """A union lane's queries apart from the union: one preparation and pass with their fields' cells."""
    members = [m for m in union.members if m.lane == lane]
    plan = members[0].plan
    cells = cell_units({union.fields[j] for m in members for j in m.field_of})
    return PREP_BASE + len(plan.states) * (PREP_STATE + VERTEX + _windows(plan) * cells)


def _union_cost(union: UnionPlan) -> float:
    """A union pass per event but the preparation's fixed part: each state's preparation and vertices, with
    the lanes of its queries' range (`UnionPlan.qlo`)."""
    lanes = _windows(union.plan) * cell_units(union.fields)
    return sum(PREP_STATE + VERTEX + lanes * int(hi - lo) for lo, hi in zip(union.qlo, union.qhi))


def _by_window_length(members: list[tuple[str, RunSpec]]) -> list[list[tuple[str, RunSpec]]]:
    """Members cut into runs of window lengths within MAX_WITHIN_RATIO (shortest first)."""
    ordered = sorted(members, key=lambda m: m[1].columnar.within)  # type: ignore[union-attr]
    chunks: list[list[tuple[str, RunSpec]]] = []
    for m in ordered:
        if chunks and m[1].columnar.within <= MAX_WITHIN_RATIO * chunks[-1][0][1].columnar.within:  # type: ignore[union-attr]
            chunks[-1].append(m)
        else:
            chunks.append([m])
    order = {n: i for i, (n, _) in enumerate(members)}
    return [sorted(c, key=lambda m: order[m[0]]) for c in chunks]


def plan_family(members: list[tuple[str, RunSpec]]) -> FamilyUnitPlan:
    """The passes of a family (one per window spec) and its cost estimate."""
    separate = 0.0
    for _, spec in members:
        assert spec.columnar is not None
        separate += PREPARE + _windows(spec.columnar) * cell_units(spec.query.fields)
    passes = tuple(shared_pass([(n, s.columnar) for n, s in spec_members])  # type: ignore[misc]
                   for spec_members in _by_window_spec(members).values())
    shared = PREPARE + sum(_windows(p.plan) * cell_units(p.fields) for p in passes)
    return FamilyUnitPlan(tuple(members), passes, shared, separate)


class FamilyUnit:
    """A family inside a `MultiRunner`: its queries on one `ColumnarStream`.

    After a restart with another query set, its queries may come back from
    different states: those saved together continue together, a query saved
    alone continues alone, and queries with no state start together anew
    (they must not see the events the others kept). Each group is a *part*.
    """

    def __init__(self, plan: FamilyUnitPlan, sink_of: Callable[[str], Callable[[DeadLetter], None]]) -> None:
        self.plan = plan
        self.specs = dict(plan.members)
        self.sinks = {name: sink_of(name) for name in plan.names}
        self.parts: list[tuple[tuple[str, ...], ColumnarStream]] = [(plan.names, self._stream(plan.names))]

    @property
    def names(self) -> tuple[str, ...]:
        return self.plan.names

    def _passes(self, names: tuple[str, ...]) -> list[PassSpec]:
        if len(names) == 1:
            return [single_pass(self.specs[names[0]].columnar, names[0])]  # type: ignore[arg-type]
        if names == self.plan.names:  # the planner's own passes (a part of them after a restart is planned anew)
            return list(self.plan.passes)
        plan = plan_union if self.plan.kind == "union" else plan_family
        return list(plan([(n, self.specs[n]) for n in names]).passes)

    def _stream(self, names: tuple[str, ...], blob: bytes | None = None) -> ColumnarStream:
        passes = self._passes(names)
        spec = self.specs[names[0]]
        sinks = [self.sinks[n] for n in names]

        def fan_out(dl: DeadLetter) -> None:  # every query of the family judges every record alike
            for sink in sinks:
                sink(dl)

        plans = [self.specs[n].columnar for n in names]
        if self.plan.kind == "union" and len(names) > 1:  # every member's types and what each asks of them
            validation = union_plan(list(zip(names, plans))).plan  # type: ignore[arg-type]
        else:
            validation = validation_plan(plans)  # type: ignore[arg-type]
        kw: dict[str, Any] = {"fields": spec.fields, "dead_letter": fan_out, "threads": spec.kernel_threads,
                              "validation": validation}
        stream = ColumnarStream(passes, **kw) if blob is None else ColumnarStream.restore(passes, blob, **kw)
        stream.member_sinks = {n: self.sinks[n] for n in names}
        stream.dead_letter = fan_out
        return spec.armed(stream)

    def _spec(self, names: tuple[str, ...]) -> RunSpec:
        return self.specs[names[0]]  # the family's lateness and fields are its queries'

    def expect(self, watermark_of: QueryWatermarkOf) -> None:
        for names, stream in self.parts:
            stream.expect(watermark_of(self._spec(names), stream.time_kind))

    def add_many(self, records: Any, watermark_of: QueryWatermarkOf | None) -> None:
        parts = []
        for names, stream in self.parts:
            spec = self._spec(names)
            of = (lambda kind, spec=spec: watermark_of(spec, kind)) if watermark_of else None
            try:
                stream.add_many(handed(stream, records), of)
                parts.append((names, stream))
            except Diverged:  # its queries judge a record differently: one part per validation from now on
                for sub_names, sub in self._split(names, stream):
                    sub.add_many(handed(sub, records), of)
                    parts.append((sub_names, sub))
        self.parts = parts

    def _split(self, names: tuple[str, ...], stream: ColumnarStream) -> list[tuple[tuple[str, ...], ColumnarStream]]:
        """The part's queries grouped by their own validation, each group on the part's state."""
        blob = stream.snapshot()
        groups: dict[Any, list[str]] = {}
        for n in names:
            cq = self.specs[n].query
            groups.setdefault((_frozen(cq.needed_by_type), _frozen(cq.numeric_by_type)), []).append(n)
        return [(tuple(g), self._stream(tuple(g), blob)) for g in groups.values()]

    def advance(self, watermark_of: QueryWatermarkOf) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        for names, stream in self.parts:
            out += stream.advance_members(watermark_of(self._spec(names), stream.time_kind))
        return out

    @property
    def idle(self) -> bool:
        return all(stream.idle for _, stream in self.parts)

    def next_window_ends(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for _, stream in self.parts:
            out.update(stream.next_window_ends())
        return out

    def time_kinds(self) -> dict[str, str | None]:
        return {n: stream.time_kind for names, stream in self.parts for n in names}

    def engines(self) -> dict[str, tuple[str, str | None]]:
        return {n: stream.engine_ran for names, stream in self.parts for n in names}

    def metrics(self) -> dict[str, dict[str, int]]:
        return {n: stream.member_metrics(n) for names, stream in self.parts for n in names}

    def snapshot(self) -> dict[str, tuple[str, bytes]]:
        out: dict[str, tuple[str, bytes]] = {}
        for names, stream in self.parts:
            if stream.idle:
                continue
            if isinstance(stream, _Solo):
                blob = self.specs[names[0]].snapshot(stream.runner)
            else:
                blob = FAMILY_TAG + stream.snapshot()  # one object under every name: pickled once
            for n in names:
                out[n] = (run_fingerprint(self.specs[n]), blob)
        return out

    def restore(self, saved: dict[str, tuple[str, bytes]]) -> None:
        together: dict[int, list[str]] = {}
        blobs: dict[int, bytes] = {}
        fresh: list[str] = []
        for n in self.names:
            entry = saved.get(n)
            if entry is None or entry[0] != run_fingerprint(self.specs[n]):
                fresh.append(n)
                continue
            together.setdefault(id(entry[1]), []).append(n)
            blobs[id(entry[1])] = entry[1]
        parts = []
        for key, names in together.items():
            blob = blobs[key]
            if blob[:1] == FAMILY_TAG:
                parts.append((tuple(names), self._stream(tuple(names), blob[1:])))
            else:  # saved alone (a runner of its own): one part each
                for n in names:
                    parts.append(((n,), _as_stream(self.specs[n].restore(blob, dead_letter=self.sinks[n]), n)))
        if fresh:
            parts.append((tuple(fresh), self._stream(tuple(fresh))))
        self.parts = parts


def _as_stream(runner: Any, name: str) -> Any:
    """A query restored alone, as a part of a family (a columnar stream, or a runner that answers alike)."""
    if isinstance(runner, ColumnarStream):
        member = runner.passes[0].members[0]
        runner.passes[0] = dataclasses.replace(runner.passes[0], members=(dataclasses.replace(member, name=name),))
        return runner
    return _Solo(runner, name)


class _Solo:
    """A general engine in the place of a family part (a query whose saved state is a general engine's)."""

    def __init__(self, runner: Any, name: str) -> None:
        self.runner, self.name = runner, name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.runner, attr)

    def advance_members(self, watermark: Any) -> list[tuple[str, dict[str, Any]]]:
        return [(self.name, row) for row in self.runner.advance(watermark)]

    def next_window_ends(self) -> dict[str, Any]:
        end = self.runner.next_window_end()
        return {} if end is None else {self.name: end}

    def member_metrics(self, name: str) -> dict[str, int]:
        return dict(self.runner.metrics)



def restore_alone(spec: RunSpec, name: str, blob: bytes, sink: Callable[[DeadLetter], None]) -> Any:
    """A query planned alone whose saved state is its family's: a columnar stream of it alone."""
    plan = spec.columnar or columnar_plan(spec.query)
    stream = ColumnarStream.restore([single_pass(plan, name)], blob[1:], fields=spec.fields, dead_letter=sink,
                                    threads=spec.kernel_threads)
    stream.member_sinks = {name: sink}
    return spec.armed(stream)
