"""The positive structure of a pattern: first/last aliases and adjacencies.

Every alias occurs once in a pattern, so a pattern denotes a *local*
language: an alias sequence matches iff it starts in `first`, ends in `last`
and every adjacent pair is a `Link` (Glushkov; GRETA's template, Algorithm 1
of the paper, is the same graph). Each link remembers the NOT part it crosses
(SEQ-created adjacencies only), which is what middle negation constrains.
NOT parts are not descended into here: a negative pattern has a shape of its
own. Used by the analyzer (which pairs may carry edge predicates) and by the
compiler (templates).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from greta_stream.query import ast


@dataclass(frozen=True)
class Link:
    """`src` may be immediately followed by `dst`; `negation` is crossed."""

    src: str
    dst: str
    negation: ast.Not | None = None
    via: str = "seq"  # "seq" or "kleene": the operator that creates it


@dataclass
class Shape:
    first: list[str] = field(default_factory=list)
    last: list[str] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)


def shape(p: ast.Pattern) -> Shape:
    """First, last, links and aliases of a positive pattern (NOT parts skipped)."""
    if isinstance(p, ast.EventPattern):
        return Shape([p.alias], [p.alias], [], [p.alias])
    if isinstance(p, ast.Kleene):
        inner = shape(p.inner)
        loops = [Link(a, b, None, "kleene") for a in inner.last for b in inner.first]
        return Shape(inner.first, inner.last, _dedup(inner.links + loops), inner.aliases)
    if isinstance(p, ast.Not):
        return Shape()
    return _seq_shape(p)


def _seq_shape(p: ast.Seq) -> Shape:
    out = Shape()
    prev: Shape | None = None
    pending_not: ast.Not | None = None
    for part in p.parts:
        if isinstance(part, ast.Not):
            pending_not = part
            continue
        cur = shape(part)
        out.links.extend(cur.links)
        out.aliases.extend(cur.aliases)
        if prev is None:
            out.first = cur.first
        else:
            out.links.extend(Link(a, b, pending_not, "seq") for a in prev.last for b in cur.first)
        prev, pending_not = cur, None
    out.last = prev.last if prev is not None else []
    out.links = _dedup(out.links)
    return out


def _dedup(links: list[Link]) -> list[Link]:
    seen: dict[tuple[str, str], Link] = {}
    for link in links:
        seen.setdefault((link.src, link.dst), link)
    return list(seen.values())


def negative_parts(p: ast.Pattern) -> list[ast.Not]:
    """Every NOT node of `p`, outermost first (nested ones included)."""
    if isinstance(p, ast.EventPattern):
        return []
    if isinstance(p, ast.Kleene):
        return negative_parts(p.inner)
    if isinstance(p, ast.Not):
        return [p, *negative_parts(p.inner)]
    out: list[ast.Not] = []
    for part in p.parts:
        out.extend(negative_parts(part))
    return out


def adjacent_pairs(p: ast.Pattern) -> set[tuple[str, str]]:
    """Every (X, Y) that can be adjacent in a trend of `p` or of a negative part."""
    pairs = {(link.src, link.dst) for link in shape(p).links}
    for neg in negative_parts(p):
        pairs |= {(link.src, link.dst) for link in shape(neg.inner).links}
    return pairs
