"""GRETA templates: the pattern split into positive and negative parts.

Algorithm 3 of the GRETA paper splits a pattern at its NOT parts into one
positive template and one template per negative sub-pattern (recursively:
a negative pattern may hold middle NOTs of its own). Algorithm 1 builds each
template: its states are the aliases, START and END the first and last
aliases, and its transitions the adjacencies (SEQ and `+`). Every transition
created by a SEQ across a NOT is linked to that NOT's template (middle
negation); the root template also records a leading and a trailing NOT.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from greta_stream.query import ast
from greta_stream.query.structure import shape


@dataclass
class Transition:
    """Events of `src` may precede events of `dst` in a trend.

    `negation` is the id of the negative template whose matches must not lie
    strictly between the two events; `edge` the compiled edge predicate.
    """

    src: str
    dst: str
    via: str
    negation: int | None = None
    edge: object = None  # Callable[[dict, dict], bool] | None, set by the compiler
    edge_text: str = ""
    edge_exprs: tuple = ()  # the edge predicates (ast.Expr) AND-ed in `edge`, in WHERE order


@dataclass
class Template:
    """One positive or negative (sub-)pattern compiled to a GRETA template."""

    id: int
    negative: bool
    states: list[str]
    start: list[str]
    end: list[str]
    transitions: list[Transition] = field(default_factory=list)
    leading: int | None = None
    trailing: int | None = None
    text: str = ""

    def incoming(self, state: str) -> list[Transition]:
        return [t for t in self.transitions if t.dst == state]


def build_templates(pattern: ast.Pattern) -> list[Template]:
    """Template 0 is the positive pattern; the rest are negative sub-patterns."""
    out: list[Template] = []
    _build(pattern, negative=False, out=out)
    return out


def _build(p: ast.Pattern, negative: bool, out: list[Template]) -> int:
    sh = shape(p)
    tpl = Template(len(out), negative, sh.aliases, sh.first, sh.last, text=format_pattern(p))
    out.append(tpl)
    neg_ids: dict[int, int] = {}
    for link in sh.links:
        neg = None
        if link.negation is not None:
            key = id(link.negation)
            if key not in neg_ids:
                neg_ids[key] = _build(link.negation.inner, True, out)
            neg = neg_ids[key]
        tpl.transitions.append(Transition(link.src, link.dst, link.via, neg))
    if isinstance(p, ast.Seq):
        if isinstance(p.parts[0], ast.Not):
            tpl.leading = _build(p.parts[0].inner, True, out)
        if isinstance(p.parts[-1], ast.Not):
            tpl.trailing = _build(p.parts[-1].inner, True, out)
    return tpl.id


def format_pattern(p: ast.Pattern) -> str:
    """Query-language text of a pattern."""
    if isinstance(p, ast.EventPattern):
        return p.type if p.alias == p.type else f"{p.type} {p.alias}"
    if isinstance(p, ast.Kleene):
        inner = format_pattern(p.inner)
        return f"{inner}+" if isinstance(p.inner, ast.EventPattern) and p.inner.alias == p.inner.type else f"({inner})+"
    if isinstance(p, ast.Repeat):
        inner = format_pattern(p.inner)
        if not (isinstance(p.inner, ast.EventPattern) and p.inner.alias == p.inner.type):
            inner = f"({inner})"
        if (p.lo, p.hi) == (0, 1):
            return f"{inner}?"
        if (p.lo, p.hi) == (0, None):
            return f"{inner}*"
        if p.hi == p.lo:
            return f"{inner}{{{p.lo}}}"
        return f"{inner}{{{p.lo},{'' if p.hi is None else p.hi}}}"
    if isinstance(p, ast.Not):
        return f"NOT {format_pattern(p.inner)}"
    return "SEQ(" + ", ".join(format_pattern(x) for x in p.parts) + ")"
