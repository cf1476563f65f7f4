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
from typing import Any

import numpy as np
import pandas as pd

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.columnar import Input, KernelPlan, closing, columnar_plan, intake, snapshot, warm_up
from greta_stream.engine.columnar.carried import BUDGET_BYTES, CarriedAggregates, covered
from greta_stream.engine.columnar.intake import Diverged
from greta_stream.engine.columnar.kept import KeptChunk, KeptView
from greta_stream.engine.columnar.passes import Member, PassSpec, single_pass
from greta_stream.engine.columnar.snapshot import SNAPSHOT_FORMAT
from greta_stream.engine.engine import Engine
from greta_stream.engine.ingest import DeadLetterSink, FieldNames, Front, Fronted, Validator, WatermarkOf
from greta_stream.engine.plan import Metrics
from greta_stream.engine.timebase import NUMERIC, Timebase

__all__ = ["SNAPSHOT_FORMAT", "ColumnarStream", "Diverged", "handed"]


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
        carried_budget_bytes: int = BUDGET_BYTES,
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
        self._groups: dict[tuple[str, ...], Any] = {}  # the chunk groups of the last snapshot (`chunks.grouped`)
        self.next_ks: list[int | None] = [None] * len(self.passes)  # per pass: first window not reported
        self.generals: dict[str, Engine] = {}  # per member query: its general engine, once they took over
        self.handed_over_because: str | None = None  # why they took over ("" when restored: not known)
        # Incremental aggregates per pass (`carried.py`), fed up to the front's watermark; None: each
        # closing window is computed from the kept events. `_stale`: rebuild them before the next feed.
        self.carried: list[CarriedAggregates] | None = None
        if incremental and all(covered(p.plan) and p.lanes is None for p in self.passes):
            self.carried = [CarriedAggregates(p.plan, p.fields, p.group_by) for p in self.passes]
        self.carried_budget_bytes = carried_budget_bytes
        self._stale = False
        self._fed_until: Any = -math.inf  # the watermark the carried aggregates were last fed to
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
        """Validate a micro-batch and keep its events; bad and late ones are
        dead-lettered (`intake.add_many`: DataFrame or dicts, `watermark_of`)."""
        intake.add_many(self, records, watermark_of)

    def _keep(self, chunk: KeptChunk) -> None:
        intake.keep(self, chunk)

    def _judged(self, dead: list[Any]) -> list[tuple[Any, list[tuple[Any, list[str]]]]] | None:
        """A batch's dead letters in each member query's words, None on a divergence (`intake.judged`)."""
        return intake.judged(self, dead)

    def _hand_over(self, why: str) -> None:
        """Continue on a general engine per member query, from the kept events."""
        snapshot.hand_over(self, why)

    # --------------------------------------------------------- processing
    def advance(self, watermark: Any) -> list[dict[str, Any]]:
        """Rows of every window that ends by `watermark` and was not reported (one query)."""
        return [row for _, row in self.advance_members(watermark)]

    def advance_members(self, watermark: Any) -> list[tuple[str, dict[str, Any]]]:
        """(member query, row) of every window that ends by `watermark` and was not reported."""
        return closing.advance_members(self, watermark)

    @property
    def carried_bytes(self) -> int:
        """Bytes the carried aggregates hold (0 when the stream computes from the kept events)."""
        return sum(c.nbytes for c in self.carried) if self.carried else 0

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
        return closing.next_window_ends(self)

    @property
    def engine_ran(self) -> tuple[str, str | None]:
        """("columnar", None), or ("general", why) once the general engine took over."""
        return ("general", self.handed_over_because or "input the columnar engine does not take") if self.generals \
            else ("columnar", None)

    # ----------------------------------------------------------- snapshot
    def snapshot(self) -> bytes:
        """State as bytes (format-versioned; one query's tied to its text)."""
        return snapshot.snapshot(self)

    @classmethod
    def restore(cls, query: KernelPlan | CompiledQuery | list[PassSpec], data: bytes, **kwargs: Any) -> ColumnarStream:
        """A stream that continues exactly where `snapshot()` left off. A
        family's state restores any family of some of its member queries
        (or one of them alone): events, watermarks and each window spec's
        position are the family's; a member query's rows are its own."""
        return snapshot.restore(cls(query, **kwargs), data)


@lru_cache(maxsize=64)
def _timebase(kind: str, within: Any, slide: Any) -> Timebase:
    return Timebase.create(kind, within, slide)  # one per kind: its window memos live on
