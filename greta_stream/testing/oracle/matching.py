"""The oracle's own matcher: expressions, predicates, bindings of a pattern in one window.

Shares nothing with the engine (see `greta_stream.testing.oracle`): its own
expression evaluator, predicate rules and depth-first pattern matcher.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterator
from fractions import Fraction
from typing import Any, NamedTuple

from greta_stream.query.ast import (
    ANY_MATCH,
    CONTIGUOUS,
    NEXT_MATCH,
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
    Repeat,
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


def _counts(p: Pattern) -> tuple[Pattern, int, int | None]:
    """(inner, lo, hi) of a repetition: `P+` is `P{1,}`."""
    if isinstance(p, Kleene):
        return p.inner, 1, None
    assert isinstance(p, Repeat)
    return p.inner, p.lo, p.hi


def nullable(p: Pattern) -> bool:
    """`p` has the empty word (a `P?`, `P*`, `P{0,m}`, or a SEQ of only such parts)."""
    if isinstance(p, EventPattern):
        return False
    if isinstance(p, (Kleene, Repeat)):
        inner, lo, _ = _counts(p)
        return lo == 0 or nullable(inner)
    if isinstance(p, Seq):
        return all(nullable(part) for _, part in _seq_parts(p))
    raise ValueError(f"cannot match {p!r} here")


class _Matcher:
    """Does a bound sequence parse as a pattern (middle NOTs included)?

    Ranges `seq[i:j]` may be empty (i == j) for parts that may match nothing.
    Repetitions count iterations; an iteration is one nonempty match of the
    repeated pattern (an empty one changes nothing but the count, and only
    a nullable inner pattern has one). Results are booleans per (part,
    range): the bound sequence is the trend, however many parses it has.
    """

    def __init__(self, ctx: _WindowSearch, seq: tuple, eq: dict, nots: bool = True):
        self.ctx, self.seq, self.eq, self.nots = ctx, seq, eq, nots
        self.memo: dict[tuple, bool] = {}

    def _cached(self, key: tuple, compute: Any) -> bool:
        """memo[key], computed once by `compute()`."""
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]

    # -------------------------------------------------- prefixes (NOTs ignored)

    def prefix(self, p: Pattern, i: int) -> bool:
        """seq[i:] is a prefix of some word of p (NOTs ignored: a sound prune)."""
        return self._cached(("prefix", id(p), i), lambda: self._prefix(p, i))

    def _prefix(self, p: Pattern, i: int) -> bool:
        """Uncached `prefix`."""
        n = len(self.seq)
        if i == n:
            return True
        if isinstance(p, EventPattern):
            return n - i == 1 and self.match(p, i, n)
        if isinstance(p, (Kleene, Repeat)):
            inner, _, hi = _counts(p)
            return self._iters_prefix(inner, i, hi)
        if isinstance(p, Seq):
            return self._seq_prefix(self.ctx.parts(p), 0, i)
        raise ValueError(f"cannot match {p!r} here")

    def _iters_prefix(self, inner: Pattern, i: int, hi: int | None) -> bool:
        """seq[i:] (nonempty) is a prefix of at most `hi` iterations of inner."""
        def compute() -> bool:
            if hi is not None and hi <= 0:
                return False
            rest = None if hi is None else hi - 1
            return self.prefix(inner, i) or any(
                self.match(inner, i, k) and self._iters_prefix(inner, k, rest)
                for k in range(i + 1, len(self.seq))
            )

        return self._cached(("iters-prefix", id(inner), i, hi), compute)

    def _seq_prefix(self, parts: list, idx: int, i: int) -> bool:
        """seq[i:] is a prefix of some word of SEQ(parts[idx:])."""
        if i == len(self.seq) or self.prefix(parts[idx][1], i):
            return True
        return idx + 1 < len(parts) and any(
            self.match(parts[idx][1], i, k) and self._seq_prefix(parts, idx + 1, k)
            for k in range(i, len(self.seq))
        )

    # -------------------------------------------------- whole matches

    def match(self, p: Pattern, i: int, j: int) -> bool:
        """seq[i:j] (empty when i == j) matches p."""
        return self._cached((id(p), i, j), lambda: self._match(p, i, j))

    def _match(self, p: Pattern, i: int, j: int) -> bool:
        """Uncached `match`."""
        if i == j:
            return nullable(p)
        if isinstance(p, EventPattern):
            event, alias = self.seq[i]
            return j == i + 1 and alias == p.alias and event.type == p.type
        if isinstance(p, (Kleene, Repeat)):
            inner, lo, hi = _counts(p)
            return self._iters(inner, i, j, lo, hi)
        if isinstance(p, Seq):
            return self._seq(self.ctx.parts(p), 0, i, j)
        raise ValueError(f"cannot match {p!r} here")

    def _iters(self, inner: Pattern, i: int, j: int, lo: int, hi: int | None) -> bool:
        """seq[i:j] splits into lo..hi iterations of inner."""
        def compute() -> bool:
            if i == j:
                return lo <= 0 or nullable(inner)
            if hi is not None and hi <= 0:
                return False
            rest = None if hi is None else hi - 1
            return any(
                self.match(inner, i, k) and self._iters(inner, k, j, max(lo - 1, 0), rest)
                for k in range(i + 1, j + 1)
            )

        return self._cached(("iters", id(inner), i, j, lo, hi), compute)

    def _seq(self, parts: list, idx: int, i: int, j: int) -> bool:
        """seq[i:j] splits into chunks matching parts[idx:], NOTs respected.

        A chunk may be empty (a part that matches nothing); the parts on both
        sides of a middle NOT match events (the analyzer puts no optional part
        next to a NOT), and the NOT lies between their last and first event.
        """
        part = parts[idx][1]
        if idx == len(parts) - 1:
            return self.match(part, i, j)
        nots = parts[idx + 1][0]
        return any(
            self.match(part, i, k)
            and self._clear(nots, k)
            and self._seq(parts, idx + 1, k, j)
            for k in range(i + 1 if nots else i, j if nots else j + 1)
        )

    def _clear(self, nots: list[Not], k: int) -> bool:
        """No match of any of `nots` lies strictly between seq[k-1] and seq[k]."""
        if not self.nots or not nots:
            return True
        lo, hi = self.seq[k - 1][0].time, self.seq[k][0].time
        return not any(self.ctx.has_match(n, self.eq, lo, hi) for n in nots)


# ------------------------------------------------------------ transitions


class _Shape(NamedTuple):
    """Glushkov view of a positive pattern: who starts, who ends, who follows whom."""

    first: frozenset[str]
    last: frozenset[str]
    nullable: bool
    follow: dict[tuple[str, str], set[tuple[Not, ...]]]  # (X, Y) -> NOTs each X->Y step crosses


def _shape(p: Pattern) -> _Shape:
    """First/last aliases and transitions of p (negative patterns stay out)."""
    if isinstance(p, EventPattern):
        one = frozenset({p.alias})
        return _Shape(one, one, False, {})
    if isinstance(p, (Kleene, Repeat)):
        inner_p, lo, hi = _counts(p)
        inner = _shape(inner_p)
        follow = {pair: set(crossed) for pair, crossed in inner.follow.items()}
        if hi is None or hi >= 2:  # the loop from one iteration to the next
            for x in inner.last:
                for y in inner.first:
                    follow.setdefault((x, y), set()).add(())
        return _Shape(inner.first, inner.last, lo == 0 or inner.nullable, follow)
    if isinstance(p, Seq):
        return _seq_shape(_seq_parts(p))
    raise ValueError(f"cannot match {p!r} here")


def _seq_shape(parts: list[tuple[list[Not], Pattern]]) -> _Shape:
    """Shape of a SEQ: a part follows every earlier part up to the last that must match."""
    shapes = [(tuple(nots), _shape(part)) for nots, part in parts]
    follow: dict[tuple[str, str], set[tuple[Not, ...]]] = {}
    open_ends: list[tuple[frozenset[str], tuple[Not, ...]]] = []  # (last aliases, NOTs since)
    first: set[str] = set()
    starting = True
    for nots, shape in shapes:
        for pair, crossed in shape.follow.items():
            follow.setdefault(pair, set()).update(crossed)
        for ends, since in open_ends:
            for x in ends:
                for y in shape.first:
                    follow.setdefault((x, y), set()).add(since + nots)
        if starting:
            first |= shape.first
            starting = shape.nullable
        kept = [(ends, since + nots) for ends, since in open_ends] if shape.nullable else []
        open_ends = kept + [(shape.last, ())]
    last: set[str] = set()
    for _, shape in reversed(shapes):
        last |= shape.last
        if not shape.nullable:
            break
    return _Shape(frozenset(first), frozenset(last), all(s.nullable for _, s in shapes), follow)


# ------------------------------------------------------- per-window search


class _WindowSearch:
    """Trend search over the time-sorted events of one window."""

    def __init__(
        self,
        rules: Rules,
        events: list[Event],
        window: Window,
        pattern: Pattern | None = None,
        strategy: str = ANY_MATCH,
    ):
        self.rules, self.events, self.window = rules, events, window
        self.times = [e.time for e in events]
        self.spans: dict[tuple, set[tuple[Fraction, Fraction]]] = {}
        self._parts: dict[int, list[tuple[list[Not], Pattern]]] = {}
        self.strategy = strategy
        self.follow = _shape(pattern).follow if pattern is not None else {}
        every = set(rules.alias_type)
        # contiguity is judged within the partition of the attributes that apply to every alias
        self.every_attrs = sorted(a for a, aliases in rules.equiv.items() if aliases >= every)

    def parts(self, seq: Seq) -> list[tuple[list[Not], Pattern]]:
        """`_seq_parts(seq)`, once per SEQ node."""
        key = id(seq)
        if key not in self._parts:
            self._parts[key] = _seq_parts(seq)
        return self._parts[key]

    def search(
        self, pattern: Pattern, fixed: dict, strategy: str = ANY_MATCH
    ) -> Iterator[tuple[tuple, dict]]:
        """Yield (seq, eq) for every trend of `pattern` agreeing with `fixed`.

        `strategy` other than skip-till-any-match prunes every extension whose
        new adjacent pair breaks it (`pair_ok`); the caller checks the whole
        trend again with its final equivalence values.
        """
        by_type: dict[str, list[str]] = defaultdict(list)
        for ep, negative in pattern_aliases(pattern):
            if not negative:
                by_type[ep.type].append(ep.alias)
        yield from self._dfs(pattern, by_type, 0, (), dict(fixed), strategy)

    def _dfs(self, pattern, by_type, start, seq, eq, strategy) -> Iterator[tuple[tuple, dict]]:
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
                if eq2 is None:
                    continue
                if seq and not self.pair_ok(seq[-1], longer[-1], eq2, strategy):
                    continue
                if _Matcher(self, longer, eq2, nots=False).prefix(pattern, 0):
                    yield from self._dfs(pattern, by_type, idx + 1, longer, eq2, strategy)

    def _admit(self, seq, eq, event, alias) -> dict | None:
        """Equivalence values after appending (event, alias), or None if illegal."""
        if not self.rules.local_ok(event, alias):
            return None
        if seq and not self.rules.edge_ok(seq[-1], (event, alias)):
            return None
        return self.rules.extend_equiv(eq, event, alias)

    # ---------------------------------------------- selection strategies

    def strategy_ok(self, seq: tuple, eq: dict, strategy: str) -> bool:
        """Every adjacent pair of the trend keeps the strategy (SEMANTICS section 8)."""
        return all(self.pair_ok(seq[k - 1], seq[k], eq, strategy) for k in range(1, len(seq)))

    def _between(self, lo: Fraction, hi: Fraction) -> list[Event]:
        """Events of the window with lo < time < hi."""
        return self.events[bisect_right(self.times, lo) : bisect_left(self.times, hi)]

    def pair_ok(self, prev: tuple[Event, str], cur: tuple[Event, str], eq: dict, strategy: str) -> bool:
        """The adjacent pair (prev, cur) keeps `strategy` in a trend of partition `eq`.

        With fewer equivalence values than the trend's final ones (a prefix in
        the search) a rejection is final: more values only shrink the negative
        matches a candidate must avoid.
        """
        if strategy == ANY_MATCH:
            return True
        between = self._between(prev[0].time, cur[0].time)
        if strategy == CONTIGUOUS:
            return not any(self._breaks_contiguity(z, eq) for z in between)
        if strategy == NEXT_MATCH:
            return not any(self._is_candidate(prev, cur[1], z, eq) for z in between)
        raise ValueError(f"unknown selection strategy {strategy!r}")

    def _breaks_contiguity(self, z: Event, eq: dict) -> bool:
        """z (a pattern type: others are not here) lies in the trend's partition."""
        return all(z.data.get(attr) == eq.get(attr) for attr in self.every_attrs)

    def _is_candidate(self, prev: tuple[Event, str], alias: str, z: Event, eq: dict) -> bool:
        """z could have been bound to `alias` right after prev (section 8's candidate)."""
        x, x_alias = prev
        if z.type != self.rules.alias_type[alias] or not self.rules.local_ok(z, alias):
            return False
        if self.rules.extend_equiv(eq, z, alias) != eq:  # a value of its own: another partition
            return False
        if not self.rules.edge_ok(prev, (z, alias)):
            return False
        steps = self.follow.get((x_alias, alias), set())
        return any(
            not any(self.has_match(n, eq, x.time, z.time) for n in crossed) for crossed in steps
        )

    # ---------------------------------------------- negation

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
    rules: Rules,
    pattern: Pattern,
    events: list[Event],
    window: Window,
    strategy: str = ANY_MATCH,
) -> list[tuple[tuple, dict]]:
    """Every trend (seq, equivalence values) of the query in one window.

    `strategy` (SEMANTICS section 8) filters the trends of the positive
    pattern; negative patterns (middle, leading, trailing) are searched
    under skip-till-any-match whatever it is.
    """
    lead, core, trail = _split_outer(pattern)
    ctx = _WindowSearch(rules, events, window, core, strategy)
    out = []
    for seq, eq in ctx.search(core, {}, strategy):
        first, last = seq[0][0].time, seq[-1][0].time
        if lead and ctx.has_match(lead, eq, window.start, first, lo_inclusive=True):
            continue
        if trail and ctx.has_match(trail, eq, last, window.end):
            continue
        if not ctx.strategy_ok(seq, eq, strategy):
            continue
        out.append((seq, eq))
    return out
