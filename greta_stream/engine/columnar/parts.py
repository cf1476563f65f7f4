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


def positions(parts: list[ast.Pattern], counted: list[tuple[int, int, int | None]]
               ) -> tuple[list[State], list[tuple[int, State]], list[tuple[int, tuple[State, ...]]]]:
    """The positive states of a SEQ's parts, its middle NOTs of one event and of a SEQ (after state i);
    `counted` gets (state, lo, hi) of each counted repetition."""
    states: list[State] = []
    mids: list[tuple[int, State]] = []
    negseqs: list[tuple[int, tuple[State, ...]]] = []
    for part in parts:
        if isinstance(part, ast.Not) and isinstance(part.inner, ast.Seq):  # a scanned predicate of the step
            negseqs.append((len(states) - 1, _negated_seq(part.inner)))
            continue
        if isinstance(part, ast.Not):  # between two positive parts: a generation store
            mids.append((len(states) - 1, _negated(part, "a middle")))
            continue
        optional = isinstance(part, ast.Repeat) and part.optional and part.hi in (1, None)
        if optional:  # `X?` once or not, `X*` Kleene or not: states a trend may step over
            assert isinstance(part, ast.Repeat)
            part = part.inner if part.hi == 1 else ast.Kleene(part.inner)
        if isinstance(part, ast.Repeat):  # `X{n,m}`, `X{0,m}`, `X{n,}` of one type: a Kleene state with lanes
            if not isinstance(part.inner, ast.EventPattern):
                raise Unsupported("a counted repetition of a group inside a SEQ")
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
