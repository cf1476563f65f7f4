"""Semantic checks of a parsed query (docs/QUERY_LANGUAGE.md section 2).

`analyze(query, text)` collects every problem at once and raises one
`QueryError` listing them with positions; a query that passes is safe to
compile. Checks: aliases, NOT placement, RETURN items, predicate kinds and
alias pairs, GROUP-BY, durations.
"""

from __future__ import annotations

from dataclasses import dataclass

from greta_stream.errors import QueryError, QueryProblem
from greta_stream.query import ast
from greta_stream.query.parser import parse
from greta_stream.query.structure import adjacent_pairs, ambiguous, shape, unroll

# States a pattern may unroll into (`structure.unroll`: an iteration of a
# counted repetition is a state of its own): every state costs work per event,
# and the ambiguity check grows with the square of their number.
MAX_STATES = 256


@dataclass(frozen=True)
class AliasInfo:
    alias: str
    type: str
    positive: bool


class _Problems:
    def __init__(self) -> None:
        self.items: list[QueryProblem] = []

    def add(self, msg: str, span: ast.Span) -> None:
        end = span.end_column if span.end_line == span.line else None
        self.items.append(QueryProblem(msg, span.line or 1, span.column or 1, end))


def aliases_of(query: ast.Query) -> dict[str, AliasInfo]:
    """Alias -> (type, positive?) in text order; the first binding of a duplicate wins."""
    out: dict[str, AliasInfo] = {}
    for ev, negative in ast.pattern_aliases(query.pattern):
        out.setdefault(ev.alias, AliasInfo(ev.alias, ev.type, not negative))
    return out


def analyze(query: ast.Query, text: str | None = None) -> ast.Query:
    """Return `query` unchanged if it makes sense, else raise `QueryError`."""
    probs = _Problems()
    _check_aliases(query, probs)
    _check_negation(query.pattern, probs, root=True)
    states = _states(query.pattern)
    if states > MAX_STATES:  # said now: every later check (and the compiler) unrolls the pattern
        probs.add(f"the repetitions of this pattern make {states:,} states (each iteration of a counted part "
                  f"is one); at most {MAX_STATES} are allowed", _first_counted(query.pattern) or query.pattern.span)
        raise QueryError(sorted(probs.items, key=lambda p: (p.line, p.column)), text)
    _check_repetition(query.pattern, None, probs)
    if not probs.items and ambiguous(query.pattern):
        probs.add("this repetition counts a trend once per way of cutting it into iterations (an iteration "
                  "can begin inside another, as in (A+){2}); repeat single events instead, e.g. A{2,}",
                  _first_counted(query.pattern) or query.pattern.span)
    aliases = aliases_of(query)
    _check_returns(query, aliases, probs)
    _check_where(query, aliases, probs)
    _check_optional_equivalence(query, aliases, probs)
    _check_group_by(query, probs)
    _check_durations(query, probs)
    if probs.items:
        probs.items.sort(key=lambda p: (p.line, p.column))
        raise QueryError(probs.items, text)
    return query


def _check_aliases(query: ast.Query, probs: _Problems) -> None:
    seen: dict[str, ast.EventPattern] = {}
    for ev, _neg in ast.pattern_aliases(query.pattern):
        if ev.alias in seen:
            probs.add(f"alias {ev.alias!r} is bound twice; give each occurrence its own alias", ev.span)
        seen[ev.alias] = ev


def _check_negation(p: ast.Pattern, probs: _Problems, root: bool) -> None:
    """NOT only inside SEQ, never side by side, leading/trailing only at the root."""
    if isinstance(p, ast.EventPattern):
        return
    if isinstance(p, ast.Not):
        probs.add("NOT is allowed only as a part of a SEQ", p.span)
        _check_negation(p.inner, probs, root=False)
        return
    if isinstance(p, (ast.Kleene, ast.Repeat)):
        _check_negation(p.inner, probs, root=False)
        return
    parts = p.parts
    if len(parts) < 2:
        probs.add("SEQ needs two or more parts", p.span)
    if all(isinstance(x, ast.Not) for x in parts):
        probs.add("SEQ needs at least one positive part", p.span)
    for i, part in enumerate(parts):
        if not isinstance(part, ast.Not):
            _check_negation(part, probs, root=False)
            continue
        if i > 0 and isinstance(parts[i - 1], ast.Not):
            probs.add("two NOT parts may not stand side by side", part.span)
        where = "begin" if i == 0 else "end" if i == len(parts) - 1 else None
        if where and not root:
            probs.add(f"NOT can {where} only the outermost SEQ of the pattern", part.span)
        _check_negation(part.inner, probs, root=False)


def _check_repetition(p: ast.Pattern, parent: ast.Pattern | None, probs: _Problems) -> None:
    """Bounds of `{n,m}`; a part that may match nothing only inside a SEQ that
    keeps a part matching an event, and never next to a NOT (SEMANTICS section 8)."""
    if isinstance(p, ast.EventPattern):
        return
    if isinstance(p, ast.Repeat):
        if p.hi is not None and p.hi < p.lo:
            probs.add(f"{{{p.lo},{p.hi}}} repeats at least {p.lo} and at most {p.hi} times; write the smaller "
                      f"count first", p.span)
        elif p.hi == 0:
            probs.add("{0} repeats nothing; a repetition needs at least one iteration", p.span)
        elif p.lo == 0 and not isinstance(parent, ast.Seq):
            probs.add("a part that may match nothing (?, *, {0,m}) stands only as a part of a SEQ", p.span)
    if isinstance(p, ast.Seq):
        parts = p.parts
        for i, part in enumerate(parts):
            if isinstance(part, ast.Not) or not _nullable(part):
                continue
            if any(0 <= j < len(parts) and isinstance(parts[j], ast.Not) for j in (i - 1, i + 1)):
                probs.add("a part that may match nothing may not stand next to a NOT", part.span)
        positive = [x for x in parts if not isinstance(x, ast.Not)]
        if positive and all(_nullable(x) for x in positive):
            probs.add("every part of this SEQ may match nothing; at least one must match an event", p.span)
        for part in parts:
            _check_repetition(part, p, probs)
        return
    _check_repetition(p.inner, p, probs)  # type: ignore[union-attr]


def _states(p: ast.Pattern) -> int:
    """How many states `structure.unroll` makes of `p`, without unrolling it."""
    if isinstance(p, ast.EventPattern):
        return 1
    if isinstance(p, ast.Seq):
        return sum(_states(x) for x in p.parts)
    inner = _states(p.inner)
    if isinstance(p, ast.Repeat) and p.counted:
        return inner * max(p.hi or p.lo, 1)
    return inner


def _nullable(p: ast.Pattern) -> bool:
    try:
        return shape(unroll(p)).nullable
    except ValueError:  # bounds the checks above report
        return False


def _first_counted(p: ast.Pattern) -> ast.Span | None:
    """The first repetition that unrolls into copies, for an error's position."""
    if isinstance(p, ast.Repeat) and p.counted:
        return p.span
    for child in p.parts if isinstance(p, ast.Seq) else () if isinstance(p, ast.EventPattern) else (p.inner,):
        got = _first_counted(child)
        if got is not None:
            return got
    return None


def _check_returns(query: ast.Query, aliases: dict[str, AliasInfo], probs: _Problems) -> None:
    names: dict[str, ast.ReturnItem] = {}
    for item in query.returns:
        if isinstance(item, ast.GroupItem):
            if item.attr not in query.group_by:
                probs.add(f"RETURN lists {item.attr!r}, which is not a GROUP-BY attribute", item.span)
        else:
            _check_aggregate(item, aliases, probs)
        col = item.column
        if col in names or col in ("window_start", "window_end"):
            probs.add(f"output column {col!r} appears twice; rename one with AS", item.span)
        names[col] = item
    for attr in query.group_by:
        if attr not in {i.attr for i in query.returns if isinstance(i, ast.GroupItem)} and attr in names:
            probs.add(f"output column {attr!r} clashes with the GROUP-BY attribute of that name", names[attr].span)


def _check_aggregate(item: ast.Aggregate, aliases: dict[str, AliasInfo], probs: _Problems) -> None:
    if item.alias is None:
        return
    info = aliases.get(item.alias)
    if info is None:
        probs.add(f"{item.func} over unknown alias {item.alias!r}; the pattern binds {_names(aliases)}", item.span)
    elif not info.positive:
        probs.add(f"{item.func} over {item.alias!r}, an alias under NOT; negative events are never in a trend", item.span)


def _check_where(query: ast.Query, aliases: dict[str, AliasInfo], probs: _Problems) -> None:
    pairs = adjacent_pairs(query.pattern)
    for pred in query.where:
        if isinstance(pred, ast.Equivalence):
            _check_equivalence(pred, aliases, probs)
        else:
            _check_condition(pred, aliases, pairs, probs)


def _check_equivalence(pred: ast.Equivalence, aliases: dict[str, AliasInfo], probs: _Problems) -> None:
    for ref in pred.attrs:
        if ref.alias is None:
            if not any(a.positive for a in aliases.values()):
                probs.add(f"equivalence attribute {ref.attr!r} applies to no positive alias", ref.span)
            continue
        info = aliases.get(ref.alias)
        if info is None:
            probs.add(f"unknown alias {ref.alias!r}; the pattern binds {_names(aliases)}", ref.span)
        elif not info.positive and not _applies_positive(pred, ref.attr, aliases):
            probs.add(f"equivalence attribute {ref.alias}.{ref.attr} must apply to at least one positive alias", ref.span)


def _applies_positive(pred: ast.Equivalence, attr: str, aliases: dict[str, AliasInfo]) -> bool:
    return any(
        r.attr == attr and (r.alias is None or (r.alias in aliases and aliases[r.alias].positive))
        for r in pred.attrs
    )


def _check_condition(
    pred: ast.Condition, aliases: dict[str, AliasInfo], pairs: set[tuple[str, str]], probs: _Problems
) -> None:
    if _contains_equivalence(pred.expr):
        probs.add("an equivalence [..] must stand on its own, joined to the rest by AND", pred.span)
        return
    refs = ast.expr_refs(pred.expr)
    ok = True
    for ref in refs:
        if ref.alias is None:
            probs.add(f"qualify attribute {ref.attr!r} with an alias, e.g. X.{ref.attr}", ref.span)
            ok = False
        elif ref.alias not in aliases:
            probs.add(f"unknown alias {ref.alias!r}; the pattern binds {_names(aliases)}", ref.span)
            ok = False
    if not ok:
        return
    plain = sorted({r.alias for r in refs if not r.next})  # type: ignore[type-var]
    nexts = sorted({r.alias for r in refs if r.next})  # type: ignore[type-var]
    if not refs:
        probs.add("predicate refers to no event attribute", pred.span)
    elif len(plain) > 1 or len(nexts) > 1:
        probs.add("one predicate may not mix two different aliases or alias pairs; split it with AND", pred.span)
    elif nexts and not plain:
        probs.add(f"edge predicate needs both X.a and NEXT({nexts[0]}).b", pred.span)
    elif nexts and (plain[0], nexts[0]) not in pairs:
        probs.add(f"{plain[0]} is never immediately followed by {nexts[0]} in the pattern", pred.span)


def _check_optional_equivalence(query: ast.Query, aliases: dict[str, AliasInfo], probs: _Problems) -> None:
    """An equivalence attribute of some aliases only must apply to one that every
    trend has: a trend that leaves out each of them (a part that may match nothing)
    would carry no value of it, and belong to every group of its values."""
    applies: dict[str, set[str]] = {}
    first: dict[str, ast.AttrRef] = {}
    for pred in query.where:
        if isinstance(pred, ast.Equivalence):
            for ref in pred.attrs:
                applies.setdefault(ref.attr, set()).update(aliases if ref.alias is None else {ref.alias})
                first.setdefault(ref.attr, ref)
    always = _mandatory(query.pattern)
    for attr, names in applies.items():
        if attr in query.group_by or names >= set(aliases) or names & always:
            continue
        probs.add(f"equivalence attribute {attr!r} applies only to {', '.join(sorted(names))}, which a trend may "
                  f"leave out (a part that may match nothing); apply it to an alias every trend has as well",
                  first[attr].span)


def _mandatory(p: ast.Pattern) -> set[str]:
    """The positive aliases every trend of `p` binds an event to."""
    if isinstance(p, ast.EventPattern):
        return {p.alias}
    if isinstance(p, ast.Not) or (isinstance(p, ast.Repeat) and p.lo == 0):
        return set()
    if isinstance(p, ast.Seq):
        return set().union(*(_mandatory(x) for x in p.parts))
    return _mandatory(p.inner)


def _contains_equivalence(e: object) -> bool:
    if isinstance(e, ast.Equivalence):
        return True
    if isinstance(e, ast.Unary):
        return _contains_equivalence(e.operand)
    if isinstance(e, ast.Binary):
        return _contains_equivalence(e.left) or _contains_equivalence(e.right)
    return False


def _check_group_by(query: ast.Query, probs: _Problems) -> None:
    seen: set[str] = set()
    for attr, span in zip(query.group_by, query.group_spans or [ast.NO_SPAN] * len(query.group_by)):
        if attr in seen:
            probs.add(f"GROUP-BY lists {attr!r} twice", span)
        seen.add(attr)


def _check_durations(query: ast.Query, probs: _Problems) -> None:
    for d, what in ((query.within, "WITHIN"), (query.slide, "SLIDE")):
        if d is not None and d.amount <= 0:
            probs.add(f"{what} must be a positive duration", d.span)
    if query.slide is not None and query.within.amount > 0 and query.slide.seconds > query.within.seconds:
        probs.add("SLIDE may not be longer than WITHIN", query.slide.span)


def _names(aliases: dict[str, AliasInfo]) -> str:
    return ", ".join(sorted(aliases)) or "nothing"


def parse_and_analyze(text: str) -> ast.Query:
    """Parse, then analyze; one call for callers that hold only the text."""
    return analyze(parse(text), text)
