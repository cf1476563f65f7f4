"""The positions of a SEQ's parts as the columnar kernel numbers them (`plan.columnar_plan`): its
positive states, its negations of one event or of a SEQ of single events (a group among them once), its
counted repetitions, looped
groups and optional parts; and what follows from where the optional parts stand (`before`, `edge_states`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from greta_stream.engine.columnar.columns import Unsupported
from greta_stream.query import ast


@dataclass(frozen=True)
class State:
    """One position of the pattern: an event type under an alias, once or Kleene."""

    alias: str
    type: str
    kleene: bool
    optional: bool = False  # `X?`, `X*`: the part may match no event (its neighbours are then adjacent)
    negated: bool = False  # a NOT inside a negated SEQ (`NOT SEQ(C, NOT E, D)`): a match has no E between C and D
    # a Kleene plus over a SEQ inside a negated SEQ (`NOT SEQ(C, (SEQ(G, H))+, D)`): "[" on its first event
    # ("[~": it may match nothing), "]" on its last, "[]" on one that is both (`brackets`); "?" an optional
    # event, "+" a Kleene event inside a group (`_negated_seq`)
    group: str = ""
    count: tuple[int, int | None] | None = None  # a positive counted group's (lo, hi), on its first state
    chain: tuple[int, int | None] | None = None  # a counted event inside such a group (`(SEQ(G, H{2}))+`): its (lo, hi)
    # the (lo, hi) of each group of a negated SEQ starting here, one per "[" of `group` in order (None: a Kleene plus)
    counts: tuple[tuple[int, int | None] | None, ...] = ()


def end_not(parts: list[ast.Pattern], at: int, where: str) -> tuple[State | None, tuple[State, ...]]:
    """A leading (`at` 0) or trailing (-1) NOT taken off `parts`: (its event, or its SEQ's events)."""
    part = parts[at]
    if not isinstance(part, ast.Not):
        return None, ()
    parts.pop(at)
    body = negated_body(part)
    if body is not None:
        return None, _negated_seq(body)
    return _negated(part, where), ()


def negated_body(part: ast.Not) -> ast.Seq | None:
    """The SEQ a NOT negates, under any Kleene plus (`NOT (SEQ(H, G))+` is `NOT SEQ(H, G)`: a match of
    several iterations holds one of a single iteration, in the same span or a narrower one), or None."""
    inner = part.inner
    while isinstance(inner, ast.Kleene):
        inner = inner.inner
    if isinstance(inner, ast.Repeat) and not inner.optional:  # `NOT (SEQ(C, D)){2}`: a SEQ of one counted group
        return ast.Seq((inner,), inner.span)
    return inner if isinstance(inner, ast.Seq) else None


def positions(parts: list[ast.Pattern], counted: list[tuple[int, int, int | None]], loops: list[tuple[int, int]],
              skips: list[tuple[int, int]], in_group: bool = False,
              ) -> tuple[list[State], list[tuple[int, State]], list[tuple[int, tuple[State, ...]]]]:
    """The positive states of a SEQ's parts, its middle NOTs of one event and of a SEQ (after state i);
    `counted` gets (state, lo, hi) of each counted repetition, `loops` (first, last) of a Kleene plus over
    a SEQ among the parts (`SEQ(A, (SEQ(B, C))+, D)`: (1, 2)), `skips` (first, last) of each optional group
    (`SEQ(A, (SEQ(B, C))?, D)`: (1, 2); `(SEQ(B, C))*` is in `loops` too), the groups inside groups among
    them; `in_group`: the parts are a group's (a counted event among them is a counted group of one event)."""
    states: list[State] = []
    mids: list[tuple[int, State]] = []
    negseqs: list[tuple[int, tuple[State, ...]]] = []
    for part in parts:
        group = _optional_group(part)
        if group is not None:  # `(SEQ(B, C))?`, `(SEQ(B, C))*`, `{0,m}`: a trend steps over the whole group or none
            body, looped, most = group
            had = len(counted)
            span = _take_group(body, "in an optional group", states, mids, negseqs, skips, loops, counted)
            skips.append(span)
            if looped:  # `*`: a loop from C back to B as well
                loops.append(span)
            if most is not None:  # `{0,m}`: the group 1..m times (C's lanes, `iterations.py`) or stepped over
                _count_group(span, 1, most, had, counted, states)
            continue
        seq = _loop_seq(part)
        if seq is not None:  # `(SEQ(B, C))+`, `(SEQ(B, C)){n,m}`: a loop from C back to B, maybe counted
            had = len(counted)
            span = _take_group(seq, "under a Kleene plus", states, mids, negseqs, skips, loops, counted)
            loops.append(span)
            if isinstance(part, ast.Repeat):  # C's lanes count the loop's iterations (`iterations.py`)
                if span[0] == span[1]:
                    raise Unsupported("a counted repetition of a group of one event")
                _count_group(span, part.lo, part.hi, had, counted, states)
            continue
        if isinstance(part, ast.Not) and (negated := negated_body(part)) is not None:  # a scanned predicate of the step
            negseqs.append((len(states) - 1, _negated_seq(negated)))
            continue
        if isinstance(part, ast.Not):  # between two positive parts: a generation store
            mids.append((len(states) - 1, _negated(part, "a middle")))
            continue
        optional = isinstance(part, ast.Repeat) and part.optional and part.hi in (1, None)
        if optional:  # `X?` once or not, `X*` Kleene or not: states a trend may step over
            assert isinstance(part, ast.Repeat)
            part = part.inner if part.hi == 1 else ast.Kleene(part.inner)
        repeat = (part.lo, part.hi) if isinstance(part, ast.Repeat) else None
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
        if repeat is not None and in_group:  # `(SEQ(B, C{1,3}))+`: C a counted group of one event inside B's
            group_of_one(states, len(states) - 1, *repeat, loops, skips)
    return states, mids, negseqs


def group_of_one(states: list[State], i: int, lo: int, hi: int | None, loops: list[tuple[int, int]],
                 skips: list[tuple[int, int]]) -> None:
    """Counted state i (`X{n,m}`, a Kleene state with lanes) made a counted group of one event: no Kleene state,
    its own loop (i, i), its count on it (`counted_span`), and, optional (`X{0,m}`), a skip over it."""
    if states[i].optional:
        skips.append((i, i))
    states[i] = replace(states[i], kleene=False, optional=False, count=(lo, hi))
    loops.append((i, i))


def _count_group(span: tuple[int, int], lo: int, hi: int | None, had: int, counted: list[tuple[int, int, int | None]],
                 states: list[State]) -> None:
    """A group's count (lo, hi) to `counted`, at its last state (whose lanes count it, `iterations.py`), and on
    its first state (`counted_span`); `had`: the length of `counted` before the group's own were taken. A group
    holding a counted repetition would count two ways in one lane: `Unsupported`."""
    if len(counted) > had:
        raise Unsupported("a counted group holding a counted repetition")
    states[span[0]] = replace(states[span[0]], count=(lo, hi))
    counted.append((span[1], lo, hi))


def counted_span(states: Sequence[State], loops: Sequence[tuple[int, int]], end: int) -> tuple[int, int] | None:
    """The counted group ending at state `end` (`plan.KernelPlan.counted_groups`): the innermost looped group
    ending there whose first state holds a count (a group around it that also ends there is not counted:
    `(SEQ(A, B{2}))+`; one inside it is not either: `(SEQ(A, (SEQ(B, C))+)){2}`)."""
    return max(((f, g) for f, g in loops if g == end and states[f].count is not None), default=None)


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


def _optional_group(part: ast.Pattern) -> tuple[ast.Seq, bool, int | None] | None:
    """(the SEQ, whether it loops, the most iterations it counts) of an optional group: `(SEQ(B, C))?`,
    `(SEQ(B, C))*` (`((SEQ(B, C))+)?` alike), `(SEQ(B, C)){0,m}` (m > 1: counted 1..m); else None."""
    if not isinstance(part, ast.Repeat) or not part.optional:
        return None
    inner, looped, most = part.inner, part.hi != 1, part.hi if part.hi is not None and part.hi > 1 else None
    if most is not None and not isinstance(inner, ast.Seq):
        return None
    while isinstance(inner, ast.Kleene):
        inner, looped = inner.inner, True
    return (inner, looped, most) if isinstance(inner, ast.Seq) else None


def _take_group(seq: ast.Seq, where: str, states: list[State], mids: list[tuple[int, State]],
                negseqs: list[tuple[int, tuple[State, ...]]], skips: list[tuple[int, int]],
                loops: list[tuple[int, int]], counted: list[tuple[int, int, int | None]]) -> tuple[int, int]:
    """A group's states, middle NOTs and NOT SEQs (`_loop`) added where it stands, and the optional groups,
    looped groups and counted repetitions inside it to `skips`, `loops` and `counted`
    (`SEQ(A, (SEQ(B, (SEQ(C, D)){2}))+)`); its (first, last) state."""
    first = len(states)
    inner_skips: list[tuple[int, int]] = []
    inner_loops: list[tuple[int, int]] = []
    inner_counted: list[tuple[int, int, int | None]] = []
    inner, inner_mids, inner_negseqs = _loop(seq, where, inner_skips, inner_loops, inner_counted)
    skips += [(first + a, first + b) for a, b in inner_skips]
    loops += [(first + a, first + b) for a, b in inner_loops]
    counted += [(first + c, lo, hi) for c, lo, hi in inner_counted]
    mids += [(first + i, n) for i, n in inner_mids]
    negseqs += [(first + i, ps) for i, ps in inner_negseqs]
    states += inner
    return first, len(states) - 1


def _loop(seq: ast.Seq, where: str, skips: list[tuple[int, int]], loops: list[tuple[int, int]],
          counted: list[tuple[int, int, int | None]],
          ) -> tuple[list[State], list[tuple[int, State]], list[tuple[int, tuple[State, ...]]]]:
    """The states, middle NOTs and middle NOT SEQs of a SEQ that is a group inside a SEQ (`where` it stands:
    under a Kleene plus, in an optional group): events, Kleene events and NOTs between them, and the groups
    and counted repetitions that `loops`, `skips` and `counted` take (`_take_group`); else `Unsupported`."""
    if isinstance(seq.parts[0], ast.Not) or isinstance(seq.parts[-1], ast.Not):
        raise Unsupported(f"a leading or trailing NOT {where}")
    return positions(list(seq.parts), counted, loops, skips, in_group=True)


def _negated_seq(seq: ast.Seq, in_group: bool = False) -> tuple[State, ...]:
    """The single events of a `NOT SEQ(C, D, ...)`, of the NOTs between them (`NOT SEQ(C, NOT E, D)`:
    `State.negated`) and of a Kleene plus over such a SEQ among them, once (`NOT SEQ(C, (SEQ(G, H))+, D)`:
    `State.group`, `bound_groups`), or `Unsupported`. A Kleene event (`D+`) is a group of one event ("[]":
    a chain of D's makes a match where no single D does when both its neighbours constrain it); inside a
    group it is marked "+" (`negseqs.Matches._chained`: a chain of it where both ends constrain it; counted,
    `State.chain`, of lo..hi of it). A part that
    may match nothing is marked "?": `D?` an optional event, in a group too (`(SEQ(G, H*, K))+`: "+?"); `D*`,
    `D{0,m}`, `(SEQ(G, H))*` and `(SEQ(G, H)){0,m}` an optional group counting 1.. or 1..m iterations, "~"
    on its first event (`optional_spans`: a match with the part or without it, its neighbours then
    adjacent)."""
    out: list[State] = []
    for k, part in enumerate(seq.parts):
        negated = False
        if isinstance(part, ast.Not) and 0 < k < len(seq.parts) - 1:
            negated, part = True, part.inner
        count = None
        if isinstance(part, ast.Repeat) and in_group and isinstance(part.inner, (ast.Kleene, ast.Repeat)):
            raise Unsupported("a repetition of a repetition inside a group of a negated SEQ")
        if (isinstance(part, ast.Repeat) and part.lo == 0 and part.hi == 1 and isinstance(part.inner, ast.EventPattern)
                and not negated):  # `D?`: a match with or without a D (`Matches._walk`)
            out.append(State(part.inner.alias, part.inner.type, False, group="?"))
            continue
        optional, chain = "", None
        if isinstance(part, ast.Repeat) and not negated:  # `(SEQ(G, H)){2}`, `D{2,}`: a group whose chains count
            optional = "~" if part.optional else ""  # `D*`, `D{0,2}`: with or without 1.. (1..2) iterations
            count, part = (max(part.lo, 1), part.hi), ast.Kleene(part.inner)
            if in_group and not isinstance(part.inner, ast.Seq):  # `(SEQ(G, H{2}))+`: a chain of two H's
                count, chain, optional = None, count, optional and "?"  # (`negseqs.Matches._chained`); `H*`: "+?"
        if isinstance(part, ast.Kleene) and isinstance(part.inner, ast.Seq) and not negated:  # a group, in one too
            inner = list(_negated_seq(part.inner, in_group=True))
            inner[0] = replace(inner[0], group="[" + optional + inner[0].group, counts=(count, *inner[0].counts))
            inner[-1] = replace(inner[-1], group=inner[-1].group + "]")
            out += inner
            continue
        kleene = isinstance(part, ast.Kleene) and not negated  # `NOT E+` inside is `NOT E`
        while isinstance(part, ast.Kleene):
            part = part.inner
        if not isinstance(part, ast.EventPattern):
            raise Unsupported("a NOT over a SEQ of more than single events, NOTs of one between them and a "
                              "Kleene plus over a SEQ of those")
        group = ("+" + optional if in_group else "[" + optional + "]") if kleene else ""
        out.append(State(part.alias, part.type, False, negated=negated, chain=chain, group=group,
                         counts=(count,) if kleene and not in_group else ()))
    return tuple(out)


def group_spans(parts: Sequence[State]) -> list[tuple[int, int]]:
    """(first, last) of each Kleene plus over a SEQ (or counted group, or Kleene event) among a negated
    SEQ's parts, nested ones too (`(SEQ(G, (SEQ(H, K))+))+`)."""
    return spans_of([p.group for p in parts])


def spans_of(marks: Sequence[str]) -> list[tuple[int, int]]:
    """(first, last) of the groups of parts with these marks (`brackets`)."""
    return [(i, j) for i, j, _, _ in brackets(marks)]


def brackets(marks: Sequence[str], counts: Sequence[Sequence[tuple[int, int | None] | None]] | None = None,
             ) -> list[tuple[int, int, tuple[int, int | None] | None, bool]]:
    """(first, last, (lo, hi) or None, may match nothing) of the groups of a negated SEQ's parts with these marks,
    nested ones too: a group's "[" (and "~" right after it: it may match nothing) before those of groups inside
    it that start there, its "]" after theirs; `counts`: each part's `State.counts`, one per "[". A bracket of
    a group reaching past the marks (of a group around them) is left out."""
    out, opened = [], []
    for k, m in enumerate(marks):
        c = 0
        for x, ch in enumerate(m):
            if ch == "[":
                count = counts[k][c] if counts is not None and c < len(counts[k]) else None
                opened.append((k, count, m[x + 1:x + 2] == "~"))
                c += 1
            elif ch == "]" and opened:
                first, count, optional = opened.pop()
                out.append((first, k, count, optional))
    return sorted(out, key=lambda b: (b[0], b[1]))


def optional_spans(marks: Sequence[str]) -> list[tuple[int, int]]:
    """(first, last) of each part of a negated SEQ that may match nothing, by the parts' marks
    (`State.group`): an optional event ("?", "+?" in a group, "[?" at its start), an optional group
    (`optional_groups`)."""
    return sorted([(k, k) for k, m in enumerate(marks) if "?" in m] + optional_groups(marks))


def optional_groups(marks: Sequence[str]) -> list[tuple[int, int]]:
    """(first, last) of each group of a negated SEQ that may match nothing ("~" right after its "[")."""
    return [(i, j) for i, j, _, optional in brackets(marks) if optional]


def loop_ends(marks: Sequence[str]) -> tuple[list[int], list[int]]:
    """The parts of a group (by their marks, `State.group`) an iteration may start at (its first, and past
    each part that may match nothing there, the next) and end at (its last, and the ones before each part
    that may match nothing there: `(SEQ(G, (SEQ(H, K))*))+` ends at K or at G)."""
    n = len(marks)
    spans = [span for span in optional_spans(marks) if span != (0, n - 1)]
    starts, stops = [0], [n - 1]
    for at in starts:
        starts += [j + 1 for i, j in spans if i == at and j + 1 < n and j + 1 not in starts]
    for at in stops:
        stops += [i - 1 for i, j in spans if j == at and i > 0 and i - 1 not in stops]
    return starts, stops


def skipped_to(marks: Sequence[str], k: int) -> list[int]:
    """The parts of a negated SEQ after part k that a match may hold next past parts that match nothing
    (`NOT SEQ(C, D?, E*, F)`: from C, E and F), the part right after k not among them."""
    spans = optional_spans(marks)
    out, todo = [], [k + 1]
    for at in todo:  # past each part that may match nothing starting there (an event, or a group starting with it)
        for i, j in spans:
            if i == at and j + 1 < len(marks) and j + 1 not in out:
                out.append(j + 1)
                todo.append(j + 1)
    return out


def bound_groups(parts: Sequence[State], stepped: set[tuple[str, str]]) -> list[tuple[int, int]]:
    """(first, last) of each Kleene plus over a SEQ among a negated SEQ's parts bound at both ends. A match
    c g1 h1 g2 h2 d holds c g1 h1 d when nothing constrains the group's exit (its start kept, its end no
    later), and c g2 h2 d when nothing constrains its entry (its start no earlier, its end kept): either
    excludes all that it did (SEMANTICS section 3), and one iteration stands for any. With both, the first
    and the last iteration do where nothing constrains the loop's step from H back to G (c g1 h1 gk hk d is
    a match as well), so `negseqs.Matches` walks such a group twice; with an edge predicate on that step
    (`H.v < NEXT(G).v`), until no start rises. A constraint is a NOT between the group and its neighbour
    in the SEQ, or an edge predicate on that step (`stepped`: the (X, Y) of the edge predicates within the
    negated SEQ)."""
    kept = [i for i, s in enumerate(parts) if not s.negated]
    beside = {k for i, j in optional_spans([p.group for p in parts]) for k in (i - 1, j + 1)}
    spans = group_spans(parts)
    out = []
    for i, j in spans:
        first = parts[i]
        before_it = max((k for k in kept if k < i), default=None)
        after_it = min((k for k in kept if k > j), default=None)
        entry = before_it is not None and (before_it != i - 1 or (parts[before_it].alias, first.alias) in stepped)
        leave = after_it is not None and (after_it != j + 1 or (parts[j].alias, parts[after_it].alias) in stepped)
        # beside a part that may match nothing, or with one at its start or end, a chain may enter or leave past
        # it: walked twice, as bound (two iterations make a match whatever constrains them: never wrong)
        nested = any(a <= i and j <= b and (a, b) != (i, j) for a, b in spans)  # inside a group: as bound too
        if entry and leave or nested or i in beside or j in beside or "?" in first.group or "?" in parts[j].group:
            out.append((i, j))
    return out


def _negated(part: ast.Pattern, where: str) -> State:
    """The one event of a NOT part (`NOT C+` is `NOT C`: one event of it makes a match), or `Unsupported`."""
    assert isinstance(part, ast.Not)
    inner = part.inner
    while isinstance(inner, ast.Kleene):
        inner = inner.inner
    if not isinstance(inner, ast.EventPattern):
        raise Unsupported(f"{where} NOT of more than one event")
    return State(inner.alias, inner.type, False)


def before(states: Sequence[State], i: int, skips: Sequence[tuple[int, int]] = ()) -> list[int]:
    """The states right before state i > 0 on a trend (`plan.KernelPlan.predecessors`): i - 1, and past each
    optional part that ends there (an optional event, or a group as a whole) the state before it."""
    return _stepped(optional_parts(states, skips), i - 1, True, 0, len(states) - 1)


def edge_states(states: Sequence[State], skips: Sequence[tuple[int, int]], end: int) -> list[int]:
    """The states a trend may start at (`end` 0: the first, and past each optional part that begins there
    the state after it) or end at (`end` -1: the last, and the ones before optional parts at the end)."""
    n = len(states)
    return _stepped(optional_parts(states, skips), end % n, end != 0, 0, n - 1)


def _stepped(parts: Sequence[tuple[int, int]], start: int, back: bool, lo: int, hi: int) -> list[int]:
    """`start`, and the states within lo..hi past each of the optional `parts` (first, last) that ends (`back`)
    or begins at one of them: `SEQ(X, (SEQ(A, (SEQ(B, C))?))?, D)` steps back from C to A and to X."""
    out = [start]
    for s in out:
        for first, last in parts:
            past = first - 1 if back and last == s else last + 1 if not back and first == s else None
            if past is not None and lo <= past <= hi and past not in out:
                out.append(past)
    return out


def optional_parts(states: Sequence[State], skips: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """(first, last) of each part a trend may step over: each optional event, each optional group."""
    return [(i, i) for i, s in enumerate(states) if s.optional] + list(skips)


def same_value_edges(states: Sequence[State], loops: Sequence[tuple[int, int]], skips: Sequence[tuple[int, int]],
                     aliases: frozenset[str], attr: str) -> list[ast.Expr]:
    """An equivalence attribute of some positive aliases only (`[a.k]`, `[b.k, c.k]`) as edge predicates
    `X.k = NEXT(Y).k` on every step between them: exact where the aliases stand at consecutive required
    positions (and a looped group among them stands there whole), so that the trend's events bound to them
    are consecutive in it; else `Unsupported`."""
    at = sorted(i for i, s in enumerate(states) if s.alias in aliases)
    first, last = at[0], at[-1]
    if (at != list(range(first, last + 1)) or any(states[i].optional for i in at)
            or any(f <= last and first <= g for f, g in skips)
            or any(f <= last and first <= g and not first <= f <= g <= last for f, g in loops)):
        raise Unsupported("equivalence attributes of some positive aliases only, not at consecutive required "
                          "positions")
    steps = [(i, i + 1) for i in range(first, last)] + [(i, i) for i in at if states[i].kleene]
    steps += [(g, f) for f, g in loops if first <= f <= g <= last]
    return [ast.Binary("=", ast.AttrRef(states[i].alias, attr), ast.AttrRef(states[j].alias, attr, next=True))
            for i, j in steps]


def loop_steps(states: Sequence[State], loops: Sequence[tuple[int, int]],
                skips: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """The steps (end, start) of each looped group: from a state that may end an iteration (its last, and
    past optional parts the ones before) back to one that may start the next (its first, and past
    optional parts the ones after), but for a step that is already a transition: in `(SEQ(A+, B?))+`
    A back to A is A's own loop (a trend counts once, however it is cut into iterations)."""
    steps = {(p, i) for i in range(1, len(states)) for p in before(states, i, skips)}
    steps |= {(i, i) for i, s in enumerate(states) if s.kleene}
    parts = optional_parts(states, skips)  # an optional event, or an optional group inside the loop, as a whole
    out = []
    for first, last in loops:
        ends, starts = _stepped(parts, last, True, first, last), _stepped(parts, first, False, first, last)
        out += [(e, s) for e in ends for s in starts if (e, s) not in steps]
    return out
