"""The oracle's own matcher: expressions, predicates, bindings of a pattern in one window.

Shares nothing with the engine (see `greta_stream.testing.oracle`): its own
expression evaluator, predicate rules and depth-first pattern matcher.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Iterator
from fractions import Fraction
from typing import Any, NamedTuple

from greta_stream.query.ast import (
    AttrRef,
    Binary,
    Condition,
    Equivalence,
    EventPattern,
    Expr,
    Kleene,
    Literal,
    Not,
    Pattern,
    Query,
    Seq,
    Unary,
    expr_refs,
    pattern_aliases,
)


class Event(NamedTuple):
    """An input event with its exact time."""

    eid: Any
    type: str
    time: Fraction
    data: dict


class Window(NamedTuple):
    """Window [start, end) with exact bounds."""

    start: Fraction
    end: Fraction


# ------------------------------------------------------------ expressions

_COMPARE = {
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_ARITH = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "%": operator.mod,
}


def _evaluate(expr: Expr, env: dict) -> Any:
    """Value of `expr`; env maps (alias, is_next) to the event. May raise."""
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, AttrRef):
        return env[(expr.alias, expr.next)].data[expr.attr]
    if isinstance(expr, Unary):
        value = _evaluate(expr.operand, env)
        if expr.op.upper() == "NOT":
            return not value
        if expr.op == "-":
            return -value
        raise ValueError(f"unknown unary operator {expr.op!r}")
    if isinstance(expr, Binary):
        return _evaluate_binary(expr, env)
    raise TypeError(f"not an expression: {expr!r}")


def _evaluate_binary(expr: Binary, env: dict) -> Any:
    """Value of a binary expression, AND/OR short-circuiting like Python."""
    op = expr.op.upper()
    if op == "AND":
        return bool(_evaluate(expr.left, env)) and bool(_evaluate(expr.right, env))
    if op == "OR":
        return bool(_evaluate(expr.left, env)) or bool(_evaluate(expr.right, env))
    left, right = _evaluate(expr.left, env), _evaluate(expr.right, env)
    if op in _COMPARE:
        return _COMPARE[op](left, right)
    if op in _ARITH:
        return _ARITH[op](left, right)
    raise ValueError(f"unknown binary operator {expr.op!r}")


def holds(expr: Expr, env: dict) -> bool:
    """Truth of a predicate; any evaluation error makes it false."""
    try:
        return bool(_evaluate(expr, env))
    except Exception:  # noqa: BLE001 - any failure means "false here"
        return False


# -------------------------------------------------------------- predicates


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


# ------------------------------------------------------------ the matcher


def _seq_parts(seq: Seq) -> list[tuple[list[Not], Pattern]]:
    """Positive parts of a SEQ, each with the NOT parts right before it."""
    parts: list[tuple[list[Not], Pattern]] = []
    pending: list[Not] = []
    for part in seq.parts:
        if isinstance(part, Not):
            pending.append(part)
        else:
            parts.append((pending, part))
            pending = []
    if not parts or parts[0][0] or pending:
        raise ValueError("leading/trailing NOT is allowed only in the outermost SEQ")
    return parts


class _Matcher:
    """Does a bound sequence parse as a pattern (middle NOTs included)?"""

    def __init__(self, ctx: _WindowSearch, seq: tuple, eq: dict, nots: bool = True):
        self.ctx, self.seq, self.eq, self.nots = ctx, seq, eq, nots
        self.memo: dict[tuple, bool] = {}

    def prefix(self, p: Pattern, i: int) -> bool:
        """seq[i:] is a prefix of some word of p (NOTs ignored: a sound prune)."""
        key = ("prefix", id(p), i)
        if key not in self.memo:
            self.memo[key] = self._prefix(p, i)
        return self.memo[key]

    def _prefix(self, p: Pattern, i: int) -> bool:
        """Uncached `prefix`."""
        n = len(self.seq)
        if i == n:
            return True
        if isinstance(p, EventPattern):
            return n - i == 1 and self.match(p, i, n)
        if isinstance(p, Kleene):
            return self.prefix(p.inner, i) or any(
                self.match(p.inner, i, k) and self.prefix(p, k) for k in range(i + 1, n)
            )
        if isinstance(p, Seq):
            return self._seq_prefix([part for _, part in _seq_parts(p)], 0, i)
        raise ValueError(f"cannot match {p!r} here")

    def _seq_prefix(self, parts: list, idx: int, i: int) -> bool:
        """seq[i:] is a prefix of some word of SEQ(parts[idx:])."""
        if i == len(self.seq) or self.prefix(parts[idx], i):
            return True
        return idx + 1 < len(parts) and any(
            self.match(parts[idx], i, k) and self._seq_prefix(parts, idx + 1, k)
            for k in range(i + 1, len(self.seq))
        )

    def match(self, p: Pattern, i: int, j: int) -> bool:
        """seq[i:j] (nonempty) matches p."""
        key = (id(p), i, j)
        if key not in self.memo:
            self.memo[key] = self._match(p, i, j)
        return self.memo[key]

    def _match(self, p: Pattern, i: int, j: int) -> bool:
        """Uncached `match`."""
        if isinstance(p, EventPattern):
            event, alias = self.seq[i]
            return j == i + 1 and alias == p.alias and event.type == p.type
        if isinstance(p, Kleene):
            return self.match(p.inner, i, j) or any(
                self.match(p.inner, i, k) and self.match(p, k, j)
                for k in range(i + 1, j)
            )
        if isinstance(p, Seq):
            return self._seq(_seq_parts(p), 0, i, j)
        raise ValueError(f"cannot match {p!r} here")

    def _seq(self, parts: list, idx: int, i: int, j: int) -> bool:
        """seq[i:j] splits into chunks matching parts[idx:], NOTs respected."""
        part = parts[idx][1]
        if idx == len(parts) - 1:
            return self.match(part, i, j)
        nots = parts[idx + 1][0]
        return any(
            self.match(part, i, k)
            and self._clear(nots, k)
            and self._seq(parts, idx + 1, k, j)
            for k in range(i + 1, j)
        )

    def _clear(self, nots: list[Not], k: int) -> bool:
        """No match of any of `nots` lies strictly between seq[k-1] and seq[k]."""
        if not self.nots:
            return True
        lo, hi = self.seq[k - 1][0].time, self.seq[k][0].time
        return not any(self.ctx.has_match(n, self.eq, lo, hi) for n in nots)


# ------------------------------------------------------- per-window search


class _WindowSearch:
    """Trend search over the time-sorted events of one window."""

    def __init__(self, rules: Rules, events: list[Event], window: Window):
        self.rules, self.events, self.window = rules, events, window
        self.spans: dict[tuple, set[tuple[Fraction, Fraction]]] = {}

    def search(self, pattern: Pattern, fixed: dict) -> Iterator[tuple[tuple, dict]]:
        """Yield (seq, eq) for every trend of `pattern` agreeing with `fixed`."""
        by_type: dict[str, list[str]] = defaultdict(list)
        for ep, negative in pattern_aliases(pattern):
            if not negative:
                by_type[ep.type].append(ep.alias)
        yield from self._dfs(pattern, by_type, 0, (), dict(fixed))

    def _dfs(self, pattern, by_type, start, seq, eq) -> Iterator[tuple[tuple, dict]]:
        """Extend `seq` by later events in every admissible way."""
        if seq and _Matcher(self, seq, eq).match(pattern, 0, len(seq)):
            yield seq, eq
        for idx in range(start, len(self.events)):
            event = self.events[idx]
            if seq and event.time <= seq[-1][0].time:
                continue
            for alias in by_type.get(event.type, ()):
                longer = seq + ((event, alias),)
                eq2 = self._admit(seq, eq, event, alias)
                if eq2 is not None and _Matcher(self, longer, eq2, nots=False).prefix(
                    pattern, 0
                ):
                    yield from self._dfs(pattern, by_type, idx + 1, longer, eq2)

    def _admit(self, seq, eq, event, alias) -> dict | None:
        """Equivalence values after appending (event, alias), or None if illegal."""
        if not self.rules.local_ok(event, alias):
            return None
        if seq and not self.rules.edge_ok(seq[-1], (event, alias)):
            return None
        return self.rules.extend_equiv(eq, event, alias)

    def has_match(
        self, neg: Not, eq: dict, lo: Fraction, hi: Fraction, lo_inclusive: bool = False
    ) -> bool:
        """Some match of `neg` in this window/partition starts after lo, ends before hi."""
        return any(
            (lo <= first if lo_inclusive else lo < first) and last < hi for first, last in self._spans(neg, eq)
        )

    def _spans(self, neg: Not, eq: dict) -> set[tuple[Fraction, Fraction]]:
        """(first time, last time) of every match of `neg.inner` in partition `eq`."""
        key = (id(neg), frozen(eq))
        if key not in self.spans:
            self.spans[key] = {
                (s[0][0].time, s[-1][0].time) for s, _ in self.search(neg.inner, eq)
            }
        return self.spans[key]


def frozen(eq: dict) -> tuple:
    """Equivalence values as a hashable partition key."""
    return tuple(sorted(eq.items(), key=lambda kv: kv[0]))


def _split_outer(pattern: Pattern) -> tuple[Not | None, Pattern, Not | None]:
    """(leading NOT, core pattern, trailing NOT) of the outermost pattern."""
    if not isinstance(pattern, Seq):
        return None, pattern, None
    parts = list(pattern.parts)
    lead = parts[0] if isinstance(parts[0], Not) else None
    if lead is not None:
        del parts[0]
    trail = parts[-1] if parts and isinstance(parts[-1], Not) else None
    if trail is not None:
        del parts[-1]
    core = parts[0] if len(parts) == 1 else Seq(tuple(parts))
    return lead, core, trail


def window_trends(
    rules: Rules, pattern: Pattern, events: list[Event], window: Window
) -> list[tuple[tuple, dict]]:
    """Every trend (seq, equivalence values) of the query in one window."""
    ctx = _WindowSearch(rules, events, window)
    lead, core, trail = _split_outer(pattern)
    out = []
    for seq, eq in ctx.search(core, {}):
        first, last = seq[0][0].time, seq[-1][0].time
        if lead and ctx.has_match(lead, eq, window.start, first, lo_inclusive=True):
            continue
        if trail and ctx.has_match(trail, eq, last, window.end):
            continue
        out.append((seq, eq))
    return out
