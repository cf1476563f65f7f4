"""AST -> `CompiledQuery`: templates, predicates, partitions, aggregates, panes.

The compiled query is immutable configuration; the engine builds runtime
state from it. Predicates are classified (GRETA section 6) into local ones
(filter the events of a state), equivalence ones (partition keys) and edge
ones (checked on transitions). `explain()` prints it all.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from greta_stream.compiler.expressions import compile_edge, compile_expr, compile_local, format_expr
from greta_stream.compiler.limits import LIMITS, Limits, check_limits, check_window_length
from greta_stream.compiler.templates import Template, Transition, build_templates, format_pattern
from greta_stream.errors import QueryError, QueryProblem
from greta_stream.query import ast
from greta_stream.query.aggregates import function
from greta_stream.query.analyzer import aliases_of, analyze
from greta_stream.query.parser import parse
from greta_stream.query.structure import origin, unroll


@dataclass(frozen=True)
class Component:
    """An equivalence attribute and the aliases it applies to."""

    attr: str
    aliases: frozenset[str]


@dataclass
class AliasSpec:
    """One state: the alias, its type, its template and its local filter."""

    alias: str
    type: str
    positive: bool
    template: int
    local: Callable[[Any], bool] | None = None
    local_text: list[str] = field(default_factory=list)
    needed: set[str] = field(default_factory=set)
    numeric: set[str] = field(default_factory=set)
    run_components: tuple[int, ...] = ()  # indexes into CompiledQuery.run_components
    origin: str = ""  # the query's alias this state stands for (an unrolled copy `X#k`); "" = itself

    @property
    def name(self) -> str:
        """The query's alias: what predicates, aggregates and trends call this state."""
        return self.origin or self.alias


@dataclass(frozen=True)
class AggField:
    """One propagated intermediate aggregate (GRETA Theorem 9.1)."""

    kind: str  # a field kind of query/aggregates.py: "count", "sum", "min", "max"
    alias: str
    attr: str | None = None


@dataclass(frozen=True)
class OutputAgg:
    """A RETURN aggregate: column name and the fields it is computed from."""

    column: str
    func: str
    count_field: int | None  # index into fields; None for COUNT(*)
    value_field: int | None


def fraction_gcd(a: Fraction, b: Fraction) -> Fraction:
    """The largest d such that a/d and b/d are both integers."""
    return Fraction(math.gcd(a.numerator * b.denominator, b.numerator * a.denominator), a.denominator * b.denominator)


@dataclass(frozen=True)
class WindowSpec:
    """Windows [k*slide, k*slide + within) in seconds; panes of `pane` seconds."""

    within: Fraction
    slide: Fraction

    @property
    def pane(self) -> Fraction:
        return fraction_gcd(self.within, self.slide)

    @property
    def windows_per_event(self) -> int:
        return math.ceil(self.within / self.slide)


@dataclass
class CompiledQuery:
    text: str
    query: ast.Query
    templates: list[Template]
    aliases: dict[str, AliasSpec]
    by_type: dict[str, list[str]]
    common: tuple[str, ...]  # partition attributes that apply to every alias
    run_components: tuple[Component, ...]  # equivalence attributes of some aliases only
    group_by: tuple[str, ...]
    group_columns: tuple[str, ...]
    fields: tuple[AggField, ...]
    outputs: tuple[OutputAgg, ...]
    window: WindowSpec
    strategy: str = ast.ANY_MATCH

    @property
    def root(self) -> Template:
        return self.templates[0]

    @property
    def columns(self) -> list[str]:
        return ["window_start", "window_end", *self.group_columns, *(o.column for o in self.outputs)]

    @property
    def needed_by_type(self) -> dict[str, set[str]]:
        return {t: set().union(*(self.aliases[a].needed for a in names)) for t, names in self.by_type.items()}

    @property
    def numeric_by_type(self) -> dict[str, set[str]]:
        return {t: set().union(*(self.aliases[a].numeric for a in names)) for t, names in self.by_type.items()}

    def explain(self) -> str:
        from greta_stream.compiler.explain import explain

        return explain(self)


def compile_query(text_or_query: str | ast.Query | CompiledQuery, *, limits: Limits | None = LIMITS) -> CompiledQuery:
    """Parse, analyze and compile; raise `QueryError` on any problem, windows
    beyond `limits` included (None: unchecked; a query compiled before is
    returned as it is)."""
    if isinstance(text_or_query, CompiledQuery):
        return text_or_query
    try:
        if isinstance(text_or_query, str):
            text = text_or_query
            query = analyze(parse(text), text)
        else:
            query = analyze(text_or_query)
            text = format_query(query)
        cq = _compile(text, query)
    except RecursionError:  # a safety net: the parser refuses nesting past MAX_NESTING before this
        source = text_or_query if isinstance(text_or_query, str) else None
        raise QueryError([_too_deep(source)], source) from None
    check_window_length(cq)
    return cq if limits is None else check_limits(cq, limits)


_CONNECTIVES = re.compile(r"(?i)\b(?:AND|OR)\b")


def _too_deep(text: str | None) -> QueryProblem:
    """Where a query nests too deeply: its deepest parenthesis, else its longest run of + or *, else its start."""
    if not text:
        return QueryProblem("the query is nested too deeply", 1, 1)
    depth = best = 0
    at = 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth > best:
            best, at = depth, i
    runs = [(m.end() - m.start(), m.start()) for m in re.finditer(r"[+*]{2,}", text)]
    what = f"{best} nested parentheses"
    if runs and max(runs)[0] > best:
        (length, at) = max(runs)
        what = f"{length} repeated Kleene operators"
    elif best < 20:
        at, what = 0, f"{len(_CONNECTIVES.findall(text))} conditions in one chain"
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return QueryProblem(f"the query is nested too deeply ({what}); simplify it", line, column)


def _compile(text: str, query: ast.Query) -> CompiledQuery:
    templates = build_templates(unroll(query.pattern))
    aliases = _alias_specs(query, templates)
    components = _components(query, aliases)
    common = tuple(c.attr for c in components if c.aliases == frozenset(aliases))
    run_components = tuple(c for c in components if c.aliases != frozenset(aliases))
    for spec in aliases.values():
        spec.needed |= {c.attr for c in components if spec.alias in c.aliases}
        spec.run_components = tuple(i for i, c in enumerate(run_components) if spec.alias in c.aliases)
    _attach_predicates(query, templates, aliases)
    fields, outputs = _aggregates(query, aliases)
    by_type: dict[str, list[str]] = {}
    for spec in aliases.values():
        by_type.setdefault(spec.type, []).append(spec.alias)
    renames = {i.attr: i.column for i in query.returns if isinstance(i, ast.GroupItem)}
    return CompiledQuery(
        text=text, query=query, templates=templates, aliases=aliases, by_type=by_type,
        common=common, run_components=run_components, group_by=query.group_by,
        group_columns=tuple(renames.get(g, g) for g in query.group_by),
        fields=fields, outputs=outputs,
        window=WindowSpec(query.within.seconds, query.slide_or_within.seconds),
        strategy=query.strategy,
    )


def _alias_specs(query: ast.Query, templates: list[Template]) -> dict[str, AliasSpec]:
    """One spec per state: the query's aliases, then the unrolled copies of
    counted repetitions (`structure.unroll`), which share their alias's
    predicates, partitions and aggregates."""
    owner = {state: t.id for t in reversed(templates) for state in t.states}
    infos = aliases_of(query)
    specs = {
        a.alias: AliasSpec(a.alias, a.type, a.positive, owner[a.alias], needed=set(query.group_by))
        for a in infos.values()
    }
    for state in owner:
        if state not in specs:
            a = infos[origin(state)]
            specs[state] = AliasSpec(state, a.type, a.positive, owner[state], needed=set(query.group_by),
                                     origin=a.alias)
    return specs


def _states(aliases: dict[str, AliasSpec], alias: str) -> list[AliasSpec]:
    """The specs of a query alias: its own and its copies'."""
    return [s for s in aliases.values() if s.name == alias]


def _components(query: ast.Query, aliases: dict[str, AliasSpec]) -> list[Component]:
    """Equivalence attributes merged by name; GROUP-BY applies to every alias."""
    applies: dict[str, set[str]] = {g: set(aliases) for g in query.group_by}
    for pred in query.where:
        if isinstance(pred, ast.Equivalence):
            for ref in pred.attrs:
                names = aliases if ref.alias is None else {s.alias for s in _states(aliases, ref.alias)}
                applies.setdefault(ref.attr, set()).update(names)
    return [Component(attr, frozenset(names)) for attr, names in applies.items()]


def _attach_predicates(query: ast.Query, templates: list[Template], aliases: dict[str, AliasSpec]) -> None:
    local: dict[str, list[ast.Expr]] = {}
    edge: dict[tuple[str, str], list[ast.Expr]] = {}
    for pred in query.where:
        if isinstance(pred, ast.Equivalence):
            continue
        refs = ast.expr_refs(pred.expr)
        plain = next(r.alias for r in refs if not r.next)
        nxt = next((r.alias for r in refs if r.next), None)
        for r in refs:
            for spec in _states(aliases, r.alias):  # type: ignore[arg-type]
                spec.needed.add(r.attr)
        if nxt is None:
            local.setdefault(plain, []).append(pred.expr)  # type: ignore[arg-type]
        else:
            edge.setdefault((plain, nxt), []).append(pred.expr)  # type: ignore[arg-type]
    for alias, exprs in local.items():
        fn, texts = compile_local(exprs), [format_expr(e) for e in exprs]
        for spec in _states(aliases, alias):
            spec.local, spec.local_text = fn, texts
    for tpl in templates:
        for tr in tpl.transitions:
            exprs = edge.get((origin(tr.src), origin(tr.dst)), [])
            tr.edge = compile_edge(exprs)
            tr.edge_exprs = tuple(exprs)
            tr.edge_text = " AND ".join(format_expr(e) for e in exprs)


def _aggregates(query: ast.Query, aliases: dict[str, AliasSpec]) -> tuple[tuple[AggField, ...], tuple[OutputAgg, ...]]:
    fields: list[AggField] = []

    def field_index(f: AggField) -> int:
        if f not in fields:
            fields.append(f)
        return fields.index(f)

    outputs: list[OutputAgg] = []
    for item in query.returns:
        if not isinstance(item, ast.Aggregate):
            continue
        if item.alias is None:
            outputs.append(OutputAgg(item.column, "COUNT", None, None))
            continue
        count = field_index(AggField("count", item.alias))
        value = None
        if item.attr is not None:
            for spec in _states(aliases, item.alias):
                spec.needed.add(item.attr)
                spec.numeric.add(item.attr)
            kind = function(item.func).value
            assert kind is not None, f"{item.func} takes an alias, not an attribute"  # the grammar says so
            value = field_index(AggField(kind, item.alias, item.attr))
        outputs.append(OutputAgg(item.column, item.func, count, value))
    return tuple(fields), tuple(outputs)


def format_query(q: ast.Query) -> str:
    """Query-language text of an AST; `parse(format_query(q)) == q`."""
    lines = ["RETURN " + ("TRENDS" if q.trends else ", ".join(_format_item(i) for i in q.returns))]
    lines.append("PATTERN " + format_pattern(q.pattern))
    if q.strategy != ast.ANY_MATCH:
        lines.append("SEMANTICS " + q.strategy)
    if q.where:
        lines.append("WHERE " + " AND ".join(_format_pred(p) for p in q.where))
    if q.group_by:
        lines.append("GROUP-BY " + ", ".join(q.group_by))
    within = f"WITHIN {_format_duration(q.within)}"
    if q.slide is not None:
        within += f" SLIDE {_format_duration(q.slide)}"
    lines.append(within)
    return "\n".join(lines)


def _format_item(i: ast.ReturnItem) -> str:
    if isinstance(i, ast.GroupItem):
        body = i.attr
    elif i.alias is None:
        body = "COUNT(*)"
    elif i.attr is None:
        body = f"{i.func}({i.alias})"
    else:
        body = f"{i.func}({i.alias}.{i.attr})"
    return f"{body} AS {i.name}" if i.name else body


def _format_pred(p: ast.Predicate) -> str:
    if isinstance(p, ast.Equivalence):
        return "[" + ", ".join(r.attr if r.alias is None else f"{r.alias}.{r.attr}" for r in p.attrs) + "]"
    return format_expr(p.expr)


def _format_duration(d: ast.Duration) -> str:
    amount = d.amount
    text = str(amount.numerator) if amount.denominator == 1 else repr(float(amount))
    return f"{text} {d.unit}"


__all__ = ["CompiledQuery", "compile_query", "format_query", "Transition", "Template", "compile_expr"]
