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
    nullable: bool = False  # the pattern may match no event (`P?`, `P*`)


def shape(p: ast.Pattern) -> Shape:
    """First, last, links and aliases of a positive pattern (NOT parts skipped).

    Counted repetitions must be unrolled first (`unroll`): `P?` and `P*` are
    the only repetitions this takes, as a part that may match nothing."""
    if isinstance(p, ast.EventPattern):
        return Shape([p.alias], [p.alias], [], [p.alias])
    if isinstance(p, (ast.Kleene, ast.Repeat)):
        inner = shape(p.inner)
        loops = [] if isinstance(p, ast.Repeat) and p.hi is not None else [
            Link(a, b, None, "kleene") for a in inner.last for b in inner.first]
        if isinstance(p, ast.Repeat) and p.counted:
            raise ValueError(f"unroll counted repetitions before shape(): {p!r}")
        nullable = inner.nullable or (isinstance(p, ast.Repeat) and p.lo == 0)
        return Shape(inner.first, inner.last, _dedup(inner.links + loops), inner.aliases, nullable)
    if isinstance(p, ast.Not):
        return Shape(nullable=True)
    return _seq_shape(p)


def _seq_shape(p: ast.Seq) -> Shape:
    """Glushkov's SEQ: a part may follow any earlier part when every positive
    part between them may match nothing (the analyzer keeps such parts away
    from NOTs, so a link skips a NOT only between two adjacent positive parts)."""
    out = Shape()
    parts: list[tuple[Shape, ast.Not | None]] = []  # positive parts with the NOT just before each
    pending_not: ast.Not | None = None
    for part in p.parts:
        if isinstance(part, ast.Not):
            pending_not = part
            continue
        cur = shape(part)
        out.links.extend(cur.links)
        out.aliases.extend(cur.aliases)
        for prev, _ in reversed(parts):
            out.links.extend(Link(a, b, pending_not, "seq") for a in prev.last for b in cur.first)
            if not prev.nullable:
                break
        parts.append((cur, pending_not))
        pending_not = None
    for cur, _ in parts:
        out.first.extend(a for a in cur.first if a not in out.first)
        if not cur.nullable:
            break
    for cur, _ in reversed(parts):
        out.last.extend(a for a in cur.last if a not in out.last)
        if not cur.nullable:
            break
    out.nullable = all(cur.nullable for cur, _ in parts)
    out.links = _dedup(out.links)
    return out


COPY = "#"  # an unrolled copy of alias X is the state `X#k`: never a name of the query language


def origin(state: str) -> str:
    """The query's alias of a state: itself, or the alias an unrolled copy repeats."""
    return state.partition(COPY)[0]


def unroll(p: ast.Pattern) -> ast.Pattern:
    """The pattern with its counted repetitions written out (SEMANTICS section 8).

    `P{n,m}` becomes `SEQ(P, P#1, .., P#n-1, (SEQ(P#n, (..)?))?)` and `P{n,}`
    `SEQ(P, .., (P#n-1)+)`: a copy renames every alias of P to a state of its own
    (`X#k`) that stands for X in predicates and aggregates. The analyzer lets
    only unambiguous parts repeat (no part starts an iteration in the middle of
    another), so a trend's binding fixes its path through the copies: each
    trend is counted once. `P?` and `P*` stay as they are (parts that may
    match nothing)."""
    counter = [0]

    def copy(q: ast.Pattern) -> ast.Pattern:
        counter[0] += 1
        return _renamed(q, f"{COPY}{counter[0]}")

    def walk(q: ast.Pattern) -> ast.Pattern:
        if isinstance(q, ast.EventPattern):
            return q
        if isinstance(q, ast.Kleene):
            return ast.Kleene(walk(q.inner), span=q.span)
        if isinstance(q, ast.Not):
            return ast.Not(walk(q.inner), span=q.span)
        if isinstance(q, ast.Seq):
            return ast.Seq(tuple(walk(x) for x in q.parts), span=q.span)
        inner = walk(q.inner)
        if not q.counted:
            return ast.Repeat(inner, q.lo, q.hi, span=q.span)
        lo = max(q.lo, 1)
        copies = [inner] + [copy(inner) for _ in range((q.hi or lo) - 1)]
        need = copies[:lo]
        if q.hi is None:
            need[-1] = ast.Kleene(need[-1], span=q.span)
        tail: ast.Pattern | None = None
        for c in reversed(copies[lo:] if q.hi is not None else []):
            tail = ast.Repeat(c if tail is None else ast.Seq((c, tail), span=q.span), 0, 1, span=q.span)
        if q.lo == 0:  # {0,m}: the first copy is optional too
            tail = ast.Repeat(need[0] if tail is None else ast.Seq((need[0], tail), span=q.span), 0, 1, span=q.span)
            return tail
        parts = need + ([tail] if tail is not None else [])
        return parts[0] if len(parts) == 1 else ast.Seq(tuple(parts), span=q.span)

    return walk(p)


def _renamed(p: ast.Pattern, suffix: str) -> ast.Pattern:
    if isinstance(p, ast.EventPattern):
        return ast.EventPattern(p.type, p.alias + suffix, span=p.span)
    if isinstance(p, ast.Kleene):
        return ast.Kleene(_renamed(p.inner, suffix), span=p.span)
    if isinstance(p, ast.Not):
        return ast.Not(_renamed(p.inner, suffix), span=p.span)
    if isinstance(p, ast.Repeat):
        return ast.Repeat(_renamed(p.inner, suffix), p.lo, p.hi, span=p.span)
    return ast.Seq(tuple(_renamed(x, suffix) for x in p.parts), span=p.span)


def ambiguous(p: ast.Pattern) -> bool:
    """Whether one binding of the positive pattern (its sequence of the
    query's aliases) has two paths through the unrolled states: `(A+){2}` or
    `(A{1,2})+` can cut `a a a` into iterations in more than one way, and
    would count that trend more than once. The product of the automaton with
    itself over equal aliases has a reachable pair of different states from
    which an accepting pair is reachable exactly then."""
    sh = shape(unroll(p))
    succ: dict[str, list[str]] = {}
    for link in sh.links:
        succ.setdefault(link.src, []).append(link.dst)
    last = set(sh.last)

    def pairs_after(a: str, b: str) -> list[tuple[str, str]]:
        return [(x, y) for x in succ.get(a, ()) for y in succ.get(b, ()) if origin(x) == origin(y)]

    seen = {(a, b) for a in sh.first for b in sh.first if origin(a) == origin(b)}
    todo = list(seen)
    edges: dict[tuple[str, str], list[tuple[str, str]]] = {}
    while todo:
        pair = todo.pop()
        edges[pair] = pairs_after(*pair)
        for nxt in edges[pair]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    back: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for pair, outs in edges.items():
        for nxt in outs:
            back.setdefault(nxt, []).append(pair)
    good = {pair for pair in seen if pair[0] in last and pair[1] in last}
    todo = list(good)
    while todo:
        for prev in back.get(todo.pop(), ()):
            if prev not in good:
                good.add(prev)
                todo.append(prev)
    return any(a != b for a, b in good)


def _dedup(links: list[Link]) -> list[Link]:
    seen: dict[tuple[str, str], Link] = {}
    for link in links:
        seen.setdefault((link.src, link.dst), link)
    return list(seen.values())


def negative_parts(p: ast.Pattern) -> list[ast.Not]:
    """Every NOT node of `p`, outermost first (nested ones included)."""
    if isinstance(p, ast.EventPattern):
        return []
    if isinstance(p, (ast.Kleene, ast.Repeat)):
        return negative_parts(p.inner)
    if isinstance(p, ast.Not):
        return [p, *negative_parts(p.inner)]
    out: list[ast.Not] = []
    for part in p.parts:
        out.extend(negative_parts(part))
    return out


def adjacent_pairs(p: ast.Pattern) -> set[tuple[str, str]]:
    """Every (X, Y) of the query's aliases that can be adjacent in a trend of
    `p` or of a negative part."""
    p = unroll(p)
    links = list(shape(p).links)
    for neg in negative_parts(p):
        links += shape(neg.inner).links
    return {(origin(link.src), origin(link.dst)) for link in links}
