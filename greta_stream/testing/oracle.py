"""Brute-force reference oracle for the query semantics (SEMANTICS.md).

This module enumerates event trends one by one, straight from the written
semantics, and aggregates them naively. It is the yardstick the engine is
tested against, so it must share NO logic with the engine, the compiler or
the analyzer: it imports nothing from `greta_stream` except the AST module
and has its own pattern matcher, expression evaluator, window assignment and
negation handling. It is exponential by design; use it on streams of about
ten events.

Public API:
- `enumerate_trends(query, events)`: every trend counted by COUNT(*), per
  (window_start, window_end, group values);
- `oracle_rows(query, events)`: the result rows of SEMANTICS.md section 4;
- `complete_trends(query, events)`: the maximal trends of section 5.

Choices where SEMANTICS.md is silent:
- a binding is a trend when SOME parse of it satisfies every middle NOT
  (with distinct aliases all parses create the same adjacencies anyway);
- a trend is complete when no trend of the same window and partition has a
  STRICT superset of its events (trends with equal event sets but different
  bindings are all kept);
- an edge predicate with only `NEXT(Y)` references constrains every adjacent
  pair whose second event is bound to `Y`; a predicate without references
  must hold for every trend;
- events with a missing or null needed attribute (or a non-number for
  SUM/MIN/MAX/AVG) are skipped as bad events; times must be numbers.
"""

from __future__ import annotations

import math
import operator
from collections import defaultdict
from collections.abc import Iterator
from fractions import Fraction
from typing import Any, NamedTuple

from greta_stream.query.ast import (
    Aggregate,
    AttrRef,
    Binary,
    Condition,
    Equivalence,
    EventPattern,
    Expr,
    GroupItem,
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

Trend = tuple  # tuple[tuple[event_id, alias], ...] in time order
Key = tuple  # (window_start, window_end, group_values)

__all__ = ["Trend", "complete_trends", "enumerate_trends", "oracle_rows"]


class _Event(NamedTuple):
    """An input event with its exact time."""

    eid: Any
    type: str
    time: Fraction
    data: dict


class _Window(NamedTuple):
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


def _holds(expr: Expr, env: dict) -> bool:
    """Truth of a predicate; any evaluation error makes it false."""
    try:
        return bool(_evaluate(expr, env))
    except Exception:  # noqa: BLE001 - any failure means "false here"
        return False


# -------------------------------------------------------------- predicates


class _Rules:
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
        plain = {r.alias for r in refs if not r.next}
        nexts = {r.alias for r in refs if r.next}
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
                need[ref.alias].add(ref.attr)
        return need

    def local_ok(self, event: _Event, alias: str) -> bool:
        """Every local predicate of `alias` holds for `event`."""
        env = {(alias, False): event}
        return all(_holds(expr, env) for expr in self.local.get(alias, ()))

    def edge_ok(self, prev: tuple[_Event, str], cur: tuple[_Event, str]) -> bool:
        """Every edge predicate holds for the adjacent pair (prev, cur)."""
        for x_alias, y_alias, expr in self.edges:
            if y_alias != cur[1] or x_alias not in (None, prev[1]):
                continue
            if not _holds(expr, {(x_alias, False): prev[0], (y_alias, True): cur[0]}):
                return False
        return True

    def extend_equiv(self, eq: dict, event: _Event, alias: str) -> dict | None:
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
        parts = [part for _, part in _seq_parts(p)]
        return self._seq_prefix(parts, 0, i)

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

    def __init__(self, rules: _Rules, events: list[_Event], window: _Window):
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
        key = (id(neg), _frozen(eq))
        if key not in self.spans:
            self.spans[key] = {
                (s[0][0].time, s[-1][0].time) for s, _ in self.search(neg.inner, eq)
            }
        return self.spans[key]


def _frozen(eq: dict) -> tuple:
    """Equivalence values as a hashable partition key."""
    return tuple(sorted(eq.items(), key=lambda kv: kv[0]))


def _split_outer(pattern: Pattern) -> tuple[Not | None, Pattern, Not | None]:
    """(leading NOT, core pattern, trailing NOT) of the outermost pattern."""
    if not isinstance(pattern, Seq):
        return None, pattern, None
    parts = list(pattern.parts)
    lead = parts.pop(0) if isinstance(parts[0], Not) else None
    trail = parts.pop() if parts and isinstance(parts[-1], Not) else None
    core = parts[0] if len(parts) == 1 else Seq(tuple(parts))
    return lead, core, trail


def _window_trends(
    rules: _Rules, pattern: Pattern, events: list[_Event], window: _Window
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


# ------------------------------------------------------------ events, windows


def _is_number(value: Any) -> bool:
    """int or float, not bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _prepare(
    query: Query,
    rules: _Rules,
    events: list[dict],
    type_field: str,
    time_field: str,
    id_field: str,
) -> list[_Event]:
    """Time-sorted events whose type is in the pattern, bad events dropped."""
    types = set(rules.alias_type.values())
    numeric = _aggregate_attrs(query, rules)
    out = []
    for pos, raw in enumerate(events):
        etype, time = raw.get(type_field), raw.get(time_field)
        if etype not in types or time is None:
            continue
        if not _is_number(time):
            raise ValueError(f"oracle supports numeric times only, got {time!r}")
        aliases = [a for a, t in rules.alias_type.items() if t == etype]
        needed = set().union(*(rules.alias_attrs.get(a, set()) for a in aliases))
        if any(raw.get(attr) is None for attr in needed):
            continue
        if any(not _is_number(raw.get(attr)) for attr in numeric.get(etype, ())):
            continue
        eid = raw[id_field] if raw.get(id_field) is not None else pos
        out.append(_Event(eid, etype, Fraction(repr(time)) if isinstance(time, float) else Fraction(time), raw))
    return sorted(out, key=lambda e: e.time)


def _aggregate_attrs(query: Query, rules: _Rules) -> dict[str, set[str]]:
    """Event type -> attributes that SUM/MIN/MAX/AVG read (numbers only)."""
    out: dict[str, set[str]] = defaultdict(set)
    for item in query.returns:
        if isinstance(item, Aggregate) and item.attr is not None:
            out[rules.alias_type[item.alias]].add(item.attr)
    return out


def _windows(query: Query, events: list[_Event]) -> list[_Window]:
    """Every window [k*slide, k*slide+within) holding at least one event."""
    within = Fraction(query.within.seconds)
    slide = Fraction(query.slide_or_within.seconds)
    ks = set()
    for event in events:
        ks.update(
            range(
                math.floor((event.time - within) / slide) + 1,
                math.floor(event.time / slide) + 1,
            )
        )
    return [_Window(k * slide, k * slide + within) for k in sorted(ks)]


def _num(value: Fraction) -> int | float:
    """An exact number as int if integral, else float."""
    return int(value) if value.denominator == 1 else float(value)


def _sort_value(value: Any) -> tuple:
    """Sort key that tolerates mixed group value types."""
    if isinstance(value, (int, float)):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    return (2, repr(value))


def _sort_key(key: Key) -> tuple:
    """Sort key of (window_start, window_end, group values)."""
    return key[0], key[1], tuple(_sort_value(v) for v in key[2])


# ------------------------------------------------------------ collection


def _collect(
    query: Query,
    events: list[dict],
    type_field: str = "type",
    time_field: str = "time",
    id_field: str = "id",
) -> dict[Key, list[tuple]]:
    """(window_start, window_end, group) -> [(seq, eq), ...], sorted by key."""
    rules = _Rules(query)
    prepared = _prepare(query, rules, events, type_field, time_field, id_field)
    if not all(_holds(expr, {}) for expr in rules.constants):
        return {}
    out: dict[Key, list[tuple]] = defaultdict(list)
    for window in _windows(query, prepared):
        inside = [e for e in prepared if window.start <= e.time < window.end]
        for seq, eq in _window_trends(rules, query.pattern, inside, window):
            group = tuple(eq[attr] for attr in query.group_by)
            out[(_num(window.start), _num(window.end), group)].append((seq, eq))
    return {key: out[key] for key in sorted(out, key=_sort_key)}


def _as_trend(seq: tuple) -> Trend:
    """A bound sequence as ((event_id, alias), ...)."""
    return tuple((event.eid, alias) for event, alias in seq)


def enumerate_trends(
    query: Query,
    events: list[dict],
    *,
    type_field: str = "type",
    time_field: str = "time",
    id_field: str = "id",
) -> dict[Key, list[Trend]]:
    """Every trend counted by COUNT(*), per (window_start, window_end, group)."""
    found = _collect(query, events, type_field, time_field, id_field)
    return {key: [_as_trend(seq) for seq, _ in items] for key, items in found.items()}


def complete_trends(
    query: Query, events: list[dict], **field_names: str
) -> dict[Key, list[Trend]]:
    """Maximal trends (SEMANTICS.md section 5), judged per partition, keyed per group."""
    out: dict[Key, list[Trend]] = {}
    for key, items in _collect(query, events, **field_names).items():
        partitions: dict[tuple, list[tuple]] = defaultdict(list)
        for seq, eq in items:
            partitions[_frozen(eq)].append(seq)
        kept = [seq for seq, eq in items if _is_maximal(seq, partitions[_frozen(eq)])]
        if kept:
            out[key] = [_as_trend(seq) for seq in kept]
    return out


def _is_maximal(seq: tuple, others: list[tuple]) -> bool:
    """No trend in `others` has a strict superset of seq's events."""
    mine = {id(event) for event, _ in seq}
    return not any(mine < {id(event) for event, _ in other} for other in others)


# ------------------------------------------------------------ aggregates


def oracle_rows(query: Query, events: list[dict], **field_names: str) -> list[dict]:
    """Result rows of SEMANTICS.md section 4, sorted by window and group."""
    renames = {}
    for item in query.returns:
        if isinstance(item, GroupItem):
            renames.setdefault(item.attr, item.column)
    rows = []
    for (start, end, group), items in _collect(query, events, **field_names).items():
        row: dict[str, Any] = {"window_start": start, "window_end": end}
        for attr, value in zip(query.group_by, group):
            row[renames.get(attr, attr)] = value
        seqs = [seq for seq, _ in items]
        for item in query.returns:
            if isinstance(item, Aggregate):
                row[item.column] = _aggregate(item, seqs)
        rows.append(row)
    return rows


def _aggregate(agg: Aggregate, seqs: list[tuple]) -> Any:
    """One aggregate over the trends of a (window, group)."""
    func = agg.func.upper()
    if agg.alias is None:
        return len(seqs)
    bound = [event for seq in seqs for event, alias in seq if alias == agg.alias]
    if func == "COUNT":
        return len(bound)
    values = [event.data[agg.attr] for event in bound]
    if func == "MIN":
        return min(values) if values else None
    if func == "MAX":
        return max(values) if values else None
    total = sum((Fraction(v) for v in values), Fraction(0))
    if func == "SUM":
        return int(total) if all(isinstance(v, int) for v in values) else float(total)
    if func == "AVG":
        return float(total / len(values)) if values else None
    raise ValueError(f"unknown aggregate {agg.func!r}")
