"""The general engine's and CET's incremental state (`greta_stream.engine.chunks`).

Where a chunk store is open (the incremental Spark operator), a snapshot of
the general engine or of CET extraction is a base (its whole snapshot, every
few micro-batches) and the log of events accepted since, one chunk per
micro-batch, and a restore loads the base and replays the log. Driven in micro-batches (stragglers, late events, bad events)
and restored from the store before every batch, as after a restart or a
move to another worker, the rows and dead letters are exactly those of the
same stream never restored; a micro-batch writes its own events and a small
part (every few batches a base: the whole graph), whatever the window; and
a state written whole (before) goes on exactly, logged from then on.
"""

from __future__ import annotations

import math
import random
from typing import Any

import test_differential as diff
from columnar_support import SETTINGS, assert_same_rows, batches_and_watermarks
from hypothesis import given, settings
from hypothesis import strategies as st

from greta_stream import compile_query
from greta_stream.cet.config import CetConfig
from greta_stream.cet.extractor import TrendExtractor
from greta_stream.engine import Engine
from greta_stream.engine.chunks import chunk_store, loads
from greta_stream.engine.engine import LOGGED_FORMAT


class Store:
    """A state store's chunks across micro-batches: what was written, less what no snapshot refers to."""

    def __init__(self) -> None:
        self.chunks: dict[str, bytes] = {}
        self.written_per_batch: list[int] = []

    def snapshot(self, runner: Any) -> bytes:
        with chunk_store(dict(self.chunks)) as store:
            blob = runner.snapshot()
        self.written_per_batch.append(len(blob) + sum(len(v) for v in store.written.values()))
        self.chunks = {k: v for k, v in {**self.chunks, **store.written}.items() if k in store.refs}
        return blob

    def restore(self, make: Any, blob: bytes) -> Any:
        with chunk_store(dict(self.chunks)):
            return make(blob)



def drive(text: str, plan: list[tuple[list[Any], Any]], restore: bool, cet: CetConfig | None = None) -> tuple:
    """Rows per call and dead letters, restored from a chunk store before every batch when `restore`."""
    dead: list = []
    cq = compile_query(text)
    if cet is None:
        runner: Any = Engine(cq, dead_letter=dead.append)
        make = lambda blob: Engine.restore(cq, blob, dead_letter=dead.append)  # noqa: E731
    else:
        runner = TrendExtractor(cq, config=cet, dead_letter=dead.append)
        make = lambda blob: TrendExtractor.restore(cq, blob, config=cet, dead_letter=dead.append)  # noqa: E731
    store = Store()
    calls, declared = [], -math.inf
    for records, watermark in plan:
        if restore:
            runner = store.restore(make, store.snapshot(runner))
        runner.expect(declared)
        runner.add_many(records)
        calls.append(runner.advance(watermark))
        declared = watermark
    calls.append(runner.finish())
    return calls, [(d.reason, d.record, d.detail) for d in dead], store


def same_calls(text: str, events: list, want: list, got: list) -> None:
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert_same_rows(text, events, w, g, ("never restored", "restored from the log"))


@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_general_engine_restored_from_its_log_every_batch(data: st.DataObject) -> None:
    text, events = data.draw(diff.cases())
    plan = batches_and_watermarks(data.draw, events)
    want, want_dead, _ = drive(text, plan, restore=False)
    got, got_dead, _ = drive(text, plan, restore=True)
    same_calls(text, events, want, got)
    assert got_dead == want_dead


@settings(max_examples=60, **SETTINGS)
@given(st.data(), st.sampled_from([CetConfig(), CetConfig(trends="all")]))
def test_cet_restored_from_its_log_every_batch(data: st.DataObject, cet: CetConfig) -> None:
    text, events = data.draw(diff.cases(where_kinds=("local", "edge", "equiv")))
    text = "RETURN TRENDS\n" + text.split("\n", 1)[1]
    plan = batches_and_watermarks(data.draw, events)
    want, want_dead, _ = drive(text, plan, restore=False, cet=cet)
    got, got_dead, _ = drive(text, plan, restore=True, cet=cet)
    assert got == want
    assert got_dead == want_dead


def _stock(n: int, rate: float, seed: int = 3) -> list[dict]:
    rnd = random.Random(seed)
    return [{"type": "Stock", "time": i / rate, "company": rnd.randrange(5), "price": rnd.randrange(50, 150),
             "volume": rnd.randrange(1000)} for i in range(n)]


def test_a_batch_writes_its_own_events_whatever_the_window() -> None:
    """Two edge predicates (the general engine): 10 windows per event at 5 and at 40
    minutes; after the windows fill, a batch writes about the same bytes."""
    written = {}
    for minutes in (5, 40):
        text = (f"RETURN COUNT(*) PATTERN Stock S+ WHERE [company] AND S.price > NEXT(S).price "
                f"AND S.volume > NEXT(S).volume WITHIN {minutes} minutes SLIDE {minutes * 6} seconds")
        events = _stock(12_000, rate=1.0)
        plan = [(events[i:i + 300], events[i]["time"]) for i in range(0, len(events), 300)]
        _, _, store = drive(text, plan, restore=True)
        steady = sorted(store.written_per_batch[-10:])
        written[minutes] = steady[len(steady) // 2]
    assert written[40] < 1.5 * written[5], written


def test_a_whole_state_goes_on_logged_from_a_base_taken_at_once() -> None:
    """A state written whole (no store: as before) restores and goes on; the next snapshot with a store
    is logged, on a base of its own, and every later restore from base and log gives the same rows."""
    text = ("RETURN COUNT(*), MAX(S.price) PATTERN SEQ(Stock A, NOT Stock N, Stock S+) "
            "WHERE [company] AND S.price > NEXT(S).price AND S.volume < NEXT(S).volume AND N.volume > 900 "
            "WITHIN 60 s SLIDE 20 s")
    cq = compile_query(text)
    events = _stock(600, rate=2.0)
    plan = [(events[i:i + 50], events[i]["time"]) for i in range(0, len(events), 50)]
    want, _, _ = drive(text, plan, restore=False)
    runner = Engine(cq)
    got, formats, store = [], [], Store()
    for i, (records, watermark) in enumerate(plan):
        if i == 3:  # a whole snapshot (no store open), as the state was written before
            runner = Engine.restore(cq, runner.snapshot())
        elif i > 3:
            blob = store.snapshot(runner)
            with chunk_store(dict(store.chunks)):
                formats.append(loads(blob)["format"])
            runner = store.restore(lambda b: Engine.restore(cq, b), blob)
        runner.add_many(records)
        got.append(runner.advance(watermark))
    got.append(runner.finish())
    same_calls(text, events, want, got)
    assert formats and set(formats) == {LOGGED_FORMAT}


def test_a_restore_replays_at_most_the_batches_since_the_latest_base() -> None:
    """A base (the whole graph) every BASE_EVERY snapshots: the log a restore replays stays short."""
    from greta_stream.engine.engine import BASE_EVERY

    text = "RETURN COUNT(*) PATTERN Stock S+ WHERE [company] AND S.price != NEXT(S).price WITHIN 600 s SLIDE 60 s"
    events = _stock(3000, rate=1.0)
    plan = [(events[i:i + 30], events[i]["time"]) for i in range(0, len(events), 30)]
    want, _, _ = drive(text, plan, restore=False)
    got, _, store = drive(text, plan, restore=True)
    same_calls(text, events, want, got)
    runner = Engine(compile_query(text))
    logs = []
    for records, watermark in plan:
        runner.add_many(records)
        runner.advance(watermark)
        with chunk_store():
            runner.snapshot()
        logs.append(len(runner.log.chunks))
    assert max(logs) == BASE_EVERY - 1 and logs.count(0) >= len(plan) // BASE_EVERY  # a base, then its log
