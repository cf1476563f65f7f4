"""A columnar stream's state out of it: as bytes and back (`snapshot`,
`restore`: format-versioned, one query's tied to its text, a family's
restoring any family of some of its member queries), or handed over to a
general engine per member query (`hand_over`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from greta_stream.engine.chunks import grouped, ungrouped
from greta_stream.engine.columnar import Input, prepare
from greta_stream.engine.columnar.kept import compact, dumps, kept_as, kept_for, loads
from greta_stream.engine.engine import Engine, fingerprint
from greta_stream.errors import SnapshotError

if TYPE_CHECKING:
    from greta_stream.engine.columnar.stream import ColumnarStream

SNAPSHOT_FORMAT = 1  # one query; 2: a family of queries (passes)


def snapshot(stream: ColumnarStream) -> bytes:
    """State as bytes (format-versioned; one query's tied to its text)."""
    if stream.single:
        state: dict[str, Any] = {"format": SNAPSHOT_FORMAT, "query": fingerprint(stream.cq)}
        if stream.general is not None:
            state["general"], state["why"] = stream.general.snapshot(), stream.handed_over_because
        else:
            state.update(chunks=grouped(stream._chunks, stream._groups), watermark=stream.front.watermark,
                         late_before=stream.front.late_before, next_k=stream.next_k,
                         time_kind=stream.front.time_kind, metrics=dict(stream.metrics))
        return dumps(state)
    state = {"format": 2, "members": [m.name for m in stream.members], **kept_as(stream.plan)}
    if stream.generals:
        state["generals"] = {name: engine.snapshot() for name, engine in stream.generals.items()}
        state["why"] = stream.handed_over_because
    else:
        state.update(chunks=grouped(stream._chunks, stream._groups), watermark=stream.front.watermark,
                     late_before=stream.front.late_before, next_ks={p.window: k for p, k in zip(stream.passes, stream.next_ks)},
                     time_kind=stream.front.time_kind, metrics=dict(stream._metrics), rows=dict(stream.rows_emitted))
    return dumps(state)


def restore(stream: ColumnarStream, data: bytes) -> ColumnarStream:
    """A stream that continues exactly where `snapshot()` left off. A
    family's state restores any family of some of its member queries
    (or one of them alone): events, watermarks and each window spec's
    position are the family's; a member query's rows are its own."""
    state = loaded(data)
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
    stream._stale = True  # the carried aggregates are rebuilt from the kept events
    stream.front.watermark, stream.front.late_before = state["watermark"], state["late_before"]
    stream.next_ks = [state["next_ks"][p.window] for p in stream.passes]
    stream.front.validator.time_kind = state["time_kind"]
    if "chunks" in state:
        stream._chunks = kept_for(stream.plan, ungrouped(state["chunks"], stream._groups), state)
    elif state["kept"] and len(next(iter(state["kept"].values()))):  # a snapshot from before chunks: raw values
        kept = {f: list(col) for f, col in state["kept"].items()}
        n = len(kept[stream.fields.type])
        prep = prepare(stream.plan, Input.of_columns(kept, n), stream.fields)
        stream._chunks = [compact(prep, lambda f: np.asarray(kept[f], dtype=object)[prep.good], stream.names)]
    stream._metrics.update(state["metrics"])
    stream.rows_emitted = {m.name: state["rows"].get(m.name, 0) for m in stream.members}
    return stream


def hand_over(stream: ColumnarStream, why: str) -> None:
    """Continue on a general engine per member query, from the kept events."""
    records = Input.of_columns({f: list(v) for f, v in stream.kept.items()}, stream.n_kept).materialized()
    for m in stream.members:
        engine = Engine(m.cq, fields=stream.fields, dead_letter=stream.member_sinks.get(m.name, stream.dead_letter))
        engine.add_many(records)
        if stream.watermark != -math.inf:
            engine.advance(stream.watermark)  # these windows were reported already: drop their rows
        engine.expect(stream.front.late_before)
        engine.front.max_future_s, engine.front.lateness_s = stream.front.max_future_s, stream.front.lateness_s
        engine.metrics.clear()
        engine.metrics.update(stream.member_metrics(m.name))
        engine.metrics.inc("columnar_hand_overs")
        stream.generals[m.name] = engine
    stream.carried = None
    stream._chunks = []
    stream.handed_over_because = why


def loaded(data: bytes) -> dict[str, Any]:
    try:
        state = loads(data)  # our own state store's bytes (chunks read from the open chunk store)
    except Exception as exc:  # noqa: BLE001
        raise SnapshotError(f"cannot read columnar stream state: {exc}") from exc
    if not isinstance(state, dict) or state.get("format") not in (SNAPSHOT_FORMAT, 2):
        raise SnapshotError("unsupported columnar stream state format")
    return state
