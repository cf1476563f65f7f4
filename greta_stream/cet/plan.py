"""The plan of one query's trend extraction (`ExtractionPlan`): what CET mode
needs of a compiled query, in fast form.

Built once per extractor from a `CompiledQuery` and a `Timebase`, never
pickled (it holds the compiled predicate closures). Predicate calls go through
`local_ok` / `edge_ok`, which turn evaluation errors into "false" and count
them (docs/QUERY_LANGUAGE.md section 2), exactly as aggregation mode does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.plan import IndexSpec, Metrics, index_spec
from greta_stream.engine.timebase import Timebase
from greta_stream.query import ast


@dataclass(frozen=True)
class Incoming:
    """A transition into a state: from `src`, across negative template `negation`.

    `index` (equality edges only) finds the predecessors by key instead of
    checking the edge against every earlier vertex (graph.py); `tid` names
    the transition's index in a graph.
    """

    src: str
    negation: int | None
    edge: Callable[[Any, Any], bool] | None
    index: IndexSpec | None = None
    tid: int = 0


@dataclass(frozen=True)
class TemplateInfo:
    id: int
    negative: bool
    start: frozenset[str]
    end: frozenset[str]
    incoming: dict[str, tuple[Incoming, ...]]
    leading: int | None
    trailing: int | None


class ExtractionPlan:
    """How one query's trends are extracted: the templates the trend graph
    follows, alias roles and predicate wrappers."""

    indexing = True  # equality edges through hash buckets (False: the scan, for tests and benchmarks)

    def __init__(self, cq: CompiledQuery, tb: Timebase, metrics: Metrics) -> None:
        self.cq, self.tb, self.metrics = cq, tb, metrics
        # SEMANTICS section 8: which predecessors an event takes (graph.py `_preds`).
        self.next_match = cq.strategy == ast.NEXT_MATCH
        self.contiguous = cq.strategy == ast.CONTIGUOUS
        self.templates = [self._template(t, self.indexing and t.id == 0) for t in cq.templates]
        self.template_of = {a: s.template for a, s in cq.aliases.items()}
        self.root = self.templates[0]
        self.outgoing = {a: tuple(tr for trs in self.root.incoming.values() for tr in trs if tr.src == a)
                         for a in cq.aliases}  # the root's transitions out of each alias
        self.has_runs = bool(cq.run_components)
        positive_by_type: dict[str, int] = {}
        for spec in cq.aliases.values():
            if spec.template == 0:
                positive_by_type[spec.type] = positive_by_type.get(spec.type, 0) + 1
        # An event may bind to two positive aliases: a superset trend may then
        # bind the same events differently, so local maximality checks are not
        # enough and candidates get the exact check (see windows.py).
        self.rebinding = any(n > 1 for n in positive_by_type.values())

    @staticmethod
    def _template(t: Any, indexing: bool) -> TemplateInfo:
        incoming: dict[str, list[Incoming]] = {s: [] for s in t.states}
        for tid, tr in enumerate(t.transitions):
            spec = index_spec(tr) if indexing else None
            if spec is not None and spec.op != "=":
                spec = None  # order comparisons: the scan (a range of keys is not a range of time)
            incoming[tr.dst].append(Incoming(tr.src, tr.negation, tr.edge, spec, tid))
        return TemplateInfo(
            t.id, t.negative, frozenset(t.start), frozenset(t.end),
            {s: tuple(v) for s, v in incoming.items()}, t.leading, t.trailing,
        )

    def positive(self, alias: str) -> bool:
        return self.template_of[alias] == 0

    def local_ok(self, alias: str, attrs: dict[str, Any]) -> bool:
        fn = self.cq.aliases[alias].local
        if fn is None:
            return True
        try:
            return bool(fn(attrs))
        except Exception:  # noqa: BLE001 - any evaluation error makes the predicate false
            self.metrics.inc("predicate_errors")
            return False

    def edge_ok(self, fn: Callable[[Any, Any], bool], x: dict[str, Any], y: dict[str, Any]) -> bool:
        try:
            return bool(fn(x, y))
        except Exception:  # noqa: BLE001
            self.metrics.inc("predicate_errors")
            return False
