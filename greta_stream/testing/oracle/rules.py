"""The oracle's predicate rules: a query's WHERE sorted into local, edge and constant
conditions, and its equivalence/GROUP-BY attributes (partitions).

Shares nothing with the engine (see `greta_stream.testing.oracle`).
"""

from __future__ import annotations

from collections import defaultdict

from greta_stream.query.ast import Condition, Equivalence, Expr, Query, expr_refs, pattern_aliases
from greta_stream.testing.oracle.expressions import Event, holds


class Rules:
    """The query's predicates, sorted by kind, plus alias/type tables."""

    def __init__(self, query: Query):
        self.alias_type = {
            ep.alias: ep.type for ep, _ in pattern_aliases(query.pattern)
        }
        self.local: dict[str, list[Expr]] = defaultdict(list)
        self.edges: list[tuple[str | None, str, Expr]] = []
        self.constants: list[Expr] = []
        self.equiv: dict[str, set[str]] = defaultdict(set)
        for attr in query.group_by:
            self.equiv[attr] |= set(self.alias_type)
        for pred in query.where:
            if isinstance(pred, Equivalence):
                self._add_equivalence(pred)
            else:
                self._add_condition(pred)
        self.alias_attrs = self._attrs_by_alias()

    def _add_equivalence(self, pred: Equivalence) -> None:
        """Merge `[a, X.b]` into attribute -> aliases it applies to."""
        for ref in pred.attrs:
            aliases = set(self.alias_type) if ref.alias is None else {ref.alias}
            self.equiv[ref.attr] |= aliases

    def _add_condition(self, pred: Condition) -> None:
        """File a condition as local, edge or constant."""
        refs = expr_refs(pred.expr)
        if any(r.alias is None for r in refs):
            raise ValueError("unqualified attribute in a condition")
        plain = {r.alias for r in refs if r.alias is not None and not r.next}
        nexts = {r.alias for r in refs if r.alias is not None and r.next}
        if len(plain) > 1 or len(nexts) > 1:
            raise ValueError("a condition may name one alias and one NEXT alias")
        if nexts:
            self.edges.append((next(iter(plain), None), next(iter(nexts)), pred.expr))
        elif plain:
            self.local[next(iter(plain))].append(pred.expr)
        else:
            self.constants.append(pred.expr)

    def _attrs_by_alias(self) -> dict[str, set[str]]:
        """Attributes each alias's events need for predicates and partitions."""
        need: dict[str, set[str]] = defaultdict(set)
        for attr, aliases in self.equiv.items():
            for alias in aliases:
                need[alias].add(attr)
        for alias, exprs in self.local.items():
            for expr in exprs:
                need[alias] |= {r.attr for r in expr_refs(expr)}
        for _, _, expr in self.edges:
            for ref in expr_refs(expr):
                assert ref.alias is not None  # unqualified refs are refused in _add_condition
                need[ref.alias].add(ref.attr)
        return need

    def local_ok(self, event: Event, alias: str) -> bool:
        """Every local predicate of `alias` holds for `event`."""
        env = {(alias, False): event}
        return all(holds(expr, env) for expr in self.local.get(alias, ()))

    def edge_ok(self, prev: tuple[Event, str], cur: tuple[Event, str]) -> bool:
        """Every edge predicate holds for the adjacent pair (prev, cur)."""
        for x_alias, y_alias, expr in self.edges:
            if y_alias != cur[1] or x_alias not in (None, prev[1]):
                continue
            if not holds(expr, {(x_alias, False): prev[0], (y_alias, True): cur[0]}):
                return False
        return True

    def extend_equiv(self, eq: dict, event: Event, alias: str) -> dict | None:
        """`eq` plus the values of `event`, or None on a conflict."""
        out = eq
        for attr, aliases in self.equiv.items():
            if alias not in aliases:
                continue
            value = event.data.get(attr)
            if attr in out:
                if out[attr] != value:
                    return None
            else:
                out = {**out, attr: value}
        return out


def frozen(eq: dict) -> tuple:
    """Equivalence values as a hashable partition key."""
    return tuple(sorted(eq.items(), key=lambda kv: kv[0]))

