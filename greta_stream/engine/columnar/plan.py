"""Which queries the columnar engine covers, and its kernel's plan of one (`columnar_plan`).

A single Kleene pattern `X+` (nested `+` included) or a SEQ of events, each
once or Kleene, optional or not (`X?`, `X*`; one event type may stand at
several positions), with a leading, a trailing and middle `NOT`s of one event
each or of a SEQ of single events (`negseqs.py`), or a Kleene plus over such
a SEQ (`(SEQ(A+, B?))+`, its middle NOTs each iteration's; as parts of a SEQ, several: `loops`); partitions by any
GROUP-BY and equivalence attributes; edge predicates of one Kleene alias or
of two adjacent positions, each a comparison `f(X) op g(NEXT(Y))` or an OR
of ANDs of them (one comparison on a loop is indexed; the others are
scanned; an optional part's neighbours are adjacent too); local predicates; MIN/MAX of any alias (propagated along the
graph's edges for a SEQ or a negation); windows in any unit (`timebase.Window`: whole
seconds, or a common denominator of WITHIN and SLIDE, down to fractions of a microsecond); under each
selection strategy (SEMANTICS section 8: skip-till-next-match and contiguous
weigh every transition's predecessors one by one, in scanned stores), and a
counted repetition `X{n}`, `X{n,m}`, `X{n,}` of one event type as the whole
pattern or as one part of a SEQ (`X{0,m}` too), and of a SEQ as the whole pattern
(`(SEQ(A+, B)){2,3}`: the Kleene plus's loop, counted; `iterations`), and an optional group as a part of
a SEQ (`SEQ(A, (SEQ(B, C))?, D)`, `(SEQ(B, C))*`, `(SEQ(B, C)){0,m}`: `skips`).
Anything else raises `Unsupported` saying why, and
the caller runs the general engine.

Numbering: the kernel's *states* are the positive positions 0..n-1 and then
the negated events n.. (leading, middle ones in order, trailing); the
*slots* (`types`) are the distinct event types, positive ones first in order
of first position, then the negated ones. Preparation assigns each event its
slot; `expand` turns slots into states (an event of a type at two positions
is two vertices, one per state, at one time stamp).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.columnar.columns import Unsupported
from greta_stream.engine.columnar.copies import copies, with_copies, written_out
from greta_stream.engine.columnar.edges import Conjunct, conjunct, edge_pair, is_edge, negated_step_edges
from greta_stream.engine.columnar.pairs import PAIR
from greta_stream.engine.columnar.parts import (
    State,
    before,
    counted_span,
    edge_states,
    end_not,
    group_of_one,
    loop_steps,
    positions,
)
from greta_stream.engine.columnar.valueruns import ValueRun, components
from greta_stream.query import ast


@dataclass(frozen=True)
class Scan:
    """A store scanned vertex by vertex: the vertices of state `src` that an
    event of state `dst` reads where every one of `edges` holds (`src ==
    dst`: a Kleene loop; `src + 1 == dst`: the SEQ's step between them)."""

    src: int
    dst: int
    edges: tuple[tuple[str, ast.Expr, ast.Expr], ...]
    # (conjunct, clause) of each of `edges`, in order: a vertex is admitted when every conjunct has a
    # clause whose comparisons all hold (a predicate `A OR (B AND C)` is one conjunct of two clauses);
    # empty: each edge is a conjunct of its own
    where: tuple[tuple[int, int], ...] = ()

    @property
    def groups(self) -> tuple[tuple[int, int], ...]:
        return self.where or tuple((k, 0) for k in range(len(self.edges)))

    @property
    def disjunctive(self) -> bool:
        """Some predicate of the store is an OR."""
        return any(c for _, c in self.groups)


# A window spec's length in seconds, exact: an int when whole, else a Fraction
# (both kinds compare and hash alike: the planner keys and orders passes by them).
Seconds = int | Fraction


@dataclass(frozen=True)
class KernelPlan:
    """How the columnar kernel evaluates a query it covers: the pattern's states
    (and `stores`, the kernel's wiring), its predicates, partition attributes and
    window spec. Preparation, keys and cells make the kernel's input from it; a
    kernel pass (`passes.PassSpec`) runs one."""

    cq: CompiledQuery
    states: tuple[State, ...]  # SEQ order; one state for `X+`
    edge: tuple[str, ast.Expr, ast.Expr] | None  # (op, predecessor side, new event side)
    edge_state: int  # the Kleene state the edge predicate links to itself (-1: none)
    within: Seconds
    slide: Seconds
    local: tuple[tuple[int, ast.Expr], ...] = ()  # (state, local predicate), AND-ed; states n..: the NOTs'
    neg: State | None = None  # the leading `NOT N` of `SEQ(NOT N, ...)`, one event
    part_attrs: tuple[str, ...] = ()  # partition attributes of the positive events (common ones first)
    trail: State | None = None  # the trailing `NOT N` of `SEQ(..., NOT N)`, one event
    mids: tuple[tuple[int, State], ...] = ()  # (i, N): `NOT N` between positive states i and i + 1
    scans: tuple[Scan, ...] = ()  # the stores scanned vertex by vertex, with their edge predicates
    # (first, last): a Kleene plus over a SEQ, the whole pattern (`(SEQ(A+, B))+`) or a part of it (`SEQ(A,
    # (SEQ(B, C))+, D)`): its first state also reads its last's vertices (the next iteration); of several,
    # the counted one (its lanes); None: no loop, or none counted beside a counted event (`loops` has them)
    loop: tuple[int, int] | None = None
    # SEMANTICS section 8: under skip-till-next-match and contiguous every transition is a scanned store
    # (a predecessor is weighed vertex by vertex: `kernel.run`'s taken marks, or the previous time stamp)
    strategy: str = ast.ANY_MATCH
    # `X{n}`, `X{n,m}`, `X{n,}` (lo, hi; hi None: open): one Kleene state whose lanes count iterations
    # (`iteration_lanes`): a vertex's lane of iteration q + 1 reads its predecessors' lanes of iteration q
    iterations: tuple[int, int | None] | None = None
    # (i, parts): `NOT SEQ(C, D, ...)` of single events between positive states i and i + 1, a scanned
    # predicate of that step (`NOT_SEQ`): a predecessor is admitted when no match lies between (`negseqs.py`)
    negseqs: tuple[tuple[int, tuple[State, ...]], ...] = ()
    # a leading `NOT SEQ(C, D, ...)` and a trailing one, of single events: bounds on the windows in which a
    # trend may start (after the latest start of a match ending before its first event) and end
    lead_seq: tuple[State, ...] = ()
    trail_seq: tuple[State, ...] = ()
    # (X, Y, comparison): edge predicates between consecutive parts of a negated SEQ, one step's OR-ed (`negseqs.py`)
    neg_edges: tuple[tuple[str, str, tuple[tuple[str, ast.Expr, ast.Expr], ...]], ...] = ()
    # (state, lo, hi) of each counted repetition inside a SEQ (`SEQ(A, B{2,3}, C)`; `iterations` is the first's):
    # a lane counts the iterations of the part a trend is in, or is 0 between them (`iterations.py`)
    counts: tuple[tuple[int, int, int | None], ...] = ()
    # (first, last) of each optional group (`SEQ(A, (SEQ(B, C))?, D)`: (1, 2)): a trend steps over all of
    # its states or none, so D's predecessors are C and A, never B (an optional event `B?` is its own group)
    skips: tuple[tuple[int, int], ...] = ()
    # (first, last) of every looped group, `loop` first (`SEQ((SEQ(A, B))+, C, (SEQ(D, E))+)`: two)
    loops: tuple[tuple[int, int], ...] = ()
    # equivalence attributes of aliases that stand apart (`[A.k, D.k]` of `SEQ(A, B, D)`): runs per value
    value_runs: tuple[ValueRun, ...] = ()
    # (alias, attribute): a single negated event keyed by an equivalence attribute of every positive alias (`[S.company,
    # H.company]` beside an unkeyed `NOT Suspend X`): bounds per value too; a negated SEQ's part keyed by any (`negkeys.py`)
    neg_keys: tuple[tuple[str, str], ...] = ()

    @property
    def next_match(self) -> bool:
        return self.strategy == ast.NEXT_MATCH

    @property
    def contiguous(self) -> bool:
        return self.strategy == ast.CONTIGUOUS

    @property
    def iteration_lanes(self) -> int:
        """Lanes per window: one per iteration count 1..m of `X{n,m}` (1..n of `X{n,}`, the last one
        counting n or more); 1 without a repetition."""
        if self.iterations is None:
            return 1
        return max(top for _, _, _, top in self.counted_states) + 1

    @property
    def counted_states(self) -> tuple[tuple[int, int, int | None, int], ...]:
        """(state, lo, hi, top) of each state whose lanes count iterations, top its last lane: the one
        state of `X{n,m}` (lanes 0..m-1: 1..m iterations), the last state of a counted group (its loop's
        step counts), or each counted part inside a SEQ (lanes 0..m, or 0..n, the last n or more)."""
        if self.iterations is None:
            return ()
        if self.counts:
            return tuple((c, lo, hi, hi if hi is not None else lo) for c, lo, hi in self.counts)
        lo, hi = self.iterations
        return ((self.loop[1] if self.loop else 0, lo, hi, (hi if hi is not None else lo) - 1),)

    @property
    def counted_groups(self) -> tuple[tuple[int, int], ...]:
        """(first, last) of each counted group (its lanes count its iterations): the whole pattern's, or each
        looped group of a SEQ whose last state `counts` holds (`SEQ((SEQ(A, B)){2}, (SEQ(C, D)){2})`: two)."""
        if self.iterations is None or not self.loop:
            return ()
        if not self.counts:
            return (self.loop,)
        ends = {c for c, _, _ in self.counts}
        return tuple(lp for lp in self.loops if lp[1] in ends and lp == counted_span(self.states, self.loops, lp[1]))

    def iteration_ends(self, group: tuple[int, int]) -> tuple[int, ...]:
        """The states of a counted group (one of `counted_groups`) that may end one of its iterations:
        its last, and past optional parts the ones before."""
        first, last = group
        return tuple(sorted({e for e, s in self.loop_steps() if first <= s <= last} | {last}))

    def loop_steps(self) -> list[tuple[int, int]]:
        """(end, start) of every looped group's step back (`parts.loop_steps`)."""
        return loop_steps(self.states, self.loops, self.skips)

    @property
    def negs(self) -> tuple[State, ...]:
        """The negated events in state order (leading, middle, trailing), then the parts of each negated SEQ
        (middle ones, then the leading and the trailing one)."""
        return (*((self.neg,) if self.neg else ()), *(n for _, n in self.mids), *((self.trail,) if self.trail else ()),
                *(p for _, parts in self.negseqs for p in parts), *self.lead_seq, *self.trail_seq)

    @property
    def types(self) -> tuple[str, ...]:
        """The slots: the distinct types of the positive states in order, then of the negated ones."""
        return tuple(dict.fromkeys([*(s.type for s in self.states), *(n.type for n in self.negs)]))

    def slot_of_state(self) -> np.ndarray:
        """The slot of each state (positive ones, then the negated ones)."""
        types = self.types
        return np.array([types.index(s.type) for s in (*self.states, *self.negs)], np.int64)

    @property
    def shared_slots(self) -> bool:
        """Some type stands at several positions: an event's states are told apart by their own predicates."""
        return len(set(self.types)) < len(self.states) + len(self.negs)

    def state_of_neg(self, n: State) -> int:
        return len(self.states) + self.negs.index(n)

    @property
    def scan(self) -> bool:
        """Some store is scanned (several edge predicates on a Kleene loop, a predicate across two states)."""
        return bool(self.scans)

    @property
    def scan_edges(self) -> tuple[tuple[int, tuple[str, ast.Expr, ast.Expr]], ...]:
        """(scan number, predicate) of every scanned predicate, in order."""
        return tuple((j, e) for j, sc in enumerate(self.scans) for e in sc.edges)

    @property
    def scan_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """(conjunct, clause) of every scanned predicate, aligned with `scan_edges` (`Scan.where`)."""
        groups = [g for sc in self.scans for g in sc.groups]
        return np.array([g[0] for g in groups], np.int64), np.array([g[1] for g in groups], np.int64)

    @property
    def all_edges(self) -> tuple[tuple[str, ast.Expr, ast.Expr], ...]:
        return ((self.edge,) if self.edge else ()) + tuple(e for _, e in self.scan_edges) + tuple(
            c for _, _, clause in self.neg_edges for c in clause)

    @property
    def propagate_mm(self) -> bool:
        """MIN/MAX travel along edges (a SEQ or a negation: not every event is on a trend)."""
        return len(self.states) > 1 or bool(self.negs) or self.iterations is not None

    def predecessors(self, i: int) -> tuple[int, ...]:
        """The states right before state i > 0 on a trend: i - 1, and past optional parts the ones before it."""
        return tuple(before(self.states, i, self.skips))

    def stores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
        """The kernel's wiring: (start, final, store_src, reads, keyed store,
        generation stores, the store of each scan); see `kernel.run`. A Kleene state reads its own
        vertices (by the index when the edge predicate is its), every later
        state the running total of the state before it, or across a middle
        `NOT N` a store of its own that keeps only the vertices after the
        latest N (a *generation* store, `gen[j]`); with a `loop`, the first
        state the running total of the last."""
        n = len(self.states)
        src: list[int] = []
        keyed = -1
        total: dict[int, int] = {}  # state -> its running-total store
        reads: list[tuple[int, int]] = []
        scan_of = {(sc.src, sc.dst): j for j, sc in enumerate(self.scans)}
        scanned = [-1] * len(self.scans)  # the store of each scan
        for i, state in enumerate(self.states):
            if state.kleene:
                src.append(i)
                if i == self.edge_state:
                    keyed = len(src) - 1
                elif (i, i) in scan_of:
                    scanned[scan_of[(i, i)]] = len(src) - 1
                else:
                    total[i] = len(src) - 1
                reads.append((i, len(src) - 1))
        after = {i for i, _ in self.mids}
        gen: list[int] = []
        # a counted group's iteration ends, read after it: the last state of the group they end
        out_of = {e: g[1] for g in self.counted_groups for e in self.iteration_ends(g)} if self.counts else {}
        for i in range(1, n):
            for p in self.predecessors(i):
                own = (p, i) in scan_of
                # across a middle NOT, with predicates, or from a counted repetition (`iterations.py`): its own
                if p in after or own or any(p == c for c, _, _ in self.counts) or p in out_of and i > out_of[p]:
                    src.append(p)
                    if p in after:
                        gen.append(len(src) - 1)
                    if own:
                        scanned[scan_of[(p, i)]] = len(src) - 1
                    reads.append((i, len(src) - 1))
                    continue
                if p not in total:
                    src.append(p)
                    total[p] = len(src) - 1
                reads.append((i, total[p]))
        for last, first in self.loop_steps():
            if (last, first) in scan_of:  # under a stricter strategy: a scanned store of its own
                src.append(last)
                scanned[scan_of[(last, first)]] = len(src) - 1
                reads.append((first, len(src) - 1))
            elif self.iterations is not None:  # `(SEQ(A, B)){2,3}`: a loop store of its own, a lane up
                src.append(last)
                reads.append((first, len(src) - 1))
            else:  # its first state also reads its last one's vertices: the next iteration of the SEQ
                if last not in total:
                    src.append(last)
                    total[last] = len(src) - 1
                reads.append((first, total[last]))
        start = np.zeros(n, np.bool_)
        start[edge_states(self.states, self.skips, 0)] = True  # optional parts first: a trend may start after them
        final = np.zeros(n, np.bool_)
        final[edge_states(self.states, self.skips, -1)] = True
        table = np.zeros((n, len(src)), np.bool_)
        for i, j in reads:
            table[i, j] = True
        is_gen = np.zeros(len(src), np.bool_)
        is_gen[gen] = True
        return start, final, np.array(src, np.int64), table, keyed, is_gen, np.array(scanned, np.int64)


def columnar_plan(cq: CompiledQuery) -> KernelPlan:
    """The plan, or `Unsupported` saying why the query needs the general engine."""
    q = cq.query
    if q.trends:
        raise Unsupported("RETURN TRENDS")
    pattern, loop = written_out(q.pattern), False  # the whole pattern a Kleene plus over a SEQ
    if isinstance(pattern, ast.Kleene):  # `(SEQ(A+, B))+`: GRETA's template loops back from B to A
        inner = pattern.inner
        while isinstance(inner, ast.Kleene):
            inner = inner.inner
        if isinstance(inner, ast.Seq):
            if isinstance(inner.parts[0], ast.Not) or isinstance(inner.parts[-1], ast.Not):
                raise Unsupported("a leading or trailing NOT under a Kleene plus")  # middle ones: each iteration's
            pattern, loop = inner, True
    iterations = None
    if isinstance(pattern, ast.Repeat) and isinstance(pattern.inner, ast.Seq) and pattern.lo >= 1:
        inner_seq = pattern.inner  # `(SEQ(A, B)){2,3}`: the loop's step from B to A counts iterations
        if isinstance(inner_seq.parts[0], ast.Not) or isinstance(inner_seq.parts[-1], ast.Not):
            raise Unsupported("a leading or trailing NOT in a counted repetition of a group")
        iterations, pattern, loop = (pattern.lo, pattern.hi), inner_seq, True
    if isinstance(pattern, ast.Repeat) and isinstance(pattern.inner, ast.EventPattern) and pattern.lo >= 1:
        iterations = (pattern.lo, pattern.hi)  # `X{n,m}`: one Kleene state, a lane per iteration count
        pattern = ast.Kleene(pattern.inner)
    parts: list[ast.Pattern] = list(pattern.parts) if isinstance(pattern, ast.Seq) else [pattern]
    neg, lead_seq = end_not(parts, 0, "a leading")  # a bound on where trends start
    trail, trail_seq = end_not(parts, -1, "a trailing")  # a bound on where trends end
    found: list[tuple[int, int, int | None]] = []
    loops: list[tuple[int, int]] = []
    skips: list[tuple[int, int]] = []
    states, mids, negseqs = positions(parts, found, loops, skips)
    if found and (len(found) > 1 and loops or loop):
        ends = {lp[1] for lp in loops}  # `SEQ((SEQ(A, B)){2}, C{1,2})`, `(SEQ(A, B{2}))+`: a counted group of one
        for c, lo, hi in found:
            if c not in ends and states[c].kleene and (lo >= 1) != states[c].optional:
                group_of_one(states, c, lo, hi, loops, skips)  # `C{0,2}`: an optional one, a skip over it
        loops.sort()
        skips.sort()
    # the looped group (`SEQ(A, (SEQ(B, C))+, D)`: 1..2), the counted one where there is one: its lanes
    # (with a counted event beside looped groups, none: `loop` is the group whose lanes count, if any)
    counted = counted_span(states, loops, found[0][0]) if found else None
    span = (0, len(states) - 1) if loop else (counted or (loops[0] if loops and not found else None))
    every_loop = ((span,) if span else ()) + tuple(lp for lp in loops if lp != span)
    if loop and iterations is not None and found:
        raise Unsupported("a counted group holding a counted repetition")
    # `SEQ((SEQ(A, B)){2}, (SEQ(C, D)){2})`: every counted repetition a group, each in its lanes (lane 0 between
    # them; uncounted looped groups beside them have stores of their own)
    groups_only = len(found) > 1 and {c for c, _, _ in found} <= {lp[1] for lp in loops}
    if len(found) > 1 and loops and not groups_only:
        raise Unsupported("two counted repetitions, one of them a group, and not every one a group")
    if loop and iterations is not None and len(states) < 2:
        raise Unsupported("a counted repetition of a group of one event")
    if found:  # `SEQ(A, B{2,3}, C)`: B's lanes count its iterations (`iterations.py`); a group's, its last state's
        if loop and not all(c in {lp[1] for lp in loops} for c, _, _ in found) or not loop and (
                span and not groups_only and (len(found) > 1 or found[0][0] != span[1])):
            raise Unsupported("a counted repetition under or beside a Kleene plus over a SEQ")
        iterations = found[0][1:]
    negs = [*([neg] if neg else []), *(n for _, n in mids), *([trail] if trail else []),
            *(p for _, ps in negseqs for p in ps), *lead_seq, *trail_seq]
    seqs = [(frozenset(p.alias for p in ps), states[r].alias)  # each negated SEQ's parts and the state reading it
            for ps, r in (*((p, i + 1) for i, p in negseqs), (lead_seq, 0), (trail_seq, -1))]
    run_attrs, same, runs, keyed = components(with_copies(cq, [*states, *negs]), states, negs, every_loop, skips, found,
                                              seqs)

    def states_of(e: ast.Expr) -> list[int]:
        aliases = {r.alias for r in ast.expr_refs(e)}
        if None in aliases and len(states) == 1:
            aliases = (aliases - {None}) | {states[0].alias}
        alias = aliases.pop() if len(aliases) == 1 else None
        if alias is None:
            raise Unsupported("a predicate over several aliases")
        return copies(states, alias) + [len(states) + k for k in copies(negs, alias)]

    conditions = [p.expr for p in q.where if isinstance(p, ast.Condition)]
    local = tuple((i, e) for e in conditions if not is_edge(e) for i in states_of(e))
    edges = [e for e in conditions if is_edge(e)] + same  # the parser splits AND into predicates
    by_pair: dict[tuple[int, int], list[Conjunct]] = {}
    steps = set(loop_steps(states, every_loop, skips))  # `(SEQ(A, B))+ WHERE B.v < NEXT(A).v`: on its own store
    neg_parts = [[(s.alias, s.negated, s.group) for s in ps] for ps in (*(p for _, p in negseqs), lead_seq, trail_seq)]
    edges, neg_edges = negated_step_edges(edges, neg_parts)  # `NOT SEQ(C, D) WHERE C.v < NEXT(D).v`
    for e in edges:
        x, y = edge_pair(e, states[0].alias if len(states) == 1 else None)
        if copies(negs, x) or copies(negs, y) or not copies(states, x) or not copies(states, y):
            raise Unsupported("an edge predicate of a negated alias")
        # the pairs of states standing for X and Y (copies of an alias too: `written_out`) that are adjacent
        pairs = [(i, j) for i in copies(states, x) for j in copies(states, y)
                 if (i, j) in steps or (i == j and states[i].kleene) or i != j and i < j and i in before(states, j, skips)]
        if not pairs:
            raise Unsupported("an edge predicate of aliases that are not adjacent in a SEQ of events")
        for i, j in pairs:
            by_pair.setdefault((i, j), []).append(conjunct(e))
    for k, (i, _) in enumerate(negseqs):
        by_pair.setdefault((i, i + 1), []).append((((NOT_SEQ, ast.Literal(k), ast.Literal(k)),),))
    edge, edge_state = None, -1
    scans = []
    for (i, j), conjuncts in by_pair.items():
        one = conjuncts[0]
        if (edge is None and i == j and states[i].kleene and len(conjuncts) == 1 and len(one) == 1
                and len(one[0]) == 1 and one[0][0][0] not in ("!=", PAIR)):
            edge, edge_state = one[0][0], i  # one comparison on a loop: indexed (the first such loop)
        else:
            scans.append(_scan(i, j, conjuncts))
    if q.strategy != ast.ANY_MATCH:
        edge, edge_state, scans = None, -1, _every_transition(states, by_pair, every_loop, skips)
    within, slide = cq.window.within, cq.window.slide
    return KernelPlan(cq, tuple(states), edge, edge_state, seconds(within), seconds(slide), local, neg,
                      (*cq.common, *run_attrs), trail, tuple(mids), tuple(scans), span, q.strategy, iterations,
                      tuple(negseqs), lead_seq, trail_seq, tuple(neg_edges), tuple(found), tuple(skips), every_loop,
                      tuple(runs), tuple(keyed))


def _every_transition(states: list[State], by_pair: dict[tuple[int, int], list[Conjunct]],
                      loops: Sequence[tuple[int, int]], skips: Sequence[tuple[int, int]]) -> list[Scan]:
    """A scanned store for every transition, with its edge predicates or none: under the stricter
    strategies a predecessor is admitted vertex by vertex, and each transition takes its own
    (a Kleene state's loop and its step to the next state read two stores; with a Kleene plus over
    the SEQ, its step from the last state back to the first too)."""
    pairs = [(i, i) for i, s in enumerate(states) if s.kleene]
    pairs += [(p, i) for i in range(1, len(states)) for p in before(states, i, skips)]
    pairs += loop_steps(states, loops, skips)
    return [_scan(i, j, by_pair.get((i, j), [])) for i, j in sorted(pairs, key=lambda p: (p[1], p[0] != p[1]))]


def _scan(i: int, j: int, conjuncts: list[Conjunct]) -> Scan:
    """The scanned store of the predicates `conjuncts` from state i to state j."""
    found = [(e, (k, c)) for k, clauses in enumerate(conjuncts) for c, clause in enumerate(clauses) for e in clause]
    return Scan(i, j, tuple(e for e, _ in found), tuple(w for _, w in found))


def seconds(x: Fraction) -> Seconds:
    """A window length as a plan holds it: an int when whole (the whole-second path), else the Fraction."""
    return int(x) if x.denominator == 1 else x


NOT_SEQ = "not-seq"  # the op of a negated SEQ's predicate in a scan (`Scan.edges`): its ranks are `negseqs.py`'s
