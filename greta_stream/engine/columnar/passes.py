"""Kernel passes: one propagation that serves several queries.

Queries whose pattern, predicates, partitioning and validation are the same
(a *family*) see the same events build the same event graph; those of one
window spec share the per-window aggregates as well. A `PassSpec` is one
kernel pass for them: the union of their aggregate fields, grouped by the
union of their GROUP-BY attributes (all of them partition attributes, so a
partition lies inside one group of every query). Each `Member` reads its
fields from the pass's (`field_of`) and rolls the pass's groups up into its
own (`group_index`), on exact cells, before its rows are finished: every
query's rows are the rows it gives alone, bit for bit.

A query alone is a pass of one member (`single_pass`). Queries whose
patterns differ around one Kleene part share a pass through query lanes
(`lanes`: a `union.UnionPlan`, one traversal with a lane per query; its
`union_pass`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from greta_stream.compiler.compiled import AggField, CompiledQuery
from greta_stream.engine.columnar.plan import KernelPlan, Seconds


@dataclass(frozen=True)
class Member:
    """A query served by a pass: its own compiled query and how it reads the pass."""

    name: str
    cq: CompiledQuery
    field_of: tuple[int, ...]  # the pass's field of each of the query's fields
    group_index: tuple[int, ...]  # the position in the pass's GROUP-BY of each of the query's


@dataclass(frozen=True)
class PassSpec:
    """One kernel pass: the plan of its window spec, the union fields and grouping, its members."""

    plan: KernelPlan
    fields: tuple[AggField, ...]
    group_by: tuple[str, ...]
    members: tuple[Member, ...]
    lanes: Any = None  # a `union.UnionPlan`: one traversal, a lane per member query (its members in order)

    @property
    def window(self) -> tuple[Seconds, Seconds]:
        return self.plan.within, self.plan.slide


def single_pass(plan: KernelPlan, name: str = "") -> PassSpec:
    """The pass of one query alone."""
    cq = plan.cq
    member = Member(name, cq, tuple(range(len(cq.fields))), tuple(range(len(cq.group_by))))
    return PassSpec(plan, cq.fields, cq.group_by, (member,))


def shared_pass(plans: list[tuple[str, KernelPlan]]) -> PassSpec:
    """The pass of several queries of one family and window spec (the first one's plan drives the kernel)."""
    base = plans[0][1]
    alias_of = {i: s.alias for i, s in enumerate(base.states)}
    fields: list[AggField] = []
    group_by: list[str] = []
    members = []
    for name, plan in plans:
        state_of = {s.alias: i for i, s in enumerate(plan.states)}
        field_of, group_index = merged(fields, group_by, plan.cq, {a: alias_of[i] for a, i in state_of.items()})
        members.append(Member(name, plan.cq, field_of, group_index))
    return PassSpec(base, tuple(fields), tuple(group_by), tuple(members))


def merged(fields: list[AggField], group_by: list[str], cq: CompiledQuery,
           alias_of: dict[str, str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Add a query's aggregate fields (its aliases renamed by `alias_of`) and
    GROUP-BY attributes to a pass's, where not there yet: (the pass's field
    of each of its fields, the position of each of its GROUP-BY attributes)."""
    field_of = []
    for f in cq.fields:
        g = AggField(f.kind, alias_of[f.alias], f.attr)
        if g not in fields:
            fields.append(g)
        field_of.append(fields.index(g))
    for a in cq.group_by:
        if a not in group_by:
            group_by.append(a)
    return tuple(field_of), tuple(group_by.index(a) for a in cq.group_by)


def rolled_up(out: Any, member: Member, n_pass_groups: int) -> Any:
    """The kernel output (`driver.KernelOutput`) with the pass's groups mapped
    onto the member's (partial rows of one member group are summed when its
    rows are built)."""
    if member.group_index == tuple(range(n_pass_groups)):
        return out
    # In order of the pass's groups (of their first events): a member group is
    # spelled as its first event spells it, as when the query runs alone; keys
    # compare as the engine's partitions do (1 and 1.0 are one group).
    index: dict[tuple[Any, ...], int] = {}
    codes = np.fromiter((index.setdefault(tuple(v[i] for i in member.group_index), len(index))
                         for v in out.group_values), np.int64, len(out.group_values))
    return replace(out, gids=codes[out.gids], group_values=list(index))
