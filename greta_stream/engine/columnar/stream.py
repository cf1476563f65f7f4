"""Streaming with the columnar engine: each window is computed when it closes.

A window's row needs only the events inside it (GRETA keeps one aggregate
per window and vertex, and no trend crosses a window's bounds), so a stream
does not have to carry the event graph from one micro-batch to the next. It
keeps the valid events whose windows are not all reported yet (as columns:
one list of raw values per field the query reads); when the
watermark passes the end of some windows, it runs the batch kernels over the
kept events for exactly those windows, then forgets the events whose last
window is among them. Every (event, window) pair is computed once over the
whole stream, as in a batch run, so the rows are the batch rows (SEMANTICS.md
section 6) and the per-event work is the kernel's, not Python's.

Per micro-batch the work follows the batch, not the open windows: the kept
events are held both raw (object arrays: snapshots, the general engine's
replay, group values as spelled) and prepared (typed arrays, windows,
states: `Prepared`), and a batch's prepared events are appended to the
latter when their columns have the same types (else the kept events are
typed again, together, when a window closes). A watermark that closes no
window costs nothing.

`ColumnarStream` has the interface of `greta_stream.engine.Engine` that a
streaming driver uses (`expect`, `add_many`, `advance`, `finish`,
`snapshot`/`restore`, `idle`, `next_window_end`). Lateness is the general
engine's: an event of the pattern type before the declared watermark is
dead-lettered as "late". When some input is not for the columnar engine
(`Unsupported`: times of both kinds, a SUM over ints and floats, ...), the stream
hands over to a general `Engine` for good: it replays the kept events into
it, lets it pass the windows already reported (their rows are dropped: they
were emitted before) and delegates from then on.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.columnar import (
    ColumnarPlan,
    Input,
    Prepared,
    Unsupported,
    columnar_plan,
    compute,
    prepare,
    warm_up,
)
from greta_stream.engine.columnar.columns import frame_values
from greta_stream.engine.engine import Engine, fingerprint, load_snapshot
from greta_stream.engine.ingest import DeadLetterSink, FieldNames, Front, Validator, WatermarkOf
from greta_stream.engine.plan import Metrics
from greta_stream.engine.timebase import NUMERIC, Timebase, parse_time

SNAPSHOT_FORMAT = 1


class ColumnarStream:
    """Aggregates of one columnar query over a stream of micro-batches."""

    def __init__(
        self,
        plan: ColumnarPlan | CompiledQuery,
        *,
        fields: FieldNames = FieldNames(),
        dead_letter: DeadLetterSink | None = None,
        threads: int | None = None,
    ) -> None:
        self.plan = plan if isinstance(plan, ColumnarPlan) else columnar_plan(plan)
        self.threads = threads  # of the kernel (None: one per core); not part of the state
        self.cq = self.plan.cq
        self.fields = fields
        self._metrics = Metrics()
        # The front's watermark: windows ending by it are reported. Its buffer
        # stays empty: the kept events are columns (`_kept`, `_prep`).
        self.front = Front(self.cq, fields, self._metrics, dead_letter)
        # valid events with a window not reported yet: one object array of raw values per field
        needed = set().union(*(self.cq.needed_by_type[t] for t in self.plan.types))
        self.names = [fields.type, fields.time, *sorted(needed - {fields.type, fields.time})]
        self._kept: list[dict[str, np.ndarray]] = []  # in chunks, joined when read (`kept`)
        self._prep: list[Prepared] | None = []  # the kept events prepared, in the same chunks (None: type again)
        self.next_k: int | None = None  # first window not reported (None: none reported yet)
        self.general: Engine | None = None  # the general engine, once it took over
        warm_up()  # once per process: the first micro-batch pays it, not the first window that closes

    @property
    def tb(self) -> Timebase:
        """Windows in the unit of this stream's times (seconds until timestamps came)."""
        w = self.cq.window
        return _timebase(self.validator.time_kind or NUMERIC, w.within, w.slide)

    @property
    def kept(self) -> dict[str, np.ndarray]:
        """The kept events' raw values, field by field."""
        if len(self._kept) != 1:
            self._kept = [{f: _objects([]) if not self._kept else np.concatenate([c[f] for c in self._kept])
                           for f in self.names}]
        return self._kept[0]

    @property
    def n_kept(self) -> int:
        return sum(len(c[self.fields.type]) for c in self._kept)

    @property
    def validator(self) -> Validator:
        return self.general.validator if self.general is not None else self.front.validator

    @property
    def time_kind(self) -> str | None:
        return self.validator.time_kind

    @property
    def metrics(self) -> Metrics:
        return self.general.metrics if self.general is not None else self._metrics

    @property
    def watermark(self) -> Any:
        return self.front.watermark

    @property
    def dead_letter(self) -> DeadLetterSink | None:
        return self.front.dead_letter

    @dead_letter.setter
    def dead_letter(self, sink: DeadLetterSink | None) -> None:
        self.front.dead_letter = sink
        if self.general is not None:
            self.general.dead_letter = sink

    # -------------------------------------------------------------- input
    def expect(self, watermark: Any) -> None:
        """Events before `watermark` are late from now on (see `Engine.expect`)."""
        if self.general is not None:
            self.general.expect(watermark)
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
        frame = records if isinstance(records, pd.DataFrame) else None
        records = [] if frame is not None else records if isinstance(records, list) else list(records)
        if self.general is None:
            inp = Input(frame if frame is not None else records)
            front = self.front
            kind_before = front.time_kind
            try:
                prep = prepare(self.plan, inp, self.fields, late_before=front.late_bound,
                               late_before_of=watermark_of if kind_before is None else None,
                               validator=front.validator)
            except Unsupported as exc:
                self._hand_over(str(exc))
            else:
                if watermark_of is not None and kind_before is None and front.time_kind is not None:
                    self.expect(watermark_of(front.time_kind))  # the watermark in the stream's unit
                for name, value in prep.metrics.items():
                    self.metrics.inc(name, value)
                for dl in prep.dead:
                    front.reject(dl, counted=True)  # `prepare` counted them
                if len(prep.good):
                    if not self.n_kept:
                        self._prep = [_subset(prep, np.ones(len(prep.good), bool))]
                    elif self._prep is not None:  # None: the kept events are typed again anyway
                        self._prep = _appended(self._prep, prep)
                    if frame is not None:
                        self._kept.append({f: _objects(frame_values(frame, f, prep.good)) for f in self.names})
                    else:
                        self._kept.append({f: inp.raw(f, prep.good) for f in self.names})
                return
        self.general.add_many(frame if frame is not None else records, watermark_of)

    # --------------------------------------------------------- processing
    def advance(self, watermark: Any) -> list[dict[str, Any]]:
        """Rows of every window that ends by `watermark` and was not reported."""
        if self.general is not None:
            return self.general.advance(watermark)
        if watermark <= self.watermark:
            return []
        target = None if watermark == math.inf else self.tb.first_window(watermark)
        if not self.n_kept or (target is not None and target == self.next_k):  # no window closes
            self.front.watermark, self.next_k = watermark, target
            return []
        inp = Input.of_columns(self.kept, self.n_kept)
        try:
            prep = _joined(self._prep) if self._prep else prepare(self.plan, inp, self.fields)
            rows = compute(self.plan, prep, inp, self.next_k, target, threads=self.threads)
        except Unsupported as exc:  # the kept events together are not for us (ints and floats in one SUM, ...)
            self._hand_over(str(exc))
            assert self.general is not None
            return self.general.advance(watermark)
        self.front.watermark, self.next_k = watermark, target
        stay = np.zeros(len(prep.good), bool) if target is None else prep.kmax >= target
        self._kept = [{f: col[prep.good[stay]] for f, col in self.kept.items()}]
        self._prep = [_subset(prep, stay)]
        self.metrics.inc("rows_emitted", len(rows))
        return rows

    def finish(self) -> list[dict[str, Any]]:
        """End of input: report every window."""
        return self.advance(math.inf)

    @property
    def idle(self) -> bool:
        """Nothing kept: safe to drop entirely."""
        return self.general.idle if self.general is not None else not self.n_kept

    def next_window_end(self) -> Any:
        """End of the first window not yet reported (after the watermark), or None."""
        if self.general is not None:
            return self.general.next_window_end()
        if not self.n_kept or self.watermark == math.inf:
            return None
        t = self.watermark
        if t == -math.inf:
            t = min(parse_time(v)[1] for v in self.kept[self.fields.time].tolist())
        return self.tb.end(self.tb.first_window(t))

    def _hand_over(self, why: str) -> None:
        """Continue on the general engine, from the kept events."""
        engine = Engine(self.cq, fields=self.fields, dead_letter=self.dead_letter)
        engine.add_many(Input.of_columns(self.kept, self.n_kept).materialized())
        if self.watermark != -math.inf:
            engine.advance(self.watermark)  # these windows were reported already: drop their rows
        engine.expect(self.front.late_before)
        engine.metrics.clear()
        engine.metrics.update(self._metrics)
        engine.metrics.inc("columnar_hand_overs")
        self.general, self._kept, self._prep = engine, [], []
        self.handed_over_because = why

    # ----------------------------------------------------------- snapshot
    def snapshot(self) -> bytes:
        """State as bytes (format-versioned, tied to the query text)."""
        state: dict[str, Any] = {"format": SNAPSHOT_FORMAT, "query": fingerprint(self.cq)}
        if self.general is not None:
            state["general"] = self.general.snapshot()
        else:
            state.update(kept=self.kept, watermark=self.front.watermark, late_before=self.front.late_before,
                         next_k=self.next_k, time_kind=self.front.time_kind, metrics=dict(self.metrics))
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, query: ColumnarPlan | CompiledQuery, data: bytes, **kwargs: Any) -> ColumnarStream:
        """A stream that continues exactly where `snapshot()` left off."""
        stream = cls(query, **kwargs)
        state = load_snapshot(data, SNAPSHOT_FORMAT, fingerprint(stream.cq), "columnar stream")
        if "general" in state:
            stream.general = Engine.restore(stream.cq, state["general"], fields=stream.fields,
                                            dead_letter=stream.dead_letter)
            return stream
        stream._kept = [{f: _objects(col) for f, col in state["kept"].items()}]  # lists before the arrays
        stream._prep = None if stream.n_kept else []
        stream.front.watermark, stream.front.late_before = state["watermark"], state["late_before"]
        stream.next_k = state["next_k"]
        stream.front.validator.time_kind = state["time_kind"]
        stream._metrics.update(state["metrics"])
        return stream


@lru_cache(maxsize=64)
def _timebase(kind: str, within: Any, slide: Any) -> Timebase:
    return Timebase.create(kind, within, slide)  # one per kind: its window memos live on


def _objects(values: Any) -> np.ndarray:
    """Raw values as an object array (lists and dicts stay single values)."""
    values = values if isinstance(values, list) else list(values)
    return np.fromiter(values, dtype=object, count=len(values))


def _subset(prep: Prepared, sel: np.ndarray) -> Prepared:
    """The prepared events of `sel`, renumbered 0..: the kept events left."""
    return Prepared(np.arange(int(sel.sum())), prep.state[sel], prep.t[sel], prep.kmin[sel], prep.kmax[sel],
                    {a: type(c)(c.kind, c.values[sel], c.null[sel], c.number[sel]) for a, c in prep.cols.items()},
                    prep.int_time, [], prep.metrics, prep.time_kind)


def _appended(chunks: list[Prepared], batch: Prepared) -> list[Prepared] | None:
    """The kept events' prepared chunks and a batch's good events', or None
    when a column's type differs (ints then floats, ...): typing them
    together may then give another type, so they are typed again."""
    first = chunks[0]
    if (first.int_time, first.time_kind) != (batch.int_time, batch.time_kind) or any(
            c.kind != batch.cols[a].kind for a, c in first.cols.items()):
        return None
    return [*chunks, _subset(batch, np.ones(len(batch.good), bool))]


def _joined(chunks: list[Prepared]) -> Prepared:
    if len(chunks) == 1:
        return chunks[0]
    first = chunks[0]
    return Prepared(np.arange(sum(len(p.good) for p in chunks)),
                    *(np.concatenate([getattr(p, f) for p in chunks]) for f in ("state", "t", "kmin", "kmax")),
                    {a: type(c)(c.kind, *(np.concatenate([getattr(p.cols[a], f) for p in chunks])
                                          for f in ("values", "null", "number")))
                     for a, c in first.cols.items()},
                    first.int_time, [], first.metrics, first.time_kind)
