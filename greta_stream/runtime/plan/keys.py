"""Grouping keys: what queries must share to be evaluated together.

`family_key`: a family (one pattern; window specs and aggregates may differ).
`union_group_key`: a union (patterns around one Kleene part). `validation_plan`
and `validation_key`: what a family's validation asks of each event type, and
how its queries group when they judge a record differently.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from greta_stream.compiler.expressions import format_expr
from greta_stream.engine.columnar import KernelPlan
from greta_stream.engine.columnar.columns import Unsupported
from greta_stream.engine.columnar.plan import State
from greta_stream.engine.columnar.union import union_key
from greta_stream.query import ast
from greta_stream.runtime.spec import RunSpec

STATE_FIELDS = tuple(f for f in dataclasses.fields(State) if f.name != "alias")


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

    def kinds(states: tuple[State, ...]) -> tuple[tuple[Any, ...], ...]:
        # every field of a state but its alias, a field added later too (`State.group`, `State.count`: `NOT
        # SEQ(C, D?, E)` and `NOT SEQ(C, D, E)` match differently)
        return tuple(tuple(getattr(s, f.name) for f in STATE_FIELDS) for s in states)

    def edges(es: tuple[tuple[str, ast.Expr, ast.Expr], ...]) -> tuple[tuple[str, str, str], ...]:
        return tuple((op, canon(x), canon(y)) for op, x, y in es)

    # Validation may differ (one query aggregates an attribute another does not read):
    # the family validates with what any of them asks and splits at the first record
    # they would judge differently (`ColumnarStream._judged`).
    return (
        kinds(plan.states), None if plan.neg is None else plan.neg.type,
        None if plan.trail is None else plan.trail.type, tuple((i, n.type) for i, n in plan.mids),
        tuple((i, kinds(parts)) for i, parts in plan.negseqs), kinds(plan.lead_seq), kinds(plan.trail_seq), plan.loop,
        edges((plan.edge,) if plan.edge else ()), plan.edge_state,
        tuple((sc.src, sc.dst, edges(sc.edges), sc.groups) for sc in plan.scans),
        tuple(sorted((i, canon(e)) for i, e in plan.local)),
        frozenset(plan.part_attrs), spec.fields, spec.lateness_s, spec.max_future_s, spec.time_kind,
        # a stream keeps each query with the queries of its GROUP-BY attributes (the shard
        # slot of spark/layout.py): a family never spans two slots
        tuple(spec.query.group_by), plan.strategy, plan.iterations, plan.counts, plan.skips, plan.loops,
        tuple((index[x], index[y], edges(clause)) for x, y, clause in plan.neg_edges),  # one step's: OR-ed
        plan.value_runs, plan.neg_keys,
    )


# The plan's fields `family_key` holds (all but the query itself and its window spec, which may differ
# within a family): a new field of `KernelPlan` goes in the key or says here why it need not.
FAMILY_FIELDS = frozenset({"states", "neg", "trail", "mids", "negseqs", "lead_seq", "trail_seq", "loop", "edge",
                           "edge_state", "scans", "local", "part_attrs", "strategy", "iterations", "counts",
                           "skips", "loops", "neg_edges", "value_runs", "neg_keys"})
NOT_FAMILY_FIELDS = frozenset({"cq", "within", "slide"})


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


def validation_plan(plans: list[KernelPlan]) -> KernelPlan:
    """The first plan with what every plan's validation asks of each event type: needed
    attributes, and numbers where any query aggregates them."""
    base = plans[0]
    cq = base.cq
    if all(frozen(p.cq.needed_by_type) == frozen(cq.needed_by_type) and
           frozen(p.cq.numeric_by_type) == frozen(cq.numeric_by_type) for p in plans):
        return base
    aliases = {}
    for name, a in cq.aliases.items():
        needed = set().union(*(p.cq.needed_by_type.get(a.type, set()) for p in plans))
        numeric = set().union(*(p.cq.numeric_by_type.get(a.type, set()) for p in plans))
        aliases[name] = dataclasses.replace(a, needed=needed, numeric=numeric)
    return dataclasses.replace(base, cq=dataclasses.replace(cq, aliases=aliases))


def validation_key(spec: RunSpec) -> tuple[Any, ...]:
    """What a query's validation asks (queries of one key judge every record alike)."""
    cq = spec.query
    return frozen(cq.needed_by_type), frozen(cq.numeric_by_type)


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


def frozen(by_type: dict[str, set[str]]) -> tuple[Any, ...]:
    """Attributes by event type, as a comparable value."""
    return tuple(sorted((t, tuple(sorted(v))) for t, v in by_type.items()))
