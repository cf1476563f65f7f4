"""The oracle's view of a pattern's structure: SEQ parts with their NOTs, repetition
counts, nullability, and the Glushkov first/last/follow sets (transitions).

Shares nothing with the engine (see `greta_stream.testing.oracle`).
"""

from __future__ import annotations

from typing import NamedTuple

from greta_stream.query.ast import EventPattern, Kleene, Not, Pattern, Repeat, Seq


def seq_parts(seq: Seq) -> list[tuple[list[Not], Pattern]]:
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


def counts(p: Pattern) -> tuple[Pattern, int, int | None]:
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
        inner, lo, _ = counts(p)
        return lo == 0 or nullable(inner)
    if isinstance(p, Seq):
        return all(nullable(part) for _, part in seq_parts(p))
    raise ValueError(f"cannot match {p!r} here")



class Shape(NamedTuple):
    """Glushkov view of a positive pattern: who starts, who ends, who follows whom."""

    first: frozenset[str]
    last: frozenset[str]
    nullable: bool
    follow: dict[tuple[str, str], set[tuple[Not, ...]]]  # (X, Y) -> NOTs each X->Y step crosses


def pattern_shape(p: Pattern) -> Shape:
    """First/last aliases and transitions of p (negative patterns stay out)."""
    if isinstance(p, EventPattern):
        one = frozenset({p.alias})
        return Shape(one, one, False, {})
    if isinstance(p, (Kleene, Repeat)):
        inner_p, lo, hi = counts(p)
        inner = pattern_shape(inner_p)
        follow = {pair: set(crossed) for pair, crossed in inner.follow.items()}
        if hi is None or hi >= 2:  # the loop from one iteration to the next
            for x in inner.last:
                for y in inner.first:
                    follow.setdefault((x, y), set()).add(())
        return Shape(inner.first, inner.last, lo == 0 or inner.nullable, follow)
    if isinstance(p, Seq):
        return _seq_shape(seq_parts(p))
    raise ValueError(f"cannot match {p!r} here")


def _seq_shape(parts: list[tuple[list[Not], Pattern]]) -> Shape:
    """Shape of a SEQ: a part follows every earlier part up to the last that must match."""
    shapes = [(tuple(nots), pattern_shape(part)) for nots, part in parts]
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
    return Shape(frozenset(first), frozenset(last), all(s.nullable for _, s in shapes), follow)

