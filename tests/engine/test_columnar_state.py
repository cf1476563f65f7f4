"""A columnar stream's state: the events it keeps and its snapshots.

The kept events are compact (engine/columnar/kept.py): records built back
from the chunks are the records as they came (ints among floats stay ints,
text stays text, missing stays missing); a chunk's bytes decode to the same
chunk; a snapshot taken with a chunk store open names its chunks by key, and
restores from a store that holds them; and a stream keeps its events in well
under a hundred bytes each. A stream keeps only the events of its open
windows; a snapshot is tied to its query, and a family part of one query
restores under its name.
"""

from __future__ import annotations

import math
import pickle
import random
import zlib
from typing import Any

import numpy as np
import pytest
from columnar_support import STOCK, assert_same_rows, stock
from hypothesis import given, settings
from hypothesis import strategies as st
from problems_support import evaluate  # greta_stream.evaluate, its problem warnings checked

from greta_stream import RunSpec, compile_query
from greta_stream.engine import Engine
from greta_stream.engine.columnar import columnar_plan
from greta_stream.engine.columnar.columns import Input
from greta_stream.engine.columnar.kept import chunk_store, decode, encode, joined
from greta_stream.engine.columnar.prepare import prepare
from greta_stream.engine.columnar.stream import ColumnarStream

Q = ("RETURN sector, COUNT(*), SUM(S.price), MAX(S.price) PATTERN Stock S+ WHERE [company, sector] "
     "AND S.price > NEXT(S).price GROUP-BY sector WITHIN 20 s SLIDE 10 s")


def events(seed: int, n: int = 200) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        c = rnd.randrange(5)
        out.append({"type": "Stock", "time": rnd.choice([i / 4, i // 4]), "company": rnd.choice([c, f"c{c}"]),
                    "sector": rnd.choice([c % 2, float(c % 2) + 0.5, "s"]), "price": rnd.choice([1.0, 2.5, 3.0, 4.25])})
    return out


def stream_of(evs: list[dict[str, Any]]) -> ColumnarStream:
    s = RunSpec.create(Q, engine="columnar").build()
    assert isinstance(s, ColumnarStream)
    s.add_many(evs)
    return s


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**16), st.integers(1, 4))
def test_records_built_back_are_the_records(seed: int, batches: int) -> None:
    evs = events(seed)
    s = RunSpec.create(Q, engine="columnar").build()
    for b in np.array_split(np.arange(len(evs)), batches):
        s.add_many([evs[i] for i in b])
    kept = s.kept
    got = [{f: kept[f][i] for f in kept} for i in range(s.n_kept)]
    want = [{f: e.get(f) for f in kept} for e in evs]
    key = repr  # ints and floats, text and numbers are told apart
    assert sorted(map(key, got)) == sorted(map(key, want))
    for chunk in s._chunks:
        again = decode(encode(chunk))
        for f in kept:
            assert list(map(key, again.raw(f, list(s.plan.types), s.fields))) == list(
                map(key, chunk.raw(f, list(s.plan.types), s.fields)))


def _written_before_the_packed_layout(chunk: Any) -> bytes:
    """A chunk's bytes as states written before the packed layout hold them: one pickle of its fields."""
    p = chunk.prep
    windows = np.arange(len(p.t), dtype=np.int64)  # such chunks held each event's first and last windows
    fields = {"state": p.state, "t": p.t, "kmin": windows, "kmax": windows + 1, "int_time": p.int_time,
              "time_kind": p.time_kind, "spelled": chunk.spelled,
              "cols": {a: (c.kind, c.values, c.null, c.number) for a, c in p.cols.items()}}
    return zlib.compress(pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL), 1)


def _arrays(chunk: Any) -> list[np.ndarray]:
    p = chunk.prep
    return [p.state, p.t, *(a for c in p.cols.values() for a in (c.values, c.null, c.number)),
            *chunk.spelled.values()]


@pytest.mark.parametrize("seed", [1, 4])
def test_a_decoded_chunk_keeps_its_typed_arrays_in_one_buffer_and_old_chunks_still_decode(seed: int) -> None:
    """A restored chunk's typed arrays are views of one writable, aligned buffer (one array object each,
    no bytes object each: a restored runner takes about what the running one did), equal to the chunk's
    by dtype and value; object arrays (text, spellings) come back as they were. A chunk written before
    this layout decodes to the same arrays."""
    s = stream_of(events(seed))
    assert any(c.values.dtype.hasobject for chunk in s._chunks for c in chunk.prep.cols.values())
    for chunk in s._chunks:
        for data, packed in ((encode(chunk), True), (_written_before_the_packed_layout(chunk), False)):
            again = decode(data)
            for a, b in zip(_arrays(chunk), _arrays(again), strict=True):
                assert a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist()
            assert set(again.prep.cols) == set(chunk.prep.cols) and all(
                again.prep.cols[n].kind == c.kind for n, c in chunk.prep.cols.items())
            assert (again.prep.int_time, again.prep.time_kind) == (chunk.prep.int_time, chunk.prep.time_kind)
            typed = [a for a in _arrays(again) if not a.dtype.hasobject]
            assert all(a.flags.writeable and a.flags.aligned and a.flags.c_contiguous for a in typed)
            if packed:
                assert len({id(a.base) for a in typed}) == 1


@pytest.mark.parametrize("seed", [2, 5])
def test_a_chunk_keeps_no_windows_and_the_joined_events_have_the_windows_of_their_times(seed: int) -> None:
    """An event's first and last windows follow from its time: a kept chunk holds none (16 bytes an
    event), and the kept events joined when windows close get those their preparation gave them,
    in the stream's window and in another plan's."""
    evs = events(seed)
    s = stream_of(evs)
    assert all(c.prep.kmin.size == c.prep.kmax.size == 0 for c in s._chunks)
    for text in (Q, Q.replace("WITHIN 20 s SLIDE 10 s", "WITHIN 7.5 s SLIDE 2.5 s")):
        plan = columnar_plan(compile_query(text))
        everything = prepare(plan, Input(evs), s.fields)
        together = joined(s._chunks, plan)
        assert together.t.tolist() == everything.t.tolist()
        assert together.kmin.tolist() == everything.kmin.tolist()
        assert together.kmax.tolist() == everything.kmax.tolist()


def test_equal_text_values_share_one_object() -> None:
    """Within a chunk, across the chunks of micro-batches (each brings its own string objects) and in a
    chunk decoded from its bytes: a worker holds one object per text value."""
    def batch(start: int) -> list[dict[str, Any]]:
        return [{"type": "Stock", "time": i, "company": "".join(["I", "B", "M"]), "sector": "".join("tech"),
                 "price": float(i % 7)} for i in range(start, start + 100)]
    s = stream_of(batch(0))
    s.add_many(batch(100))
    assert len(s._chunks) == 2
    companies = [v for c in (*s._chunks, decode(encode(s._chunks[0]))) for v in c.prep.cols["company"].values]
    assert len(companies) == 300 and companies[0] == "IBM" and len({id(v) for v in companies}) == 1


def test_a_snapshot_names_its_chunks_and_restores_from_a_store() -> None:
    evs = events(3)
    s = stream_of(evs[:100])
    s.add_many(evs[100:])
    with chunk_store() as store:
        blob = s.snapshot()
    assert len(store.written) == len(s._chunks) == 2 and store.refs == set(store.written)
    assert len(blob) < sum(map(len, store.written.values())) / 4  # the snapshot holds keys, not events
    with chunk_store() as again:  # keys once computed are not encoded again
        s.snapshot()
    assert not again.written and again.refs == store.refs
    with chunk_store(store.written):
        restored = ColumnarStream.restore(s.passes, blob, fields=s.fields)
    assert restored.finish() == s.finish() == evaluate(Q, evs, engine="columnar")
    with pytest.raises(Exception, match="does not hold"), chunk_store({}):
        ColumnarStream.restore(s.passes, blob, fields=s.fields)


def test_what_a_snapshot_holds_and_writes_does_not_grow_with_the_kept_chunks() -> None:
    """A chunk per micro-batch over a long window: the snapshot refers to groups of chunks that do not
    change, so its bytes and what it writes per batch stay about the same from 40 to 240 kept chunks;
    every kept chunk stays referred to (the state store keeps it) and the stream restores from them."""
    q = Q.replace("WITHIN 20 s SLIDE 10 s", "WITHIN 1 hour SLIDE 1 minute")
    s = RunSpec.create(q, engine="columnar").build()
    assert isinstance(s, ColumnarStream)
    source: dict[str, bytes] = {}
    evs: list[dict[str, Any]] = []
    per_batch, rows = [], []
    for b in range(240):
        batch = [{"type": "Stock", "time": b * 10 + i, "company": i % 3, "sector": i % 2, "price": float((b + i) % 7)}
                 for i in range(10)]
        evs += batch
        s.add_many(batch)
        rows += s.advance(b * 10)
        with chunk_store(source) as store:
            blob = s.snapshot()
        source.update(store.written)
        per_batch.append((len(blob), sum(len(v) for k, v in store.written.items() if k in store.refs)))
        assert {c._key for c in s._chunks} <= store.refs
    assert len(s._chunks) > 200
    assert per_batch[-1][0] < 2 * per_batch[39][0]  # its own bytes: groups, not a key per chunk
    assert sum(w for _, w in per_batch[-40:]) < 2 * sum(w for _, w in per_batch[40:80])  # written per batch
    with chunk_store({k: source[k] for k in store.refs}):
        restored = ColumnarStream.restore(s.passes, blob, fields=s.fields)
    rest = s.finish()
    assert restored.finish() == rest and rows + rest == list(evaluate(q, evs, engine="columnar"))


def test_a_long_window_keeps_each_event_in_under_a_hundred_bytes() -> None:
    q = Q.replace("WITHIN 20 s SLIDE 10 s", "WITHIN 1 hour SLIDE 1 minute")
    s = RunSpec.create(q).for_streaming().build()
    rnd = random.Random(1)
    price = {c: 100.0 for c in range(50)}
    for b in range(40):
        batch = []
        for i in range(2000):
            c = rnd.randrange(50)
            price[c] += rnd.choice([-0.25, 0.25])
            batch.append({"type": "Stock", "time": b * 10 + i / 200, "company": c, "sector": c % 5, "price": price[c]})
        s.add_many(batch)
        s.advance(b * 10)
    assert s.n_kept == 80_000
    assert s.kept_bytes / s.n_kept < 100


# ------------------------------------------------------ the stream's state


def test_kept_events_follow_the_open_windows() -> None:
    events = stock(400, 4)  # 300 s of events, 60 s windows
    s = ColumnarStream(compile_query(STOCK))
    s.add_many(events)
    assert s.next_window_end() == 20  # the first window holding an event: [-40, 20)
    s.advance(200)
    assert s.next_window_end() == 220
    assert s.n_kept and min(s.kept["time"]) >= 160  # earlier events are in no open window
    s.finish()
    assert s.idle and s.next_window_end() is None


def test_snapshot_is_tied_to_the_query() -> None:
    s = ColumnarStream(compile_query(STOCK))
    s.add_many(stock(10, 6))
    other = STOCK.replace("60 s", "61 s")
    with pytest.raises(Exception, match="different query"):
        ColumnarStream.restore(compile_query(other), s.snapshot())


def test_a_named_query_alone_restores_its_own_state() -> None:
    """A family part with one query snapshots as that query alone; restored
    under its name it goes on exactly (its rows and its row count)."""
    from greta_stream.engine.columnar.passes import single_pass

    events = stock(200, 7)
    plan = columnar_plan(compile_query(STOCK))
    alone = ColumnarStream([single_pass(plan, "down")])
    alone.add_many(events[:100])
    first = alone.advance(100)
    again = ColumnarStream.restore([single_pass(plan, "down")], alone.snapshot())
    again.add_many(events[100:])
    rest = again.finish()
    assert again.member_metrics("down")["rows_emitted"] == len(first) + len(rest)
    general = Engine(compile_query(STOCK))
    general.add_many(events[:100])
    want = general.advance(100)
    general.add_many(events[100:])
    assert_same_rows(STOCK, events, want + general.finish(), first + rest)


MS_FAMILY = {  # two window specs of fractions of a second: a pass each, the first shared by two queries
    "a": ("AVG(S.price)", "WITHIN 1500 ms SLIDE 500 ms"),
    "b": ("SUM(S.price)", "WITHIN 1.5 s SLIDE 0.5 s"),
    "c": ("MAX(S.price)", "WITHIN 2250 ms SLIDE 750 ms"),
}


def _ms_query(name: str) -> str:
    agg, window = MS_FAMILY[name]
    return (f"RETURN sector, COUNT(*), {agg} PATTERN Stock S+ WHERE [company, sector] "
            f"AND S.price > NEXT(S).price GROUP-BY sector {window}")


def _ms_passes(names: list[str]) -> list[Any]:
    from greta_stream.engine.columnar.passes import shared_pass, single_pass

    plans = {n: columnar_plan(compile_query(_ms_query(n))) for n in names}
    first = [(n, plans[n]) for n in names if n in ("a", "b")]
    return ([shared_pass(first)] if first else []) + ([single_pass(plans["c"], "c")] if "c" in plans else [])


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**16), st.integers(2, 5), st.sampled_from([["a", "b", "c"], ["c"], ["b"]]))
def test_a_family_of_millisecond_windows_snapshots_and_goes_on(seed: int, n_batches: int, after: list[str]) -> None:
    """A family with windows of fractions of a second (times on their bounds:
    quarters), snapshot halfway and restored as the family or some of its
    queries (windowed again where the window spec differs): each query's rows
    are the general engine's, driven by the same batches and watermarks."""
    evs = events(seed, 120)
    batches = [[evs[i] for i in b] for b in np.array_split(np.arange(len(evs)), n_batches)]
    s = ColumnarStream(_ms_passes(["a", "b", "c"]))
    generals = {n: Engine(compile_query(_ms_query(n))) for n in MS_FAMILY}
    got: dict[str, list[dict[str, Any]]] = {n: [] for n in MS_FAMILY}
    want: dict[str, list[dict[str, Any]]] = {n: [] for n in MS_FAMILY}
    for i, batch in enumerate(batches):
        if i == len(batches) // 2:
            s = ColumnarStream.restore(_ms_passes(after), s.snapshot())
        s.add_many(batch)
        mark = max(e["time"] for e in batch) - 0.75  # on a window bound of every spec
        for name, row in s.advance_members(mark):
            got[name].append(row)
        for name, engine in generals.items():
            engine.add_many(batch)
            want[name] += engine.advance(mark)
    for name, row in s.advance_members(math.inf):
        got[name].append(row)
    for name in after:
        general = want[name] + generals[name].finish()
        assert_same_rows(_ms_query(name), evs, general, got[name])
        assert any(isinstance(r["window_start"], float) for r in general)  # bounds that are not whole seconds
