"""The general engine's plan of one query's event graph (`GraphPlan`): what
`graph.Run` and `partition.Partition` need of a compiled query, in fast form.

Built once per engine from a `CompiledQuery` and never pickled (it holds
closures); engine state refers to it only through method arguments, so state
snapshots stay plain data. Predicate calls go through `GraphPlan.local_ok` and
`GraphPlan.edge_ok`, which turn evaluation errors into "false" and count them
(docs/QUERY_LANGUAGE.md section 2: an error never stops processing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.compiler.expressions import compile_edge, edge_comparison
from greta_stream.engine.timebase import Timebase
from greta_stream.engine.values import FLOAT_BITS, INF, NEG_INF, scaled
from greta_stream.query import ast

SAFE_ORDER = (int, float, bool)  # compare with each other exactly and never raise
SAFE_EQUAL = (int, float, bool, str)  # `==` between these never raises either
UNSAFE = object()  # a side value that must go through the full predicate


@dataclass
class IndexSpec:
    """How an edge predicate is answered from an index (see `index.py`).

    The edge's predicates are AND-ed in WHERE order; predicate j (`op`) is
    indexed: `xs[j]` of a predecessor is its key, `ys[j]` of the new event the
    probe. Predicates before j are simple comparisons too, and a vertex or an
    event whose side values of predicates 0..j are not all of safe types goes
    through the full predicate instead, so errors are counted exactly as the
    scan counts them. `residual` (the other predicates, in order) is checked
    on every candidate the index returns.
    """

    op: str
    ops: tuple[str, ...]
    xs: tuple[Callable[[Any, Any], Any], ...]
    ys: tuple[Callable[[Any, Any], Any], ...]
    residual: Callable[[Any, Any], bool] | None

    def key(self, attrs: dict[str, Any]) -> Any:
        """The key of a predecessor, None if it never matches, UNSAFE if unsure."""
        return _side_value(self.ops, self.xs, attrs, None)

    def probe(self, attrs: dict[str, Any]) -> Any:
        return _side_value(self.ops, self.ys, None, attrs)


def _side_value(ops: tuple[str, ...], fns: tuple[Any, ...], x: Any, y: Any) -> Any:
    if len(fns) == 1:  # the common case, one comparison: same steps, no lists
        try:
            v = fns[0](x, y)
        except Exception:  # noqa: BLE001 - the full predicate will count the error
            return UNSAFE
        if type(v) not in (SAFE_EQUAL if ops[0] == "=" else SAFE_ORDER):
            return UNSAFE
        return None if v != v else v
    try:
        values = [f(x, y) for f in fns]
    except Exception:  # noqa: BLE001 - the full predicate will count the error
        return UNSAFE
    for op, v in zip(ops, values, strict=True):
        if type(v) not in (SAFE_EQUAL if op == "=" else SAFE_ORDER):
            return UNSAFE
    v = values[-1]
    return None if v != v else v  # NaN compares false with everything


@dataclass
class TransitionPlan:
    src: str
    negation: int | None
    edge: Callable[[Any, Any], bool] | None
    ident: int = 0
    index: IndexSpec | None = None
    each: bool = False  # every predecessor is weighed alone (a selection strategy other than skip-till-any-match)

    @property
    def plain(self) -> bool:
        """No edge predicate and no negation: running totals replace the scan."""
        return self.edge is None and self.negation is None and not self.each


@dataclass
class TemplatePlan:
    id: int
    negative: bool
    states: list[str]
    start: frozenset[str]
    end: frozenset[str]
    incoming: dict[str, list[TransitionPlan]]
    leading: int | None
    trailing: int | None


class Metrics(dict):  # type: ignore[type-arg]
    """Named counters; a plain dict so it pickles and serializes as is."""

    def inc(self, name: str, by: int = 1) -> None:
        self[name] = self.get(name, 0) + by

    def dead_letter(self, reason: str) -> None:
        """Count a record that was not processed, in total and by reason."""
        self.inc("events_dead_lettered")
        self.inc(f"dead_letter_{reason}")


class GraphPlan:
    """How one query's event graph is built and aggregated: its templates
    (`TemplatePlan`, `TransitionPlan`), the aggregate slots and packed cells a
    vertex carries, and the predicate wrappers."""

    indexing = True  # answer order/equality edge predicates from indexes (False: always scan)
    index_min_vertices = 48  # below this many predecessors a scan is cheaper than building an index

    def __init__(self, cq: CompiledQuery, timebase: Timebase, metrics: Metrics) -> None:
        self.cq = cq
        self.tb = timebase
        self.metrics = metrics
        # SEMANTICS section 8: under skip-till-next-match a predecessor takes
        # only its earliest candidates per transition (`Vertex.taken`); under
        # contiguous only predecessors at the partition's previous time stamp.
        self.next_match = cq.strategy == ast.NEXT_MATCH
        self.contiguous = cq.strategy == ast.CONTIGUOUS
        self._layout(cq)
        self.templates = [self._template(t) for t in cq.templates]
        self.dst_of_src: dict[str, list[TransitionPlan]] = {}  # indexed transitions by source state
        for i, tr in enumerate(tr for tp in self.templates for trs in tp.incoming.values() for tr in trs):
            tr.ident = i
            if tr.index is not None:
                self.dst_of_src.setdefault(tr.src, []).append(tr)
        self.open_of_src: dict[str, list[int]] = {}  # skip-till-next-match: transitions by source state
        if self.next_match:
            for tp in self.templates:
                for trs in tp.incoming.values():
                    for tr in trs:
                        if tr.each:
                            self.open_of_src.setdefault(tr.src, []).append(tr.ident)
        self.template_of = {a: s.template for a, s in cq.aliases.items()}
        self.totals_states = {
            tr.src for tp in self.templates for trs in tp.incoming.values() for tr in trs if tr.plain
        }
        self.has_runs = bool(cq.run_components)
        most_in = max((len(trs) for tp in self.templates for trs in tp.incoming.values()), default=0)
        self.guard_bits = (most_in + 2).bit_length()
        self.windows_per_event = cq.window.windows_per_event

    def _template(self, t: Any) -> TemplatePlan:
        incoming: dict[str, list[TransitionPlan]] = {s: [] for s in t.states}
        each = not t.negative and (self.next_match or self.contiguous)
        for tr in t.transitions:
            spec = None if t.negative or self.has_mm or each else index_spec(tr)
            incoming[tr.dst].append(TransitionPlan(tr.src, tr.negation, tr.edge, index=spec, each=each))
        return TemplatePlan(
            t.id, t.negative, list(t.states), frozenset(t.start), frozenset(t.end), incoming, t.leading, t.trailing
        )

    # ---------------------------------------------------------- aggregates
    def _layout(self, cq: CompiledQuery) -> None:
        """Slot 0 is the trend count; each field gets slots after it.

        count: 1 slot (+); sum: 3 slots (int sum +, scaled float sum +,
        any-float flag max); min: 1 slot; max: 1 slot.
        """
        self.slot_of: list[int] = []
        self._zero: list[Any] = [0]
        adds, mins, maxs = [0], [], []
        self.own_fields: dict[str, list[tuple[int, str, str | None]]] = {}
        for f in cq.fields:
            base = len(self._zero)
            self.slot_of.append(base)
            self.own_fields.setdefault(f.alias, []).append((base, f.kind, f.attr))
            if f.kind == "sum":
                self._zero += [0, 0, 0]
                adds += [base, base + 1]
                maxs.append(base + 2)
            elif f.kind == "min":
                self._zero.append(INF)
                mins.append(base)
            elif f.kind == "max":
                self._zero.append(NEG_INF)
                maxs.append(base)
            else:
                self._zero.append(0)
                adds.append(base)
        self._adds, self._mins, self._maxs = tuple(adds), tuple(mins), tuple(maxs)
        self.count_only = len(self._zero) == 1
        # Packed cells (lanes.py) for the additive fields, plain per-window
        # lists for MIN/MAX (they do not add).
        self.base_cells = ("n", *(f"c{i}" for i, f in enumerate(cq.fields) if f.kind == "count"))
        self.own_counts: dict[str, list[str]] = {}
        self.own_sums: dict[str, list[tuple[int, str]]] = {}
        self.own_mm: dict[str, list[tuple[int, str, str]]] = {}
        self.mm_kinds: list[str] = []
        self.mm_slots: list[int] = []
        for i, f in enumerate(cq.fields):
            if f.kind == "count":
                self.own_counts.setdefault(f.alias, []).append(f"c{i}")
            elif f.kind == "sum":
                self.own_sums.setdefault(f.alias, []).append((i, f.attr))  # type: ignore[arg-type]
            else:
                self.own_mm.setdefault(f.alias, []).append((len(self.mm_kinds), f.kind, f.attr))  # type: ignore[arg-type]
                self.mm_kinds.append(f.kind)
                self.mm_slots.append(self.slot_of[i])
        self.has_mm = bool(self.mm_kinds)
        for state, spec in cq.aliases.items():  # an unrolled copy aggregates as its alias
            if spec.origin:
                owns: tuple[dict[str, Any], ...] = (self.own_fields, self.own_counts, self.own_sums, self.own_mm)
                for own in owns:
                    if spec.origin in own:
                        own[state] = own[spec.origin]
        self._row_cells = [  # cell names per field, for row_from_cells
            (f.kind, self.slot_of[i], f"c{i}", f"ip{i}", f"in{i}", f"fp{i}", f"fn{i}", f"fc{i}")
            for i, f in enumerate(cq.fields)
        ]
        self.mm_zero_row = tuple(INF if k == "min" else NEG_INF for k in self.mm_kinds)

    def mm_zero(self) -> list[Any]:
        return list(self.mm_zero_row)

    def mm_combine(self, acc: list[Any], other: list[Any]) -> None:
        for m, kind in enumerate(self.mm_kinds):
            if (other[m] < acc[m]) if kind == "min" else (other[m] > acc[m]):
                acc[m] = other[m]

    def row_from_cells(self, cells: dict[str, int], fscale: int, mm: list[Any] | None) -> list[Any]:
        """A result aggregate (the `zero()` slot format) from summed cells."""
        acc = list(self._zero)
        acc[0] = cells.get("n", 0)
        get = cells.get
        for kind, b, c, ip, in_, fp, fn, fc in self._row_cells:
            if kind == "count":
                acc[b] = get(c, 0)
            elif kind == "sum":
                acc[b] = get(ip, 0) - get(in_, 0)
                acc[b + 1] = (get(fp, 0) - get(fn, 0)) << (FLOAT_BITS - fscale)
                acc[b + 2] = 1 if get(fc, 0) else 0
        if mm is not None:
            for m, slot in enumerate(self.mm_slots):
                acc[slot] = mm[m]
        return acc

    def zero(self) -> list[Any]:
        """The empty aggregate."""
        return list(self._zero)

    def combine(self, acc: list[Any], other: list[Any]) -> None:
        """acc := acc (+) other, slot by slot (GRETA Theorem 9.1)."""
        for i in self._adds:
            acc[i] += other[i]
        for i in self._mins:
            if other[i] < acc[i]:
                acc[i] = other[i]
        for i in self._maxs:
            if other[i] > acc[i]:
                acc[i] = other[i]

    def add_own(self, agg: list[Any], alias: str, attrs: dict[str, Any]) -> None:
        """Fold the vertex's own event into the trends that end at it."""
        cnt = agg[0]
        if not cnt:
            return
        for i, kind, attr in self.own_fields.get(alias, ()):
            if kind == "count":
                agg[i] += cnt
                continue
            v = attrs[attr]  # type: ignore[index]
            if kind == "sum":
                if isinstance(v, int):
                    agg[i] += cnt * v
                else:
                    agg[i + 1] += cnt * scaled(v)
                    agg[i + 2] = 1
            elif kind == "min":
                if v < agg[i]:
                    agg[i] = v
            elif v > agg[i]:
                agg[i] = v

    # ---------------------------------------------------------- predicates
    def local_ok(self, alias: str, attrs: dict[str, Any]) -> bool:
        fn = self.cq.aliases[alias].local
        if fn is None:
            return True
        try:
            return fn(attrs)
        except Exception:  # noqa: BLE001 - any evaluation error makes the predicate false
            self.metrics.inc("predicate_errors")
            return False

    def edge_ok(self, fn: Callable[[Any, Any], bool], x: dict[str, Any], y: dict[str, Any]) -> bool:
        try:
            return fn(x, y)
        except Exception:  # noqa: BLE001
            self.metrics.inc("predicate_errors")
            return False


def index_spec(tr: Any) -> IndexSpec | None:
    """Index the first equality (else the first order comparison) among the
    leading simple comparisons of the edge; None when there is none."""
    if not GraphPlan.indexing or tr.edge is None:
        return None
    shapes = []
    for e in tr.edge_exprs:
        shape = edge_comparison(e)
        if shape is None:
            break
        shapes.append(shape)
    if not shapes:
        return None
    j = next((i for i, s in enumerate(shapes) if s[0] == "="), 0)
    rest = [e for i, e in enumerate(tr.edge_exprs) if i != j]
    head = shapes[: j + 1]
    return IndexSpec(
        shapes[j][0], tuple(s[0] for s in head), tuple(s[1] for s in head), tuple(s[2] for s in head),
        compile_edge(rest),
    )


__all__ = ["GraphPlan", "Metrics", "TemplatePlan", "TransitionPlan", "IndexSpec", "UNSAFE", "NEG_INF", "index_spec"]
