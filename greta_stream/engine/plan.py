"""Runtime plan: what the engine needs of a compiled query, in fast form.

Built once per engine from a `CompiledQuery` and never pickled (it holds
closures); engine state refers to it only through method arguments, so state
snapshots stay plain data. Predicate calls go through `Plan.local_ok` and
`Plan.edge_ok`, which turn evaluation errors into "false" and count them
(SEMANTICS.md section 2: an error never stops processing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.timebase import Timebase
from greta_stream.engine.values import INF, NEG_INF, exact_value


@dataclass
class TransitionPlan:
    src: str
    negation: int | None
    edge: Callable[[Any, Any], bool] | None

    @property
    def plain(self) -> bool:
        """No edge predicate and no negation: running totals replace the scan."""
        return self.edge is None and self.negation is None


@dataclass
class TemplatePlan:
    id: int
    negative: bool
    states: list[str]
    start: frozenset[str]
    end: frozenset[str]
    incoming: dict[str, list[TransitionPlan]]
    leading: int | None
    trailing: int | None


class Metrics(dict):  # type: ignore[type-arg]
    """Named counters; a plain dict so it pickles and serializes as is."""

    def inc(self, name: str, by: int = 1) -> None:
        self[name] = self.get(name, 0) + by


class Plan:
    """Templates, field operations and predicate wrappers of one query."""

    def __init__(self, cq: CompiledQuery, timebase: Timebase, metrics: Metrics) -> None:
        self.cq = cq
        self.tb = timebase
        self.metrics = metrics
        self.templates = [self._template(t) for t in cq.templates]
        self.template_of = {a: s.template for a, s in cq.aliases.items()}
        self.totals_states = {
            tr.src for tp in self.templates for trs in tp.incoming.values() for tr in trs if tr.plain
        }
        self.kinds = tuple(f.kind for f in cq.fields)
        self.own_fields: dict[str, list[tuple[int, str, str | None]]] = {}
        for i, f in enumerate(cq.fields):
            self.own_fields.setdefault(f.alias, []).append((i + 1, f.kind, f.attr))
        self.has_runs = bool(cq.run_components)

    @staticmethod
    def _template(t: Any) -> TemplatePlan:
        incoming: dict[str, list[TransitionPlan]] = {s: [] for s in t.states}
        for tr in t.transitions:
            incoming[tr.dst].append(TransitionPlan(tr.src, tr.negation, tr.edge))
        return TemplatePlan(
            t.id, t.negative, list(t.states), frozenset(t.start), frozenset(t.end), incoming, t.leading, t.trailing
        )

    # ---------------------------------------------------------- aggregates
    def zero(self) -> list[Any]:
        """The empty aggregate: count 0, then one slot per propagated field."""
        out: list[Any] = [0]
        for kind in self.kinds:
            out.append(INF if kind == "min" else NEG_INF if kind == "max" else 0)
        return out

    def combine(self, acc: list[Any], other: list[Any]) -> None:
        """acc := acc (+) other, field by field (GRETA Theorem 9.1)."""
        acc[0] += other[0]
        for i, kind in enumerate(self.kinds, 1):
            if kind == "min":
                if other[i] < acc[i]:
                    acc[i] = other[i]
            elif kind == "max":
                if other[i] > acc[i]:
                    acc[i] = other[i]
            else:
                acc[i] = acc[i] + other[i]

    def add_own(self, agg: list[Any], alias: str, attrs: dict[str, Any]) -> None:
        """Fold the vertex's own event into the trends that end at it."""
        cnt = agg[0]
        if not cnt:
            return
        for i, kind, attr in self.own_fields.get(alias, ()):
            if kind == "count":
                agg[i] += cnt
                continue
            v = attrs[attr]  # type: ignore[index]
            if kind == "sum":
                agg[i] = agg[i] + cnt * exact_value(v)
            elif kind == "min":
                if v < agg[i]:
                    agg[i] = v
            elif v > agg[i]:
                agg[i] = v

    # ---------------------------------------------------------- predicates
    def local_ok(self, alias: str, attrs: dict[str, Any]) -> bool:
        fn = self.cq.aliases[alias].local
        if fn is None:
            return True
        try:
            return fn(attrs)
        except Exception:  # noqa: BLE001 - any evaluation error makes the predicate false
            self.metrics.inc("predicate_errors")
            return False

    def edge_ok(self, fn: Callable[[Any, Any], bool], x: dict[str, Any], y: dict[str, Any]) -> bool:
        try:
            return fn(x, y)
        except Exception:  # noqa: BLE001
            self.metrics.inc("predicate_errors")
            return False


__all__ = ["Plan", "Metrics", "TemplatePlan", "TransitionPlan", "NEG_INF"]
