"""Counted repetitions inside counted groups, written out into copies of their aliases (`written_out`), and
where a copy stands for its alias (`copies`, `with_copies`).

A counted group's lanes count its own iterations (`iterations.py`), one count per lane: a repetition inside
it, counted too, is written out first, as the compiler's `structure.unroll` writes it (`(SEQ(A, B{2})){3}` is
`(SEQ(A, B, B#1)){3}`), and each copy is a state of its own. A copy stands for its alias in local and edge
predicates (`plan.columnar_plan`: every adjacent pair of states standing for X and Y), in partitions
(`with_copies`) and in aggregates (`cells.aggregate_cells`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from greta_stream.compiler.compiled import CompiledQuery, Component
from greta_stream.engine.columnar.parts import State
from greta_stream.query import ast
from greta_stream.query.structure import origin, unroll


def written_out(p: ast.Pattern) -> ast.Pattern:
    """`p` with the counted repetitions inside each counted group written out (`structure.unroll`):
    `(SEQ(A, B{2})){3}` is `(SEQ(A, B, B#1)){3}`, `(SEQ(A, (SEQ(B, C)){2})){3}` is
    `(SEQ(A, B, C, B#1, C#1)){3}`, a NOT inside the repetition copied with it."""
    if isinstance(p, ast.EventPattern | ast.Not):
        return p
    if isinstance(p, ast.Seq):
        return ast.Seq(tuple(written_out(x) for x in p.parts), span=p.span)
    if isinstance(p, ast.Kleene):
        return ast.Kleene(written_out(p.inner), span=p.span)
    inner = p.inner
    if isinstance(inner, ast.Seq) and p.counted and _holds_count(inner):
        return ast.Repeat(_flat(unroll(inner)), p.lo, p.hi, span=p.span)
    return ast.Repeat(written_out(inner), p.lo, p.hi, span=p.span)


def _holds_count(p: ast.Pattern) -> bool:
    """A counted repetition somewhere in `p`, but under a NOT (a negated SEQ counts its own parts)."""
    if isinstance(p, ast.Repeat):
        return p.counted or _holds_count(p.inner)
    if isinstance(p, ast.Seq):
        return any(_holds_count(x) for x in p.parts)
    return isinstance(p, ast.Kleene) and _holds_count(p.inner)


def _flat(p: ast.Pattern) -> ast.Pattern:
    """`p` with every SEQ that is a part of a SEQ spliced into it (`SEQ(A, SEQ(B, C))` is `SEQ(A, B, C)`)."""
    if isinstance(p, ast.Seq):
        parts: list[ast.Pattern] = []
        for x in (_flat(x) for x in p.parts):
            parts += x.parts if isinstance(x, ast.Seq) else (x,)
        return ast.Seq(tuple(parts), span=p.span)
    if isinstance(p, ast.Kleene):
        return ast.Kleene(_flat(p.inner), span=p.span)
    if isinstance(p, ast.Not):
        return ast.Not(_flat(p.inner), span=p.span)
    if isinstance(p, ast.Repeat):
        return ast.Repeat(_flat(p.inner), p.lo, p.hi, span=p.span)
    return p


def copies(states: Sequence[State], alias: str) -> list[int]:
    """The states standing for `alias`: its own, and the copies `written_out` made of it (`B#1` for `B`)."""
    return [i for i, s in enumerate(states) if s.alias == alias or origin(s.alias) == alias]


def with_copies(cq: CompiledQuery, states: Sequence[State]) -> CompiledQuery:
    """`cq` with each partition attribute applying to the copies among `states` of the aliases it applies
    to (the compiler's own copies are named otherwise: `structure.unroll` numbers the whole pattern's)."""
    made = [s.alias for s in states if origin(s.alias) != s.alias]
    if not made:
        return cq
    named = [Component(c.attr, c.aliases | {a for a in made if origin(a) in c.aliases}) for c in cq.run_components]
    return replace(cq, run_components=tuple(named))
