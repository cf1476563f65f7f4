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
from greta_stream.engine.values import INF, NEG_INF, scaled


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
        self._layout(cq)
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
    def _layout(self, cq: CompiledQuery) -> None:
        """Slot 0 is the trend count; each field gets slots after it.

        count: 1 slot (+); sum: 3 slots (int sum +, scaled float sum +,
        any-float flag max); min: 1 slot; max: 1 slot.
        """
        self.slot_of: list[int] = []
        self._zero: list[Any] = [0]
        adds, mins, maxs = [0], [], []
        self.own_fields: dict[str, list[tuple[int, str, str | None]]] = {}
        for f in cq.fields:
            base = len(self._zero)
            self.slot_of.append(base)
            self.own_fields.setdefault(f.alias, []).append((base, f.kind, f.attr))
            if f.kind == "sum":
                self._zero += [0, 0, 0]
                adds += [base, base + 1]
                maxs.append(base + 2)
            elif f.kind == "min":
                self._zero.append(INF)
                mins.append(base)
            elif f.kind == "max":
                self._zero.append(NEG_INF)
                maxs.append(base)
            else:
                self._zero.append(0)
                adds.append(base)
        self._adds, self._mins, self._maxs = tuple(adds), tuple(mins), tuple(maxs)
        self.count_only = len(self._zero) == 1

    def zero(self) -> list[Any]:
        """The empty aggregate."""
        return list(self._zero)

    def combine(self, acc: list[Any], other: list[Any]) -> None:
        """acc := acc (+) other, slot by slot (GRETA Theorem 9.1)."""
        for i in self._adds:
            acc[i] += other[i]
        for i in self._mins:
            if other[i] < acc[i]:
                acc[i] = other[i]
        for i in self._maxs:
            if other[i] > acc[i]:
                acc[i] = other[i]

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
                if isinstance(v, int):
                    agg[i] += cnt * v
                else:
                    agg[i + 1] += cnt * scaled(v)
                    agg[i + 2] = 1
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
