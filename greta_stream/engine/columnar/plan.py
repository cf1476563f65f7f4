"""Which queries the columnar engine covers, and its kernel's plan of one (`columnar_plan`).

A single Kleene pattern `X+` (nested `+` included) or a SEQ of distinct
event types, each once or Kleene, with an optional leading `NOT` of one
event; partitions by any GROUP-BY and equivalence attributes; at most one
edge predicate, a comparison `f(X) op g(NEXT(X))` of a Kleene alias; local
predicates; whole-second windows. Anything else raises `Unsupported` saying
why, and the caller runs the general engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.compiler.expressions import edge_sides
from greta_stream.engine.columnar.columns import Unsupported
from greta_stream.query import ast


@dataclass(frozen=True)
class State:
    """One position of the pattern: an event type under an alias, once or Kleene."""

    alias: str
    type: str
    kleene: bool


@dataclass(frozen=True)
class KernelPlan:
    """How the columnar kernel evaluates a query it covers: the pattern's states
    (and `stores`, the kernel's wiring), its predicates, partition attributes and
    window spec. Preparation, keys and cells make the kernel's input from it; a
    kernel pass (`passes.PassSpec`) runs one."""

    cq: CompiledQuery
    states: tuple[State, ...]  # SEQ order; one state for `X+`
    edge: tuple[str, ast.Expr, ast.Expr] | None  # (op, predecessor side, new event side)
    edge_state: int  # the Kleene state the edge predicate links to itself (-1: none)
    within: int
    slide: int
    local: tuple[tuple[int, ast.Expr], ...] = ()  # (state, local predicate), AND-ed; len(states): the NOT's
    neg: State | None = None  # the leading `NOT N` of `SEQ(NOT N, ...)`, one event
    part_attrs: tuple[str, ...] = ()  # partition attributes of the positive events (common ones first)

    @property
    def types(self) -> tuple[str, ...]:
        """Types of the positive states, then the negated one."""
        return tuple(s.type for s in self.states) + ((self.neg.type,) if self.neg else ())

    @property
    def neg_state(self) -> int:
        """The state number the negated events get."""
        return len(self.states)

    def stores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """The kernel's wiring: (start, final, store_src, reads, keyed store);
        see `kernel.run`. A Kleene state reads its own vertices (by the
        index when the edge predicate is its), every later state the running
        total of the state before it."""
        n = len(self.states)
        src: list[int] = []
        keyed = -1
        total: dict[int, int] = {}  # state -> its running-total store
        reads: list[tuple[int, int]] = []
        for i, state in enumerate(self.states):
            if state.kleene:
                src.append(i)
                if i == self.edge_state:
                    keyed = len(src) - 1
                else:
                    total[i] = len(src) - 1
                reads.append((i, len(src) - 1))
        for i in range(1, n):
            if i - 1 not in total:
                src.append(i - 1)
                total[i - 1] = len(src) - 1
            reads.append((i, total[i - 1]))
        start = np.zeros(n, np.bool_)
        start[0] = True
        final = np.zeros(n, np.bool_)
        final[n - 1] = True
        table = np.zeros((n, len(src)), np.bool_)
        for i, j in reads:
            table[i, j] = True
        return start, final, np.array(src, np.int64), table, keyed


def columnar_plan(cq: CompiledQuery) -> KernelPlan:
    """The plan, or `Unsupported` saying why the query needs the general engine."""
    q = cq.query
    if q.trends:
        raise Unsupported("RETURN TRENDS")
    parts = q.pattern.parts if isinstance(q.pattern, ast.Seq) else (q.pattern,)
    neg = None
    if isinstance(parts[0], ast.Not):  # leading NOT of one event: a bound on where trends may start
        if not isinstance(parts[0].inner, ast.EventPattern):
            raise Unsupported("a leading NOT of more than one event")
        neg = State(parts[0].inner.alias, parts[0].inner.type, False)
        parts = parts[1:]
    states = []
    for part in parts:
        kleene = isinstance(part, ast.Kleene)
        while isinstance(part, ast.Kleene):
            part = part.inner
        if isinstance(part, ast.Not):
            raise Unsupported("negation")
        if not isinstance(part, ast.EventPattern):
            raise Unsupported("a Kleene plus or SEQ over more than one event type")
        states.append(State(part.alias, part.type, kleene))
    every = [*states, *([neg] if neg else [])]
    if len({s.type for s in every}) < len(every):
        raise Unsupported("one event type at several positions of the pattern")
    positive = frozenset(s.alias for s in states)
    run_attrs = []
    for c in cq.run_components:  # `[P.vehicle]`: a partition attribute of the positive events only
        if not positive <= c.aliases or (neg is not None and neg.alias in c.aliases):
            raise Unsupported("equivalence attributes of some positive aliases only")
        run_attrs.append(c.attr)
    index = {s.alias: i for i, s in enumerate(every)}

    def state_of(e: ast.Expr) -> int:
        aliases = {r.alias for r in ast.expr_refs(e)}
        if None in aliases and len(states) == 1:
            aliases = (aliases - {None}) | {states[0].alias}
        alias = aliases.pop() if len(aliases) == 1 else None
        if alias is None:
            raise Unsupported("a predicate over several aliases")
        return index[alias]

    conditions = [p.expr for p in q.where if isinstance(p, ast.Condition)]
    local = tuple((state_of(e), e) for e in conditions if not any(r.next for r in ast.expr_refs(e)))
    edges = [e for e in conditions if any(r.next for r in ast.expr_refs(e))]
    if len(edges) > 1:
        raise Unsupported("more than one edge predicate")
    edge, edge_state = None, -1
    if edges:
        edge = edge_sides(edges[0])
        if edge is None:
            raise Unsupported("the edge predicate is not a comparison of X with NEXT(X)")
        edge_state = state_of(edges[0])
        if edge_state >= len(states) or not states[edge_state].kleene:
            raise Unsupported("an edge predicate of an alias that is not Kleene")
    if (len(states) > 1 or neg) and any(f.kind in ("min", "max") for f in cq.fields):
        raise Unsupported("MIN or MAX over a SEQ pattern")  # the events in some trend: not every event
    within, slide = cq.window.within, cq.window.slide
    if within.denominator != 1 or slide.denominator != 1:
        raise Unsupported("WITHIN or SLIDE is not a whole number of seconds")
    return KernelPlan(cq, tuple(states), edge, edge_state, int(within), int(slide), local, neg,
                      (*cq.common, *run_attrs))

