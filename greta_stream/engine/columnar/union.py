"""One traversal for queries whose patterns differ around one Kleene part.

Queries `E+`, `SEQ(X, E+)`, `SEQ(E+, Y)`, `SEQ(A, B, E+, C)`, ... whose
Kleene part `E+` has one event type and the same edge predicates (and the
same partitioning, slide and GROUP-BY) build the same graph of `E` events
and evaluate its edges alike: the part that grows with the trends. A
*union plan* evaluates them in one traversal of the kernel (`kernel.run`
with query lanes): one lane per (query, window), where queries whose lanes
would be equal (the same states, local predicates and windows: a family's
queries, or queries that differ only in their aggregates) share one.

- **States.** The Kleene part is one state (the *core*). The parts before
  it form a trie read from the core outwards (`SEQ(B, A, E+)` and
  `SEQ(A, E+)` share the state `A` next to the core, and `B` reads it), the
  parts after it a trie read from the core onwards; a state is keyed by
  the types (and Kleene marks) between it and the core. Every state sums
  its vertices in a running total its successors read; the core reads the
  totals of the states next to it before, and its own index.
- **Masks.** An event is a vertex of a query in a window when its state is
  one of the query's, it passes the query's local predicates of that state,
  and the window is one of the query's that hold it (a query with a shorter
  window of the same slide: a prefix in time). Elsewhere its lanes are
  zero: it neither counts nor passes counts on, for that query. A vertex
  no query has is left out before the kernel runs.
- **Starts and finals** are per (state, query): a query's trends start at
  its first state and end at its last.
- **Lanes** are laid out query after query (a lane of queries after
  another), each one's windows of a block together (lane = query lane *
  windows + window); a vertex computes the lanes from its state's first
  query lane to its last, so they are ordered to keep each state's
  together (`_lane_order`): the core spans them all, a part around it only
  the lanes near it.
- **Cells** are the union of the queries' aggregate fields, each query
  reading its own (`field_of`), its groups rolled up from the union's
  GROUP-BY as a family's are (`passes.rolled_up`).

Every query's rows are the rows it gives alone: a lane carries exactly the
aggregates the query's own traversal would, since masked vertices add zero
and every vertex reads the same predecessors. A query with a negation, an
edge predicate between two positions, or no single Kleene part to share is
refused (`Unsupported`) and runs alone or in a family of its own pattern.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from greta_stream.compiler.compiled import AggField, AliasSpec, CompiledQuery, WindowSpec
from greta_stream.compiler.expressions import format_expr
from greta_stream.engine.columnar.columns import Input, Unsupported
from greta_stream.engine.columnar.driver import KernelOutput, compute_cells
from greta_stream.engine.columnar.passes import Member, PassSpec, merged, rolled_up
from greta_stream.engine.columnar.plan import KernelPlan, Scan, Seconds, State
from greta_stream.engine.columnar.prepare import Prepared, local_mask, prepare, window_in
from greta_stream.engine.columnar.rows import result_rows
from greta_stream.engine.ingest import DeadLetter, FieldNames, Validator
from greta_stream.engine.timebase import Window, window_bounds
from greta_stream.query import ast

NEVER = 2**62  # a query's first window of a vertex it does not have


def core_of(plan: KernelPlan) -> int:
    """The Kleene state a union is built around (the one with the edge
    predicates, else the only Kleene state), or `Unsupported` saying why
    the query cannot join one."""
    if plan.iterations is not None:
        raise Unsupported("a counted repetition (its lanes are iterations)")
    if plan.strategy != ast.ANY_MATCH:
        raise Unsupported(f"SEMANTICS {plan.strategy} (a union weighs no predecessor one by one)")
    if plan.negs:
        raise Unsupported("a negation (its bounds are per query)")
    if plan.loops:
        raise Unsupported("a Kleene plus over a SEQ")
    if plan.value_runs:
        raise Unsupported("an equivalence attribute of aliases apart (its runs are per query)")
    if plan.skips or any(s.optional for s in plan.states):
        raise Unsupported("an optional part (?, *)")
    if any(sc.src != sc.dst for sc in plan.scans):
        raise Unsupported("an edge predicate between two positions")
    if any(sc.disjunctive for sc in plan.scans):
        raise Unsupported("an OR in an edge predicate")
    loops = ({plan.edge_state} if plan.edge_state >= 0 else set()) | {sc.src for sc in plan.scans}
    if len(loops) > 1:
        raise Unsupported("edge predicates on two Kleene parts")
    if loops:
        return loops.pop()
    kleene = [i for i, s in enumerate(plan.states) if s.kleene]
    if len(kleene) != 1:
        raise Unsupported("no single Kleene part to share")
    return kleene[0]


def union_key(plan: KernelPlan) -> tuple[Any, ...]:
    """What queries must have in common to share one traversal (`Unsupported`: never)."""
    c = core_of(plan)
    core = plan.states[c]
    edges = tuple(sorted((op, _canon(x, core.alias, plan), _canon(y, core.alias, plan)) for op, x, y in plan.all_edges))
    return (core.type, edges, frozenset(plan.part_attrs), plan.slide, tuple(plan.cq.group_by),
            tuple(plan.cq.run_components))


def _canon(e: ast.Expr, alias: str, plan: KernelPlan) -> str:
    single = plan.states[0].alias if len(plan.states) == 1 else None
    return format_expr(_renamed(e, {alias: "core"}, single))


def _renamed(e: ast.Expr, names: dict[str, str], single: str | None) -> ast.Expr:
    if isinstance(e, ast.AttrRef):
        alias = e.alias if e.alias is not None else single
        return dataclasses.replace(e, alias=names.get(alias, alias) if alias is not None else None)
    if isinstance(e, ast.Unary):
        return dataclasses.replace(e, operand=_renamed(e.operand, names, single))
    if isinstance(e, ast.Binary):
        return dataclasses.replace(e, left=_renamed(e.left, names, single), right=_renamed(e.right, names, single))
    return e


@dataclass(frozen=True)
class UnionMember:
    """A query of a union: its plan, the union state of each of its states,
    its fields among the union's and its GROUP-BY among the union's."""

    name: str
    plan: KernelPlan
    states: tuple[int, ...]
    field_of: tuple[int, ...]
    group_index: tuple[int, ...]
    lane: int  # its lane (queries whose lanes would be equal share one: `_lane_key`)

    def member(self) -> Member:
        return Member(self.name, self.plan.cq, self.field_of, self.group_index)


@dataclass(frozen=True, eq=False)
class UnionPlan:
    """One kernel traversal for several queries (a `driver.QueryLanes`)."""

    plan: KernelPlan  # the union's states, the core's edge predicates, every member type's validation
    members: tuple[UnionMember, ...]
    fields: tuple[AggField, ...]
    group_by: tuple[str, ...]
    wiring: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]
    startq: np.ndarray  # (states, lanes) bool
    finalq: np.ndarray
    qlo: np.ndarray  # (states,): lanes qlo..qhi-1 hold every lane that has the state
    qhi: np.ndarray

    @property
    def nq(self) -> int:
        """The traversal's query lanes: one per set of members whose lanes would be equal."""
        return int(self.startq.shape[1])

    def stores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
        return self.wiring

    def first_windows(self, st: np.ndarray, t: np.ndarray, cols: dict[str, Any], prep: Prepared) -> np.ndarray:
        """Per vertex (state `st`, time `t`) and lane, the first window the lane's
        queries have it as a vertex in: their windows' bound where the state is
        theirs and passes their local predicates there, else NEVER."""
        out = np.full((self.nq, len(st)), NEVER, np.int64)  # a row per lane while filled
        done: set[int] = set()
        kmin_of: dict[Window, np.ndarray] = {}  # per window spec (a pass has one)
        numbers: dict[str, np.ndarray] = {}  # the numbers of each attribute, read once for every lane
        for m in self.members:
            if m.lane in done:
                continue
            done.add(m.lane)
            own = np.full(len(self.plan.states), -1, np.int64)  # union state -> the member's state
            own[list(m.states)] = np.arange(len(m.states))
            mst = own[st]
            mine = mst >= 0
            if m.plan.local:
                mine &= local_mask(m.plan, cols, np.where(mine, mst, -1), slots=False, read=numbers)
            window = window_in(m.plan, prep.time_kind)
            if window not in kmin_of:
                kmin_of[window] = window_bounds(t, window, prep.int_time)[0]
            np.copyto(out[m.lane], kmin_of[window], where=mine)
        return out.T


def union_plan(queries: list[tuple[str, KernelPlan]]) -> UnionPlan:
    """The union of queries of one `union_key` (`Unsupported` if one cannot join)."""
    states: list[State] = []
    key_of: dict[tuple[Any, ...], int] = {}
    edges: list[tuple[int, int]] = []  # (reader, read): a state reads the running total of another

    def state(key: tuple[Any, ...], s: State, inner: int) -> int:
        """The union state of `key` (`inner`: its neighbour towards the core)."""
        if key not in key_of:
            key_of[key] = new = len(states)
            states.append(State(f"u{new}", s.type, s.kleene))
            edges.append((inner, new) if key[0] == "before" else (new, inner))
        return key_of[key]

    first = queries[0][1]
    c0 = core_of(first)
    core = State("u0", first.states[c0].type, True)
    states.append(core)
    key_of[("core",)] = 0
    member_states = []
    for _, plan in queries:
        c = core_of(plan)
        mapping = [0] * len(plan.states)
        up = 0  # the state the next one out reads (before the core) or is read by (after it)
        for i in range(c - 1, -1, -1):
            s = plan.states[i]
            key = ("before", *((x.type, x.kleene) for x in plan.states[i:c]))
            mapping[i] = up = state(key, s, up)
        up = 0
        for i in range(c + 1, len(plan.states)):
            s = plan.states[i]
            key = ("after", *((x.type, x.kleene) for x in plan.states[c + 1:i + 1]))
            mapping[i] = up = state(key, s, up)
        member_states.append(tuple(mapping))
    keys = [_lane_key(plan, m) for (_, plan), m in zip(queries, member_states)]
    rep_of: dict[Any, int] = {}
    for q, key in enumerate(keys):
        rep_of.setdefault(key, q)
    reps = list(rep_of.values())  # one query per lane
    lanes = _lane_order([(queries[q][1], member_states[q]) for q in reps], len(states))
    lane_of_key = {keys[reps[i]]: lane for lane, i in enumerate(lanes)}
    order = sorted(range(len(queries)), key=lambda q: (lane_of_key[keys[q]], q))
    queries = [queries[i] for i in order]
    member_states = [member_states[i] for i in order]
    lane_of = [lane_of_key[keys[i]] for i in order]
    fields: list[AggField] = []
    group_by: list[str] = []
    members = []
    for (name, plan), states_of, lane in zip(queries, member_states, lane_of):
        alias_of = {s.alias: states[states_of[i]].alias for i, s in enumerate(plan.states)}
        members.append(UnionMember(name, plan, states_of, *merged(fields, group_by, plan.cq, alias_of), lane))
    n, nq = len(states), len(lanes)
    startq = np.zeros((n, nq), np.bool_)
    finalq = np.zeros((n, nq), np.bool_)
    has = np.zeros((n, nq), np.bool_)
    for m in members:
        startq[m.states[0], m.lane] = True
        finalq[m.states[-1], m.lane] = True
        has[list(m.states), m.lane] = True
    qlo = has.argmax(axis=1).astype(np.int64)
    qhi = (nq - has[:, ::-1].argmax(axis=1)).astype(np.int64)
    # the core's edge predicates, as the first query's plan has them, its alias renamed
    rename = {first.states[c0].alias: "u0"}
    single = first.states[0].alias if len(first.states) == 1 else None

    def side(e: tuple[str, ast.Expr, ast.Expr]) -> tuple[str, ast.Expr, ast.Expr]:
        return e[0], _renamed(e[1], rename, single), _renamed(e[2], rename, single)

    edge = side(first.edge) if first.edge else None
    scans = tuple(Scan(0, 0, tuple(side(e) for e in sc.edges)) for sc in first.scans)
    within = max(p.within for _, p in queries)
    cq = _union_query(first.cq, states, [p for _, p in queries], tuple(fields), tuple(group_by), within)
    plan = KernelPlan(cq, tuple(states), edge, 0 if edge else -1, within, first.slide, (), None, first.part_attrs,
                      None, (), scans)
    wiring = _wiring(plan, edges, np.asarray(startq.any(axis=1)), np.asarray(finalq.any(axis=1)))
    return UnionPlan(plan, tuple(members), tuple(fields), tuple(group_by), wiring, startq, finalq, qlo, qhi)


def _lane_key(plan: KernelPlan, states_of: tuple[int, ...]) -> tuple[Any, ...]:
    """What makes a query's lanes its own: its union states, its local predicates on them and its
    windows. Queries of one key (a family's, or queries that differ only in their aggregates) carry
    equal values at every vertex: they share one lane and each reads its own aggregates from it."""
    single = plan.states[0].alias if len(plan.states) == 1 else None
    local = tuple(sorted((states_of[i], format_expr(_renamed(e, {plan.states[i].alias: "x"}, single)))
                         for i, e in plan.local))
    return states_of, local, plan.within, plan.slide


def _lane_order(queries: list[tuple[KernelPlan, tuple[int, ...]]], n_states: int) -> list[int]:
    """An order of the queries' lanes in which each state's queries lie close
    together: a vertex computes the lanes from its state's first query to its
    last. Sorted by the parts before the core (from the core outwards) then
    those after it, or the other way round, whichever spans fewer lanes."""
    def paths(i: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        plan, mapping = queries[i]
        c = core_of(plan)
        return tuple(mapping[c - 1::-1]) if c else (), tuple(mapping[c + 1:])

    def span(order: list[int]) -> int:
        lo, hi = [len(order)] * n_states, [0] * n_states
        for q, i in enumerate(order):
            for u in queries[i][1]:
                lo[u], hi[u] = min(lo[u], q), max(hi[u], q + 1)
        return sum(h - lo_ for lo_, h in zip(lo, hi) if h > lo_)

    n = len(queries)
    before = sorted(range(n), key=lambda i: paths(i))
    after = sorted(range(n), key=lambda i: paths(i)[::-1])
    return min(before, after, key=span)


def _wiring(plan: KernelPlan, reads_total: list[tuple[int, int]], start: np.ndarray,
            final: np.ndarray) -> tuple[Any, ...]:
    """The kernel's stores (`KernelPlan.stores`' format): the core's own store
    (keyed, scanned, or its running total), and a running total of every
    state some state reads."""
    n = len(plan.states)
    src: list[int] = []
    table: list[tuple[int, int]] = []
    keyed = -1
    scanned: list[int] = []
    total: dict[int, int] = {}

    def total_of(i: int) -> int:
        if i not in total:
            total[i] = len(src)
            src.append(i)
        return total[i]

    if plan.edge is not None:  # the core's loop through the index
        keyed = len(src)
        src.append(0)
        table.append((0, keyed))
    elif plan.scans:
        scanned.append(len(src))
        src.append(0)
        table.append((0, scanned[0]))
    else:
        table.append((0, total_of(0)))
    for i, s in enumerate(plan.states):
        if i and s.kleene:  # a Kleene part around the core: every earlier vertex of it
            table.append((i, total_of(i)))
    for reader, read in reads_total:
        table.append((reader, total_of(read)))
    reads = np.zeros((n, len(src)), np.bool_)
    for i, j in table:
        reads[i, j] = True
    return (start, final, np.array(src, np.int64), reads, keyed, np.zeros(len(src), np.bool_),
            np.array(scanned, np.int64))


def _union_query(base: CompiledQuery, states: list[State], plans: list[KernelPlan], fields: tuple[AggField, ...],
                 group_by: tuple[str, ...], within: Seconds) -> CompiledQuery:
    """A compiled query that validates and prepares what every member reads:
    per type, the attributes any of them needs or aggregates."""
    needed: dict[str, set[str]] = {}
    numeric: dict[str, set[str]] = {}
    for p in plans:
        for t, attrs in p.cq.needed_by_type.items():
            needed.setdefault(t, set()).update(attrs)
        for t, attrs in p.cq.numeric_by_type.items():
            numeric.setdefault(t, set()).update(attrs)
    aliases = {s.alias: AliasSpec(s.alias, s.type, True, 0, needed=set(needed.get(s.type, ())),
                                  numeric=set(numeric.get(s.type, ()))) for s in states}
    by_type: dict[str, list[str]] = {}
    for s in states:
        by_type.setdefault(s.type, []).append(s.alias)
    return dataclasses.replace(base, aliases=aliases, by_type=by_type, fields=fields, group_by=group_by,
                               window=WindowSpec(Fraction(within), base.window.slide))


def union_pass(union: UnionPlan) -> PassSpec:
    """The kernel pass of a union (for `stream.ColumnarStream`): its members in lane order."""
    return PassSpec(union.plan, union.fields, union.group_by, tuple(m.member() for m in union.members), lanes=union)


def union_outputs(union: UnionPlan, out: KernelOutput) -> list[KernelOutput]:
    """The kernel's output of a union traversal split into each member's (in its own groups)."""
    nq = union.nq
    q_of = out.gids % nq
    lanes: dict[int, KernelOutput] = {}
    outs = []
    for m in union.members:
        if m.lane not in lanes:
            sel = q_of == m.lane
            lanes[m.lane] = dataclasses.replace(out, ks=out.ks[sel], gids=out.gids[sel] // nq, cells=out.cells[sel],
                                                mm=out.mm[sel])
        outs.append(rolled_up(lanes[m.lane], m.member(), len(union.group_by)))
    return outs


def union_cells(union: UnionPlan, prep: Prepared, events: Input, k_from: int | None = None, k_to: int | None = None,
                *, threads: int | None = None) -> list[KernelOutput]:
    """Each member's kernel output of the windows k_from <= k < k_to, from one traversal."""
    out = compute_cells(union.plan, prep, events, k_from, k_to, threads=threads, fields=union.fields,
                        group_by=union.group_by, lanes=union)
    return union_outputs(union, out)


def evaluate_union(union: UnionPlan, events: Input, fields: FieldNames) -> dict[str, list[dict[str, Any]]]:
    """Every member's result rows over `events`, as each gives them alone (batch),
    from one preparation and one traversal; `Unsupported` when the members
    would judge some record differently (a missing attribute one of them does
    not need) or the input is not for the columnar engine."""
    prep = prepare(union.plan, events, fields)
    _same_judgement(union, prep.dead, fields)
    outs = union_cells(union, prep, events)
    return {m.name: result_rows(m.plan.cq, out, m.field_of) for m, out in zip(union.members, outs)}


def _same_judgement(union: UnionPlan, dead: list[DeadLetter], fields: FieldNames) -> None:
    if not any(dl.reason in ("missing_attribute", "wrong_type") for dl in dead):
        return
    validators = [Validator(m.plan.cq, fields) for m in union.members]
    for dl in dead:
        if dl.reason not in ("missing_attribute", "wrong_type"):
            continue
        for v in validators:
            mine = v.validate(dl.record, 0)
            if not isinstance(mine, DeadLetter) or mine.reason != dl.reason:
                raise Unsupported("the queries judge a record differently")
