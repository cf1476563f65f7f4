"""A columnar stream's input (`stream.ColumnarStream.add_many`): a micro-batch
validated and prepared once for every query of the stream, its dead letters
worded by each member query, its events kept as one compact chunk
(`kept.KeptChunk`), typed again with the kept ones when their columns'
types differ."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd

from greta_stream.engine.columnar import Input, Unsupported, prepare
from greta_stream.engine.columnar.columns import frame_values
from greta_stream.engine.columnar.kept import KeptChunk, KeptView, compact, same_kinds
from greta_stream.engine.columnar.prepare import int_times_possible
from greta_stream.engine.columnar.snapshot import hand_over
from greta_stream.engine.ingest import DeadLetter, Validator, WatermarkOf

if TYPE_CHECKING:
    from greta_stream.engine.columnar.stream import ColumnarStream


def add_many(stream: ColumnarStream, records: Iterable[Any] | pd.DataFrame, watermark_of: WatermarkOf | None) -> None:
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
    if not stream.generals:
        inp = shared if shared is not None and shared.fields is None else Input(frame if frame is not None else records)
        front = stream.front
        kind_before = front.time_kind
        try:
            prep = prepare(stream.plan, inp, stream.fields, late_before=front.late_bound,
                           late_before_of=watermark_of if kind_before is None else None,
                           validator=front.validator, max_future_s=front.max_future_s,
                           lateness_s=front.lateness_s, newest=front.newest)
        except Unsupported as exc:
            hand_over(stream, str(exc))
        else:
            if watermark_of is not None and kind_before is None and front.time_kind is not None:
                stream.expect(watermark_of(front.time_kind))  # the watermark in the stream's unit
            verdicts = judged(stream, prep.dead)
            if verdicts is None:
                front.validator.time_kind = kind_before
                raise Diverged("a record one query of the family takes (or rejects otherwise) and another rejects")
            for name, value in prep.metrics.items():
                stream._metrics.inc(name, value)
            front.saw_others(prep.other_types)
            front.typed.update(prep.typed)
            if len(prep.t):
                front.newest = max(front.newest, prep.t.max().item())
            for dl, own in verdicts:
                if not own:
                    front.reject(dl, counted=True)  # `prepare` counted them
                for mine, names in own:  # the same reason, in each query's own words
                    for n in names:
                        sink = stream.member_sinks.get(n)
                        if sink is not None:
                            sink(mine)
            if len(prep.good):
                if stream.carried is not None and not stream._stale and (prep.t < stream._fed_until).any():
                    stream._stale = True  # before what the carried state was fed to: rebuild it
                raw_of = ((lambda f: frame_values(frame, f, prep.good)) if frame is not None  # noqa: B023
                          else (lambda f: inp.raw(f, prep.good)))  # noqa: B023
                keep(stream, compact(prep, raw_of, stream.names, int_times=int_times_possible(inp, stream.fields.time)))
            return
    for engine in stream.generals.values():
        engine.add_many(frame if frame is not None else records, watermark_of)


def keep(stream: ColumnarStream, chunk: KeptChunk) -> None:
    """Add a batch's chunk to the kept events; when its columns are typed
    otherwise (ints, then floats), type every kept event again with it."""
    if not stream._chunks or same_kinds(stream._chunks[0].prep, chunk.prep):
        stream._chunks.append(chunk)
        return
    chunks = [*stream._chunks, chunk]
    view = KeptView(chunks, list(stream.plan.types), stream.fields)
    raw = {f: view.raw(f) for f in stream.names}
    n = sum(len(c) for c in chunks)
    try:
        prep = prepare(stream.plan, Input.of_columns({f: list(v) for f, v in raw.items()}, n), stream.fields)
    except Unsupported as exc:  # together they are not for us (ints and floats in one SUM, ...)
        stream._chunks = chunks
        hand_over(stream, str(exc))
        return
    stream._stale = True  # typed again: the carried aggregates' cells may read otherwise
    stream._chunks = [compact(prep, lambda f: raw[f][prep.good], stream.names)]


def classes(stream: ColumnarStream) -> list[tuple[Validator, list[str]]]:
    """Each distinct validation of the member queries, with the queries it is theirs."""
    own: dict[Any, tuple[Any, list[str]]] = {}
    for m in stream.members:
        key = (frozen(m.cq.needed_by_type), frozen(m.cq.numeric_by_type))
        own.setdefault(key, (m.cq, []))[1].append(m.name)
    out = []
    for cq, names in own.values():
        v = Validator(cq, stream.fields)
        v.time_kind = stream.front.time_kind
        out.append((v, names))
    return out


def judged(stream: ColumnarStream, dead: list[Any]) -> list[tuple[Any, list[tuple[Any, list[str]]]]] | None:
    """The dead letters of a batch as each member query words them (a record
    rejected for a missing or ill-typed attribute: by its own validation),
    or None when some query would take a record or reject it for another
    reason: a divergence."""
    if stream.single or stream.plan is stream.passes[0].plan and len(classes(stream)) == 1:
        return [(dl, []) for dl in dead]
    validations = classes(stream)
    out: list[tuple[Any, list[tuple[Any, list[str]]]]] = []
    for dl in dead:
        if dl.reason not in ("missing_attribute", "wrong_type"):
            out.append((dl, []))
            continue
        own = []
        for v, names in validations:
            mine = v.validate(dl.record, 0)
            if not isinstance(mine, DeadLetter) or mine.reason != dl.reason:
                return None
            own.append((mine, names))
        out.append((dl, own))
    return out


class Diverged(Exception):
    """A family's queries judge a record differently: the family must split (its state is unchanged)."""


def frozen(by_type: dict[str, set[str]]) -> tuple[Any, ...]:
    return tuple(sorted((t, tuple(sorted(v))) for t, v in by_type.items()))

