"""The positions of a SEQ's parts as the columnar kernel numbers them (`plan.columnar_plan`): its
positive states, its negations of one event or of a SEQ of single events, and its counted repetitions."""

from __future__ import annotations

from dataclasses import dataclass

from greta_stream.engine.columnar.columns import Unsupported
from greta_stream.query import ast


@dataclass(frozen=True)
class State:
    """One position of the pattern: an event type under an alias, once or Kleene."""

    alias: str
    type: str
    kleene: bool
    optional: bool = False  # `X?`, `X*`: the part may match no event (its neighbours are then adjacent)


def end_not(parts: list[ast.Pattern], at: int, where: str) -> tuple[State | None, tuple[State, ...]]:
    """A leading (`at` 0) or trailing (-1) NOT taken off `parts`: (its event, or its SEQ's events)."""
    part = parts[at]
    if not isinstance(part, ast.Not):
        return None, ()
    parts.pop(at)
    if isinstance(part.inner, ast.Seq):
        return None, _negated_seq(part.inner)
    return _negated(part, where), ()


def positions(parts: list[ast.Pattern], counted: list[tuple[int, int, int | None]],
              loops: list[tuple[int, int]] | None = None,
              ) -> tuple[list[State], list[tuple[int, State]], list[tuple[int, tuple[State, ...]]]]:
    """The positive states of a SEQ's parts, its middle NOTs of one event and of a SEQ (after state i);
    `counted` gets (state, lo, hi) of each counted repetition, `loops` (first, last) of a Kleene plus over
    a SEQ among the parts (`SEQ(A, (SEQ(B, C))+, D)`: (1, 2))."""
    states: list[State] = []
    mids: list[tuple[int, State]] = []
    negseqs: list[tuple[int, tuple[State, ...]]] = []
    for part in parts:
        seq = _loop_seq(part)
        if seq is not None:  # `(SEQ(B, C))+`, `(SEQ(B, C)){n,m}`: a loop from C back to B, maybe counted
            if loops is None or loops:
                raise Unsupported("a Kleene plus over a SEQ inside another")
            first = len(states)
            inner, inner_mids = _loop(seq)
            mids += [(first + i, n) for i, n in inner_mids]
            states += inner
            loops.append((first, len(states) - 1))
            if isinstance(part, ast.Repeat):  # C's lanes count the loop's iterations (`iterations.py`)
                if len(inner) < 2:
                    raise Unsupported("a counted repetition of a group of one event")
                counted.append((len(states) - 1, part.lo, part.hi))
            continue
        if isinstance(part, ast.Not) and isinstance(part.inner, ast.Seq):  # a scanned predicate of the step
            negseqs.append((len(states) - 1, _negated_seq(part.inner)))
            continue
        if isinstance(part, ast.Not):  # between two positive parts: a generation store
            mids.append((len(states) - 1, _negated(part, "a middle")))
            continue
        if isinstance(part, ast.Repeat) and isinstance(part.inner, ast.Seq):  # optional: `_loop_seq` takes the rest
            raise Unsupported("an optional group inside a SEQ (`(SEQ(B, C))?`, `(SEQ(B, C)){0,2}`)")
        optional = isinstance(part, ast.Repeat) and part.optional and part.hi in (1, None)
        if optional:  # `X?` once or not, `X*` Kleene or not: states a trend may step over
            assert isinstance(part, ast.Repeat)
            part = part.inner if part.hi == 1 else ast.Kleene(part.inner)
        if isinstance(part, ast.Repeat):  # `X{n,m}`, `X{0,m}`, `X{n,}` of one type: a Kleene state with lanes
            counted.append((len(states), part.lo, part.hi))
            optional, part = part.optional, ast.Kleene(part.inner)
        kleene = isinstance(part, ast.Kleene)
        while isinstance(part, ast.Kleene):
            part = part.inner
        if isinstance(part, ast.Not):
            raise Unsupported("negation under a Kleene plus")
        if not isinstance(part, ast.EventPattern):
            raise Unsupported("a Kleene plus or SEQ over more than one event type")
        states.append(State(part.alias, part.type, kleene, optional))
    return states, mids, negseqs


def _loop_seq(part: ast.Pattern) -> ast.Seq | None:
    """The SEQ under a part's Kleene plus or counted repetition (`(SEQ(B, C))+`, `(SEQ(B, C)){2,3}`), if it
    is one."""
    if isinstance(part, ast.Repeat) and not part.optional:
        return part.inner if isinstance(part.inner, ast.Seq) else None
    if not isinstance(part, ast.Kleene):
        return None
    while isinstance(part, ast.Kleene):
        part = part.inner
    return part if isinstance(part, ast.Seq) else None


def _loop(seq: ast.Seq) -> tuple[list[State], list[tuple[int, State]]]:
    """The states and middle NOTs of a SEQ under a Kleene plus inside a SEQ: events, Kleene events and NOTs of
    one event between them; else `Unsupported`."""
    if isinstance(seq.parts[0], ast.Not) or isinstance(seq.parts[-1], ast.Not):
        raise Unsupported("a leading or trailing NOT under a Kleene plus")
    counted: list[tuple[int, int, int | None]] = []
    states, mids, negseqs = positions(list(seq.parts), counted)
    if counted:
        raise Unsupported("a counted repetition under a Kleene plus")
    if negseqs:
        raise Unsupported("a NOT of a SEQ under a Kleene plus inside a SEQ")
    if any(s.optional for s in states):
        raise Unsupported("an optional part in a Kleene plus or counted repetition over a SEQ inside a SEQ")
    return states, mids


def _negated_seq(seq: ast.Seq) -> tuple[State, ...]:
    """The single events of a middle `NOT SEQ(C, D, ...)` (`C+` is C: one event of it makes a match), or
    `Unsupported`."""
    out = []
    for part in seq.parts:
        while isinstance(part, ast.Kleene):
            part = part.inner
        if not isinstance(part, ast.EventPattern):
            raise Unsupported("a NOT over a SEQ of more than single events")
        out.append(State(part.alias, part.type, False))
    return tuple(out)


def _negated(part: ast.Pattern, where: str) -> State:
    """The one event of a NOT part (`NOT C+` is `NOT C`: one event of it makes a match), or `Unsupported`."""
    assert isinstance(part, ast.Not)
    inner = part.inner
    while isinstance(inner, ast.Kleene):
        inner = inner.inner
    if not isinstance(inner, ast.EventPattern):
        raise Unsupported(f"{where} NOT of more than one event")
    return State(inner.alias, inner.type, False)
