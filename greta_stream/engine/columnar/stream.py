"""Streaming with the columnar engine: each window is computed when it closes.

A window's row needs only the events inside it (GRETA keeps one aggregate
per window and vertex, and no trend crosses a window's bounds), so a stream
does not have to carry the event graph from one micro-batch to the next. It
keeps the valid events whose windows are not all reported yet (as columns:
one list of raw values per field the query reads); when the
watermark passes the end of some windows, it runs the batch kernels over the
kept events for exactly those windows, then forgets the events whose last
window is among them. Every (event, window) pair is computed once over the
whole stream, as in a batch run, so the rows are the batch rows (docs/QUERY_LANGUAGE.md
section 6) and the per-event work is the kernel's, not Python's.

Per micro-batch the work follows the batch, not the open windows: the kept
events are held prepared (typed arrays, windows, states), compact, one
chunk per micro-batch (`kept.KeptChunk`: no per-event Python objects), a
batch's chunk appended when its columns have the same types as the kept
ones (else every kept event is typed again with it, once). Records are
built back from the chunks only where one is needed (the spelling of group
values, a hand-over). A window's close drops the chunks none of whose
events is in an open window. A watermark that closes no window costs
nothing.

`ColumnarStream` has the interface of `greta_stream.engine.Engine` that a
streaming driver uses (`expect`, `add_many`, `advance`, `finish`,
`snapshot`/`restore`, `idle`, `next_window_end`). Lateness is the general
engine's: an event of the pattern type before the declared watermark is
dead-lettered as "late". When some input is not for the columnar engine
(`Unsupported`: times of both kinds, a SUM over ints and floats, ...), the stream
hands over to a general `Engine` for good: it replays the kept events into
it, lets it pass the windows already reported (their rows are dropped: they
were emitted before) and delegates from then on.

One stream may serve a family of queries (`passes.PassSpec`): the kept
events are prepared once per micro-batch and each pass (a window spec) runs
the kernel for its windows as they close, its rows rolled up per member
query (`advance_members`); a hand-over then gives every member query a
general engine of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache
from itertools import repeat
from typing import Any

import numpy as np
import pandas as pd

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.columnar import (
    Input,
    KernelPlan,
    Prepared,
    Unsupported,
    columnar_plan,
    prepare,
    warm_up,
)
from greta_stream.engine.columnar.columns import frame_values
from greta_stream.engine.columnar.driver import compute_cells
from greta_stream.engine.columnar.kept import (
    KeptChunk,
    KeptView,
    compact,
    dumps,
    joined,
    kept_as,
    kept_for,
    loads,
    reslotted,
    rewindowed,
    same_kinds,
)
from greta_stream.engine.columnar.live import BUDGET_BYTES, LiveAggregates, NotLive, Relayout, covered
from greta_stream.engine.columnar.passes import Member, PassSpec, rolled_up, single_pass
from greta_stream.engine.columnar.prepare import int_times_possible
from greta_stream.engine.columnar.rows import result_rows
from greta_stream.engine.columnar.union import union_outputs
from greta_stream.engine.engine import Engine, fingerprint
from greta_stream.engine.ingest import DeadLetter, DeadLetterSink, FieldNames, Front, Fronted, Validator, WatermarkOf
from greta_stream.engine.plan import Metrics
from greta_stream.engine.timebase import NUMERIC, Timebase
from greta_stream.errors import SnapshotError

SNAPSHOT_FORMAT = 1  # one query; 2: a family of queries (passes)


def handed(runner: Any, batch: Any) -> Any:
    """A micro-batch as `runner` takes it: a shared `Input` as it is for a columnar stream, else its records."""
    if isinstance(batch, Input) and not isinstance(runner, ColumnarStream):
        return batch.plain()
    return batch


class ColumnarStream(Fronted):
    """Aggregates of one columnar query, or of a family of them, over a stream of micro-batches."""

    def __init__(
        self,
        plan: KernelPlan | CompiledQuery | list[PassSpec],
        *,
        fields: FieldNames = FieldNames(),
        dead_letter: DeadLetterSink | None = None,
        threads: int | None = None,
        validation: KernelPlan | None = None,
        incremental: bool = False,
        live_budget_bytes: int = BUDGET_BYTES,
    ) -> None:
        if isinstance(plan, list):
            self.passes = plan
        else:
            self.passes = [single_pass(plan if isinstance(plan, KernelPlan) else columnar_plan(plan))]
        # Prepares the events: a family's validation asks what any of its queries asks
        # (`validation`); a record one of them would take and this rejects is a divergence.
        self.plan = validation or self.passes[0].plan
        self.threads = threads  # of the kernel (None: one per core); not part of the state
        self.cq = self.plan.cq
        self.fields = fields
        self._metrics = Metrics()
        self.rows_emitted: dict[str, int] = {}  # per member query
        # The front's watermark: windows ending by it are reported. Its buffer
        # stays empty: the kept events are columns (`_chunks`).
        self.front = Front(self.cq, fields, self._metrics, dead_letter)
        # A member query's own dead-letter sink, for the general engine it gets on a hand-over.
        self.member_sinks: dict[str, DeadLetterSink | None] = {}
        # valid events with a window not reported yet, prepared and compact, a chunk per micro-batch
        needed = set().union(*(self.cq.needed_by_type[t] for t in self.plan.types))
        self.names = [fields.type, fields.time, *sorted(needed - {fields.type, fields.time})]
        self._chunks: list[KeptChunk] = []
        self.next_ks: list[int | None] = [None] * len(self.passes)  # per pass: first window not reported
        self.generals: dict[str, Engine] = {}  # per member query: its general engine, once they took over
        self.handed_over_because: str | None = None  # why they took over ("" when restored: not known)
        # Incremental aggregates per pass (`live.py`), fed up to the front's watermark; None: each
        # closing window is computed from the kept events. `_stale`: rebuild them before the next feed.
        self.live: list[LiveAggregates] | None = None
        if incremental and all(covered(p.plan) and p.lanes is None for p in self.passes):
            self.live = [LiveAggregates(p.plan, p.fields, p.group_by) for p in self.passes]
        self.live_budget_bytes = live_budget_bytes
        self._stale = False
        self._fed_until: Any = -math.inf  # the watermark the live aggregates were last fed to
        warm_up()  # once per process: the first micro-batch pays it, not the first window that closes

    @property
    def members(self) -> list[Member]:
        return [m for p in self.passes for m in p.members]

    @property
    def single(self) -> bool:
        return len(self.passes) == 1 and len(self.passes[0].members) == 1

    @property
    def next_k(self) -> int | None:
        """First window not reported (one query)."""
        return self.next_ks[0]

    @property
    def general(self) -> Engine | None:
        """The general engine that took over (one query), else None."""
        return next(iter(self.generals.values())) if self.generals and self.single else None

    def _tb(self, i: int) -> Timebase:
        """Windows of pass i in the unit of this stream's times (seconds until timestamps came)."""
        w = self.passes[i].plan.cq.window
        return _timebase(self.front.time_kind or NUMERIC, w.within, w.slide)

    @property
    def tb(self) -> Timebase:
        return self._tb(0)

    @property
    def kept(self) -> dict[str, np.ndarray]:
        """The kept events' fields as the records held them (built from the chunks)."""
        view = self._view()
        return {f: view.raw(f) for f in self.names}

    def _view(self) -> KeptView:
        return KeptView(self._chunks, list(self.plan.types), self.fields)

    @property
    def n_kept(self) -> int:
        return sum(len(c) for c in self._chunks)

    @property
    def kept_bytes(self) -> int:
        """Bytes the kept events take in memory."""
        return sum(c.nbytes for c in self._chunks)

    @property
    def validator(self) -> Validator:
        return self.general.validator if self.general is not None else self.front.validator

    @property
    def time_kind(self) -> str | None:
        if self.generals:
            return next(iter(self.generals.values())).validator.time_kind
        return self.front.time_kind

    @property
    def metrics(self) -> Metrics:
        return self.general.metrics if self.general is not None else self._metrics

    def member_metrics(self, name: str) -> dict[str, int]:
        if name in self.generals:
            return dict(self.generals[name].metrics)
        out = dict(self._metrics)
        out["rows_emitted"] = self.rows_emitted.get(name, 0)
        return out

    @property
    def dead_letter(self) -> DeadLetterSink | None:
        return self.front.dead_letter

    @dead_letter.setter
    def dead_letter(self, sink: DeadLetterSink | None) -> None:
        self.front.dead_letter = sink
        for name, engine in self.generals.items():
            engine.dead_letter = self.member_sinks.get(name, sink)

    # -------------------------------------------------------------- input
    def expect(self, watermark: Any) -> None:
        """Events before `watermark` are late from now on (see `Engine.expect`)."""
        for engine in self.generals.values():
            engine.expect(watermark)
        self.front.expect(watermark)

    def add_many(self, records: Iterable[Any] | pd.DataFrame, watermark_of: WatermarkOf | None = None) -> None:
        """Validate a micro-batch and keep its events; bad and late ones are dead-lettered.

        `records` are dicts, or a DataFrame with a column per field (typed
        input: no per-event objects until the events are kept; NaN and None
        are missing values, as in `greta_stream.evaluate`).
        `watermark_of(time_kind)` is the declared watermark in a time unit:
        the general engine, once it takes over, declares it again when the
        first valid event fixes the unit (timestamps).
        """
        shared = records if isinstance(records, Input) else None  # one micro-batch read once for many queries
        if shared is not None:
            records = shared.plain()
        frame = records if isinstance(records, pd.DataFrame) else None
        records = [] if frame is not None else records if isinstance(records, list) else list(records)
        if not self.generals:
            inp = shared if shared is not None and shared.fields is None else Input(frame if frame is not None else records)
            front = self.front
            kind_before = front.time_kind
            try:
                prep = prepare(self.plan, inp, self.fields, late_before=front.late_bound,
                               late_before_of=watermark_of if kind_before is None else None,
                               validator=front.validator, max_future_s=front.max_future_s,
                               lateness_s=front.lateness_s, newest=front.newest)
            except Unsupported as exc:
                self._hand_over(str(exc))
            else:
                if watermark_of is not None and kind_before is None and front.time_kind is not None:
                    self.expect(watermark_of(front.time_kind))  # the watermark in the stream's unit
                judged = self._judged(prep.dead)
                if judged is None:
                    front.validator.time_kind = kind_before
                    raise Diverged("a record one query of the family takes (or rejects otherwise) and another rejects")
                for name, value in prep.metrics.items():
                    self._metrics.inc(name, value)
                front.saw_others(prep.other_types)
                front.typed.update(prep.typed)
                if len(prep.t):
                    front.newest = max(front.newest, prep.t.max().item())
                for dl, own in judged:
                    if not own:
                        front.reject(dl, counted=True)  # `prepare` counted them
                    for mine, names in own:  # the same reason, in each query's own words
                        for n in names:
                            sink = self.member_sinks.get(n)
                            if sink is not None:
                                sink(mine)
                if len(prep.good):
                    if self.live is not None and not self._stale and (prep.t < self._fed_until).any():
                        self._stale = True  # before what the live state was fed to: rebuild it
                    raw_of = ((lambda f: frame_values(frame, f, prep.good)) if frame is not None  # noqa: B023
                              else (lambda f: inp.raw(f, prep.good)))  # noqa: B023
                    self._keep(compact(prep, raw_of, self.names, int_times=int_times_possible(inp, self.fields.time)))
                return
        for engine in self.generals.values():
            engine.add_many(frame if frame is not None else records, watermark_of)

    def _keep(self, chunk: KeptChunk) -> None:
        """Add a batch's chunk to the kept events; when its columns are typed
        otherwise (ints, then floats), type every kept event again with it."""
        if not self._chunks or same_kinds(self._chunks[0].prep, chunk.prep):
            self._chunks.append(chunk)
            return
        chunks = [*self._chunks, chunk]
        view = KeptView(chunks, list(self.plan.types), self.fields)
        raw = {f: view.raw(f) for f in self.names}
        n = sum(len(c) for c in chunks)
        try:
            prep = prepare(self.plan, Input.of_columns({f: list(v) for f, v in raw.items()}, n), self.fields)
        except Unsupported as exc:  # together they are not for us (ints and floats in one SUM, ...)
            self._chunks = chunks
            self._hand_over(str(exc))
            return
        self._stale = True  # typed again: the live aggregates' cells may read otherwise
        self._chunks = [compact(prep, lambda f: raw[f][prep.good], self.names)]

    def _classes(self) -> list[tuple[Validator, list[str]]]:
        """Each distinct validation of the member queries, with the queries it is theirs."""
        own: dict[Any, tuple[Any, list[str]]] = {}
        for m in self.members:
            key = (_frozen(m.cq.needed_by_type), _frozen(m.cq.numeric_by_type))
            own.setdefault(key, (m.cq, []))[1].append(m.name)
        out = []
        for cq, names in own.values():
            v = Validator(cq, self.fields)
            v.time_kind = self.front.time_kind
            out.append((v, names))
        return out

    def _judged(self, dead: list[Any]) -> list[tuple[Any, list[tuple[Any, list[str]]]]] | None:
        """The dead letters of a batch as each member query words them (a record
        rejected for a missing or ill-typed attribute: by its own validation),
        or None when some query would take a record or reject it for another
        reason: a divergence."""
        if self.single or self.plan is self.passes[0].plan and len(self._classes()) == 1:
            return [(dl, []) for dl in dead]
        classes = self._classes()
        out: list[tuple[Any, list[tuple[Any, list[str]]]]] = []
        for dl in dead:
            if dl.reason not in ("missing_attribute", "wrong_type"):
                out.append((dl, []))
                continue
            own = []
            for v, names in classes:
                mine = v.validate(dl.record, 0)
                if not isinstance(mine, DeadLetter) or mine.reason != dl.reason:
                    return None
                own.append((mine, names))
            out.append((dl, own))
        return out

    # --------------------------------------------------------- processing
    def advance(self, watermark: Any) -> list[dict[str, Any]]:
        """Rows of every window that ends by `watermark` and was not reported (one query)."""
        return [row for _, row in self.advance_members(watermark)]

    def advance_members(self, watermark: Any) -> list[tuple[str, dict[str, Any]]]:
        """(member query, row) of every window that ends by `watermark` and was not reported."""
        if self.generals:
            return [(name, row) for name, engine in self.generals.items() for row in engine.advance(watermark)]
        if watermark <= self.watermark:
            return []
        targets = [None if watermark == math.inf else self._tb(i).first_window(watermark)
                   for i in range(len(self.passes))]
        if not self.n_kept or all(t is not None and t == k for t, k in zip(targets, self.next_ks)):
            self.front.watermark, self.next_ks = watermark, targets  # no window closes
            return []
        prep = joined(self._chunks)
        try:
            rows, stay = self._passes(prep, self._view(), targets, watermark)
        except Unsupported as exc:  # the kept events together are not for us (ints and floats in one SUM, ...)
            self._hand_over(str(exc))
            return self.advance_members(watermark)
        self.front.watermark, self.next_ks = watermark, targets
        self._chunks = _still_needed(self._chunks, stay)
        for name, _ in rows:
            self.rows_emitted[name] = self.rows_emitted.get(name, 0) + 1
        self._metrics.inc("rows_emitted", len(rows))
        return rows

    def _passes(self, prep: Prepared, inp: Any, targets: list[int | None],
                watermark: Any) -> tuple[list[Any], np.ndarray]:
        """Every pass's rows of the windows that close, and which kept events some window still needs."""
        rows: list[tuple[str, dict[str, Any]]] = []
        stay = np.zeros(len(prep.good), bool)
        outs = self._live_outputs(prep, inp, targets, watermark) if self.live is not None else None
        for i, (p, k_from, target) in enumerate(zip(self.passes, self.next_ks, targets)):
            prep_p = prep if p.plan is self.plan else rewindowed(reslotted(prep, self.plan.types, p.plan.types), p.plan)
            if target is None or target != k_from:
                if outs is not None:
                    out = outs[i]
                else:
                    out = compute_cells(p.plan, prep_p, inp, k_from, target, threads=self.threads,
                                        fields=p.fields, group_by=p.group_by, lanes=p.lanes)
                if out is not None:
                    mine = (union_outputs(p.lanes, out) if p.lanes is not None
                            else [rolled_up(out, m, len(p.group_by)) for m in p.members])
                    for m, o in zip(p.members, mine):
                        rows += zip(repeat(m.name), result_rows(m.cq, o, m.field_of))
            if target is not None:
                stay |= prep_p.kmax >= target
        return rows, stay

    def _live_outputs(self, prep: Prepared, inp: Any, targets: list[int | None], watermark: Any) -> list[Any] | None:
        """Feed the live aggregates the kept events the watermark passed since
        the last feed (all of them before it, when stale) and read the closing
        windows' partial rows per pass; None when the stream computes from
        the kept events from now on."""
        assert self.live is not None
        passed = _before(prep.t, watermark)
        fresh = passed & ~_before(prep.t, self._fed_until)
        outs = []
        try:
            for i, (p, k_from, target) in enumerate(zip(self.passes, self.next_ks, targets)):
                prep_p = prep if p.plan is self.plan else rewindowed(prep, p.plan)
                live = self.live[i]
                try:
                    if self._stale:
                        raise Relayout("stale")
                    live.feed(_rows(prep_p, fresh), inp, k_from)
                except Relayout:
                    self._metrics.inc("incremental_rebuilds")
                    live = self.live[i] = LiveAggregates(p.plan, p.fields, p.group_by)
                    live.feed(_rows(prep_p, passed), inp, k_from)
                outs.append(live.rows(-(2**62) if k_from is None else k_from, target)
                            if target is None or target != k_from else None)
            self._stale, self._fed_until = False, watermark
            if sum(live.nbytes for live in self.live) > self.live_budget_bytes:
                raise NotLive("over the budget")
        except NotLive:
            self._metrics.inc("incremental_fallbacks")
            self.live = None
            return None
        return outs

    @property
    def live_bytes(self) -> int:
        """Bytes the live aggregates hold (0 when the stream computes from the kept events)."""
        return sum(live.nbytes for live in self.live) if self.live else 0

    def finish(self) -> list[dict[str, Any]]:
        """End of input: report every window."""
        return self.advance(math.inf)

    @property
    def idle(self) -> bool:
        """Nothing kept: safe to drop entirely."""
        if self.generals:
            return all(engine.idle for engine in self.generals.values())
        return not self.n_kept

    def next_window_end(self) -> Any:
        """End of the first window not yet reported (after the watermark), or None."""
        ends = self.next_window_ends()
        return min(ends.values()) if ends else None

    def next_window_ends(self) -> dict[str, Any]:
        """Per member query, the end of its first window not yet reported (after the watermark)."""
        if self.generals:
            ends = {name: engine.next_window_end() for name, engine in self.generals.items()}
            return {name: end for name, end in ends.items() if end is not None}
        if not self.n_kept or self.watermark == math.inf:
            return {}
        t = self.watermark
        if t == -math.inf:
            t = min(c.prep.t.min().item() for c in self._chunks)
        out = {}
        for i, p in enumerate(self.passes):
            tb = self._tb(i)
            for m in p.members:
                out[m.name] = tb.end(tb.first_window(t))
        return out

    def _hand_over(self, why: str) -> None:
        """Continue on a general engine per member query, from the kept events."""
        records = Input.of_columns({f: list(v) for f, v in self.kept.items()}, self.n_kept).materialized()
        for m in self.members:
            engine = Engine(m.cq, fields=self.fields, dead_letter=self.member_sinks.get(m.name, self.dead_letter))
            engine.add_many(records)
            if self.watermark != -math.inf:
                engine.advance(self.watermark)  # these windows were reported already: drop their rows
            engine.expect(self.front.late_before)
            engine.front.max_future_s, engine.front.lateness_s = self.front.max_future_s, self.front.lateness_s
            engine.metrics.clear()
            engine.metrics.update(self.member_metrics(m.name))
            engine.metrics.inc("columnar_hand_overs")
            self.generals[m.name] = engine
        self.live = None
        self._chunks = []
        self.handed_over_because = why

    @property
    def engine_ran(self) -> tuple[str, str | None]:
        """("columnar", None), or ("general", why) once the general engine took over."""
        return ("general", self.handed_over_because or "input the columnar engine does not take") if self.generals \
            else ("columnar", None)

    # ----------------------------------------------------------- snapshot
    def snapshot(self) -> bytes:
        """State as bytes (format-versioned; one query's tied to its text)."""
        if self.single:
            state: dict[str, Any] = {"format": SNAPSHOT_FORMAT, "query": fingerprint(self.cq)}
            if self.general is not None:
                state["general"], state["why"] = self.general.snapshot(), self.handed_over_because
            else:
                state.update(chunks=self._chunks, watermark=self.front.watermark, late_before=self.front.late_before,
                             next_k=self.next_k, time_kind=self.front.time_kind, metrics=dict(self.metrics))
            return dumps(state)
        state = {"format": 2, "members": [m.name for m in self.members], **kept_as(self.plan)}
        if self.generals:
            state["generals"] = {name: engine.snapshot() for name, engine in self.generals.items()}
            state["why"] = self.handed_over_because
        else:
            state.update(chunks=self._chunks, watermark=self.front.watermark, late_before=self.front.late_before,
                         next_ks={p.window: k for p, k in zip(self.passes, self.next_ks)},
                         time_kind=self.front.time_kind, metrics=dict(self._metrics), rows=dict(self.rows_emitted))
        return dumps(state)

    @classmethod
    def restore(cls, query: KernelPlan | CompiledQuery | list[PassSpec], data: bytes, **kwargs: Any) -> ColumnarStream:
        """A stream that continues exactly where `snapshot()` left off. A
        family's state restores any family of some of its member queries
        (or one of them alone): events, watermarks and each window spec's
        position are the family's; a member query's rows are its own."""
        stream = cls(query, **kwargs)
        state = _loaded(data)
        if state["format"] == SNAPSHOT_FORMAT:
            if state["query"] != fingerprint(stream.cq) or not stream.single:
                raise SnapshotError("columnar stream state belongs to a different query")
            if "general" in state:
                stream.generals = {stream.passes[0].members[0].name: Engine.restore(
                    stream.cq, state["general"], fields=stream.fields, dead_letter=stream.dead_letter)}
                stream.handed_over_because = state.get("why", "")
                return stream
            # one query's state, whatever the member is called now
            name = stream.members[0].name
            state = dict(state, next_ks={stream.passes[0].window: state["next_k"]}, members=[name],
                         rows={name: state["metrics"].get("rows_emitted", 0)})
        missing = {m.name for m in stream.members} - set(state["members"]) if stream.members[0].name else set()
        if missing:
            raise SnapshotError(f"the family's state has no query {sorted(missing)}")
        if "generals" in state:
            stream.generals = {m.name: Engine.restore(m.cq, state["generals"][m.name], fields=stream.fields,
                                                      dead_letter=stream.dead_letter) for m in stream.members}
            stream.handed_over_because = state.get("why", "")
            return stream
        stream._stale = True  # the live aggregates are rebuilt from the kept events
        stream.front.watermark, stream.front.late_before = state["watermark"], state["late_before"]
        stream.next_ks = [state["next_ks"][p.window] for p in stream.passes]
        stream.front.validator.time_kind = state["time_kind"]
        if "chunks" in state:
            stream._chunks = kept_for(stream.plan, state["chunks"], state)
        elif state["kept"] and len(next(iter(state["kept"].values()))):  # a snapshot from before chunks: raw values
            kept = {f: list(col) for f, col in state["kept"].items()}
            n = len(kept[stream.fields.type])
            prep = prepare(stream.plan, Input.of_columns(kept, n), stream.fields)
            stream._chunks = [compact(prep, lambda f: np.asarray(kept[f], dtype=object)[prep.good], stream.names)]
        stream._metrics.update(state["metrics"])
        stream.rows_emitted = {m.name: state["rows"].get(m.name, 0) for m in stream.members}
        return stream


class Diverged(Exception):
    """A family's queries judge a record differently: the family must split (its state is unchanged)."""


def _frozen(by_type: dict[str, set[str]]) -> tuple[Any, ...]:
    return tuple(sorted((t, tuple(sorted(v))) for t, v in by_type.items()))


def _loaded(data: bytes) -> dict[str, Any]:
    try:
        state = loads(data)  # our own state store's bytes (chunks read from the open chunk store)
    except Exception as exc:  # noqa: BLE001
        raise SnapshotError(f"cannot read columnar stream state: {exc}") from exc
    if not isinstance(state, dict) or state.get("format") not in (SNAPSHOT_FORMAT, 2):
        raise SnapshotError("unsupported columnar stream state format")
    return state


def _before(t: np.ndarray, watermark: Any) -> np.ndarray:
    """Which times are before the watermark (-inf: none, inf: all)."""
    if watermark == -math.inf:
        return np.zeros(len(t), bool)
    if watermark == math.inf:
        return np.ones(len(t), bool)
    return np.asarray(t < watermark, dtype=bool)


def _still_needed(chunks: list[KeptChunk], stay: np.ndarray) -> list[KeptChunk]:
    """The chunks that hold an event some open window needs (`stay`, over the
    chunks joined). A chunk is the unit of state too: one stays whole while at
    least half of its events are needed (the others are in no open window; the
    kernels skip them), and is cut down to the needed ones below that (a new
    chunk: each event is written again at most a few times)."""
    out = []
    end = 0
    for chunk in chunks:
        start, end = end, end + len(chunk)
        alive = stay[start:end]
        n = int(alive.sum())
        if n == len(chunk):
            out.append(chunk)
        elif n:
            out.append(chunk if 2 * n >= len(chunk) else chunk.subset(alive))
    return out


def _rows(prep: Prepared, sel: np.ndarray) -> Prepared:
    """The prepared events of `sel`, still pointing at their rows of the kept events (`good`)."""
    return Prepared(prep.good[sel], prep.state[sel], prep.t[sel], prep.kmin[sel], prep.kmax[sel],
                    {a: type(c)(c.kind, c.values[sel], c.null[sel], c.number[sel]) for a, c in prep.cols.items()},
                    prep.int_time, [], prep.metrics, prep.time_kind)


@lru_cache(maxsize=64)
def _timebase(kind: str, within: Any, slide: Any) -> Timebase:
    return Timebase.create(kind, within, slide)  # one per kind: its window memos live on
