"""The shard step without a JVM: what Spark calls per shard and micro-batch.

A driver loop plays Spark's part: records hashed to shards, split into
micro-batches, the watermark of each batch is the max event time of the
batches before it (0 before the first; the delay is the query's lateness, as
on Spark), shards with state
are called when their timeout passed. The rows must be those of `evaluate`.
"""

from __future__ import annotations

import json
import pickle
import random
import struct
import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_streaming import QUERIES, make_events, normalized

from greta_stream import evaluate
from greta_stream.cet import TrendExtractor
from greta_stream.connectors.jsonl import loads
from greta_stream.engine import DeadLetter, Engine
from greta_stream.engine.columnar.stream import ColumnarStream
from greta_stream.errors import SnapshotError
from greta_stream.runtime import RunSpec
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark import shard as shard_mod
from greta_stream.spark.layout import shard_keys, spark_partition
from greta_stream.spark.shard import (
    STATE_VERSION,
    Shard,
    engine_watermark,
    parse_json_records,
    step,
    upgrade_state,
)


def results(out: list[dict]) -> list[dict]:
    """The rows and dead letters of a step's outputs (not the state sizes)."""
    return [o for o in out if o["kind"] != "state"]


def drive(query: str, events: list, n_batches: int, n_shards: int, delay_ms: int, seed: int,
          engine: str = "auto", stragglers: int = 0, kernel_threads: int | None = None) -> tuple[list, list]:
    rnd = random.Random(seed)
    ordered = sorted(events, key=lambda e: e["time"] if isinstance(e, dict) and "time" in e else 0)
    cuts = sorted(rnd.sample(range(1, len(ordered)), n_batches - 1)) if n_batches > 1 else []
    batches = [ordered[a:b] for a, b in zip([0, *cuts], [*cuts, len(ordered)])]
    for _ in range(stragglers if len(batches) > 1 else 0):  # events that come a batch or more late
        i = rnd.randrange(len(batches) - 1)
        if batches[i]:
            batches[rnd.randrange(i + 1, len(batches))].append(batches[i].pop(rnd.randrange(len(batches[i]))))
    for b in batches:
        rnd.shuffle(b)
    batches.append([])  # a last no-data batch after the watermark moved
    cfg = RunSpec.create(query, engine=engine, kernel_threads=kernel_threads, lateness_s=delay_ms / 1000)
    states: dict[int, bytes] = {}
    timeouts: dict[int, int] = {}
    rows: list = []
    dead: list = []
    watermark, max_ms = 0, 0
    for batch in batches:
        by_shard: dict[int, list] = {}
        for e in batch:
            key = repr(e.get("g", e.get("sector", e.get("segment")))) if isinstance(e, dict) else ""
            by_shard.setdefault(hash(key) % n_shards, []).append(e)
        due = {k for k, t in timeouts.items() if watermark > t}
        for k in sorted(set(by_shard) | due):
            out, state, timeout = step(cfg, states.get(k), by_shard.get(k, []), watermark)
            rows += [loads(o["payload"]) for o in out if o["kind"] == "row"]
            dead += [loads(o["payload"]) for o in out if o["kind"] == "dead"]
            states.pop(k, None), timeouts.pop(k, None)
            if state is not None:
                states[k] = state
                if timeout is not None:
                    assert timeout >= max(watermark, 1)
                    timeouts[k] = timeout
        times = [int(e["time"] * 1000) for e in batch if isinstance(e, dict) and "time" in e]
        max_ms = max([max_ms, *times])
        watermark = max(watermark, max_ms)  # the latest event time, as the operator's column: the delay is the query's
    # Nothing may be left behind once the watermark passed everything.
    assert not states, "state kept after every window ended"
    return rows, dead


@pytest.mark.parametrize("engine", ["auto", "general"])
@pytest.mark.parametrize("name", list(QUERIES))
def test_sharded_micro_batches_equal_evaluate(name: str, engine: str) -> None:
    events = make_events(seed=3) + [{"type": "Flush", "time": 10_000}]
    rows, dead = drive(QUERIES[name], events, n_batches=5, n_shards=3, delay_ms=60_000, seed=1, engine=engine)
    assert normalized(rows) == normalized(evaluate(QUERIES[name], events))
    assert dead == []


@pytest.mark.parametrize("threads", [1, 3, None])
def test_kernel_threads_reach_the_columnar_stream(threads: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """`RunSpec.kernel_threads` (a user's cap; None: one per core) caps the kernel's
    threads in new, restored and cached engines; rows do not change."""
    import greta_stream.engine.columnar.driver as columnar

    monkeypatch.setattr(columnar, "PARALLEL_EVENTS", 0)
    monkeypatch.setattr(columnar.os, "cpu_count", lambda: 4)
    seen: list[int] = []
    real = columnar.ThreadPoolExecutor

    def pool(workers: int) -> Any:
        seen.append(workers)
        return real(workers)

    monkeypatch.setattr(columnar, "ThreadPoolExecutor", pool)
    events = make_events(seed=5) + [{"type": "Flush", "time": 10_000}]
    q = QUERIES["stock"]
    rows, _ = drive(q, events, n_batches=4, n_shards=2, delay_ms=60_000, seed=2, kernel_threads=threads)
    assert normalized(rows) == normalized(evaluate(q, events))
    # one thread runs without a pool; else the cap, or fewer where a kernel call has fewer ranges of tasks
    cap = {1: 0, 3: 3, None: 4}[threads]
    assert all(n <= cap for n in seen) and (max(seen) if seen else 0) == cap, seen


@pytest.mark.parametrize("name", ["negation", "next-match", "contiguous"])
@settings(max_examples=15, deadline=None)
@given(st.integers(1, 8), st.integers(1, 4), st.integers(0, 2**16))
def test_any_split_any_shards(name: str, n_batches: int, n_shards: int, seed: int) -> None:
    events = make_events(seed=seed)[:120] + [{"type": "Flush", "time": 20_000}]
    q = QUERIES[name]
    # The delay covers the spread of every batch: nothing is late, so rows equal evaluate.
    rows, dead = drive(q, events, n_batches=n_batches, n_shards=n_shards, delay_ms=10_000_000, seed=seed)
    assert normalized(rows) == normalized(evaluate(q, events))
    assert dead == []


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 8), st.integers(1, 4), st.integers(0, 2**16), st.sampled_from([0, 2_000, 30_000]))
def test_columnar_shards_equal_general_shards_with_late_events(n_batches: int, n_shards: int, seed: int,
                                                                delay_ms: int) -> None:
    """The stock query runs columnar under "auto": rows and dead letters
    (late stragglers included) are the general engine's, batch for batch."""
    events = [e for e in make_events(seed=seed) if e["type"] == "Stock"][:150] + [{"type": "Flush", "time": 20_000}]
    q = QUERIES["stock"]
    args = dict(n_batches=n_batches, n_shards=n_shards, delay_ms=delay_ms, seed=seed, stragglers=6)
    rows, dead = drive(q, events, engine="auto", **args)
    want_rows, want_dead = drive(q, events, engine="general", **args)
    assert rows == want_rows
    assert dead == want_dead


def query_states(state: bytes) -> dict:
    """name -> (run fingerprint, tagged runner snapshot) of a shard's state."""
    return pickle.loads(zlib.decompress(state[shard_mod._HEADER:]))["queries"]


def test_runner_states_are_tagged_and_older_formats_are_refused_or_upgraded() -> None:
    q = QUERIES["stock"]
    events = [e for e in make_events(seed=1) if e["type"] == "Stock"][:100]
    _, state, _ = step(RunSpec.create(q), None, events, 0)
    assert query_states(state)["query"][1][:1] == b"C"
    _, general, _ = step(RunSpec.create(q, engine="general"), None, events, 0)
    assert query_states(general)["query"][1][:1] == b"G"
    out_c, _, _ = step(RunSpec.create(q), state, [], 150_000)
    out_g, _, _ = step(RunSpec.create(q, engine="general"), general, [], 150_000)
    assert results(out_c) == results(out_g) and results(out_c)
    queries = QuerySet.of({"query": RunSpec.create(q)})
    for version in (1, 2, 3):  # 2 and 3 keyed shards by their number: their states would land elsewhere
        with pytest.raises(SnapshotError, match="new checkpoint"):
            upgrade_state(version, state, queries)
    assert upgrade_state(STATE_VERSION, state, queries) == state
    # a state of version 4 held one query's tagged runner: it becomes the state of a stream of that query
    tagged = query_states(state)["query"][1]
    v4 = tagged[:1] + struct.pack(">HH", 0, 1) + zlib.compress(tagged[1:])
    out_4, _, _ = step(queries, upgrade_state(4, v4, queries), [], 150_000)
    assert results(out_4) == results(out_c)
    two = QuerySet.of({"a": RunSpec.create(q), "b": RunSpec.create(q)})
    with pytest.raises(SnapshotError):  # whose state would it be?
        upgrade_state(4, v4, two)
    # the state of a query run in another mode is not misread: that query starts anew
    out_cet, _, _ = step(RunSpec.create(q, mode="cet"), state, [], 150_000)
    assert results(out_cet) == []


def test_state_records_its_shard_and_the_shard_count() -> None:
    """A checkpoint read with another shard count would put partitions in
    the wrong shard: refused with the count to use, never silently wrong."""
    q = QUERIES["stock"]
    events = [e for e in make_events(seed=1) if e["type"] == "Stock"][:100]
    _, state, _ = step(RunSpec.create(q), None, events, 0, Shard(1, 4))
    out, _, _ = step(RunSpec.create(q), state, [], 150_000, Shard(1, 4))
    assert out
    with pytest.raises(SnapshotError, match="written with 4 shards, this run has 8"):
        step(RunSpec.create(q), state, [], 150_000, Shard(1, 8))
    with pytest.raises(SnapshotError, match="state of shard 1 handed to shard 2"):
        step(RunSpec.create(q), state, [], 150_000, Shard(2, 4))
    with pytest.raises(ValueError):
        Shard(4, 4)


@pytest.mark.parametrize("count", [1, 2, 3, 4, 6, 8, 12, 16, 64])
def test_shard_keys_spread_shards_evenly_over_spark_partitions(count: int) -> None:
    keys = shard_keys(count)
    assert len(set(keys)) == count and min(keys) >= 0
    for partitions in [p for p in range(1, count + 1) if count % p == 0]:
        assert [spark_partition(k, partitions) for k in keys] == [s % partitions for s in range(count)]


def test_late_and_bad_records_are_dead_lettered_not_raised() -> None:
    q = QUERIES["negation"]
    out, state, timeout = step(RunSpec.create(q), None, [{"type": "A", "time": 50, "v": 1, "g": 0}], 0)
    assert results(out) == [] and state is not None and timeout is not None
    records = list(parse_json_records(['{"type": "A", "time": 1, "v": 1, "g": 0}', "{oops", None, "[1]"]))
    out, state, _ = step(RunSpec.create(q), state, records, 40_000)
    reasons = sorted(json.loads(o["payload"])["reason"] for o in out if o["kind"] == "dead")
    assert reasons == ["late", "malformed", "malformed", "malformed"]
    assert all(o["reason"] == json.loads(o["payload"])["reason"] and o["grp"] is None for o in results(out))


def test_idle_shard_keeps_no_state_and_irrelevant_types_are_ignored() -> None:
    q = QUERIES["stock"]
    out, state, timeout = step(RunSpec.create(q), None, [{"type": "Other", "time": 5}], 0)
    assert (results(out), state, timeout) == ([], None, None)
    assert [(o["kind"], json.loads(o["payload"])["bytes"]) for o in out] == [("state", 0)]  # it holds nothing here


def test_state_is_compressed_versioned_bytes() -> None:
    q = QUERIES["stock"]
    events = [e for e in make_events(seed=1) if e["type"] == "Stock"][:200]
    out, state, timeout = step(RunSpec.create(q), None, events, 0)
    head = shard_mod._HEADER
    assert isinstance(state, bytes) and len(zlib.decompress(state[head:])) > len(state)
    assert state[:head] == Shard(0, 1).header(max(e["time"] for e in events))  # the shard's clock: its latest time
    assert STATE_VERSION == 6
    sizes = [json.loads(o["payload"])["bytes"] for o in out if o["kind"] == "state"]
    assert len(sizes) == 1 and 0 < sizes[0] < len(zlib.decompress(state[head:]))  # the query's part of the state
    # The batch's own events (up to 199.5 s) close the windows that end by 180 s: their rows leave in
    # this batch, before any watermark; the timeout is the end of the next window, in ms.
    ends = {json.loads(o["payload"])["window_end"] for o in out if o["kind"] == "row"}
    assert min(ends) == 20 and max(ends) == 180
    assert timeout == 200_000


def test_engine_watermark_units() -> None:
    assert engine_watermark("seconds", 0) == float("-inf")  # Spark's "no watermark yet"
    assert engine_watermark("seconds", 39_500) == 39.5
    assert engine_watermark("seconds", 40_000) == 40


@pytest.mark.parametrize(("engine", "mode", "cls"), [
    ("auto", "aggregate", ColumnarStream), ("general", "aggregate", Engine), ("auto", "cet", TrendExtractor),
])
def test_a_workers_cached_engine_gives_what_restoring_gives_and_a_failed_step_is_retried_from_bytes(
    monkeypatch: pytest.MonkeyPatch, engine: str, mode: str, cls: Any,
) -> None:
    """A shard's next batch reuses this worker's engine when the state bytes
    are the ones it wrote; a step that failed midway (its batch added, the
    windows not computed) must not leave a half-run engine for the retry."""
    q = QUERIES["stock"]
    events = sorted((e for e in make_events(seed=3) if e["type"] == "Stock"), key=lambda e: e["time"])[:240]
    batches = [events[:80], events[80:160], events[160:]]
    cfg = RunSpec.create(q, engine=engine, mode=mode)
    advance = cls.advance
    failing = []

    def flaky_advance(self: Any, watermark: Any) -> list:
        if failing:
            failing.clear()
            raise MemoryError("worker lost")
        return advance(self, watermark)

    monkeypatch.setattr(cls, "advance", flaky_advance)

    def run(reuse: bool, fail_at: int | None = None) -> list:
        shard_mod._RUNNERS.clear()
        outs, state, watermark = [], None, 0
        for i, batch in enumerate(batches):
            if i == fail_at:
                failing.append(True)
                with pytest.raises(MemoryError):
                    step(cfg, state, batch, watermark)
            if not reuse:
                shard_mod._RUNNERS.clear()
            out, state, _ = step(cfg, state, batch, watermark)
            outs.append(results(out))
            watermark = max(e["time"] for e in batch) * 1000 - 5_000
        outs.append(results(step(cfg, state, [], 10**9)[0]))
        return outs

    want = run(reuse=False)
    assert sum(len(o) for o in want) > 0
    assert run(reuse=True) == want
    assert run(reuse=True, fail_at=1) == want
    assert run(reuse=True, fail_at=2) == want


def test_cached_engines_are_bounded_in_number_and_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    q = QUERIES["stock"]
    events = [e for e in make_events(seed=1) if e["type"] == "Stock"][:50]
    shard_mod._RUNNERS.clear()
    monkeypatch.setattr(shard_mod._RUNNERS, "max_count", 3)
    for s in range(5):
        step(RunSpec.create(q), None, events, 0, Shard(s, 8))
    assert [k[1].index for k in shard_mod._RUNNERS] == [2, 3, 4]  # the least recently written go first
    one = next(iter(shard_mod._RUNNERS.items.values()))[2]
    monkeypatch.setattr(shard_mod._RUNNERS, "max_bytes", 2 * one + one // 2)
    step(RunSpec.create(q), None, events, 0, Shard(5, 8))
    assert [k[1].index for k in shard_mod._RUNNERS] == [4, 5]
    shard_mod._RUNNERS.clear()


def test_a_worker_drops_the_cached_runners_another_worker_of_its_host_went_past(tmp_path: Any) -> None:
    """Two workers' caches over one host's versions: each keeps the runners of the shards it ran last
    and drops one as soon as the other has written that shard's state since (it would never be taken
    again); a runner both saw at the same version stays, and a cache without versions keeps all."""
    from greta_stream.spark.shard_state import HostVersions, RunnerCache

    queries = QuerySet.of({"q": RunSpec.create(QUERIES["stock"])}, epoch=7)
    a, b = (RunnerCache(64, 1 << 30, HostVersions(tmp_path)) for _ in range(2))
    plain = RunnerCache(64, 1 << 30)
    runner = object()
    for cache in (a, plain):
        cache.put((queries, Shard(0, 2)), 1, runner, 10)  # type: ignore[arg-type]
        cache.put((queries, Shard(1, 2)), 2, runner, 10)  # type: ignore[arg-type]
    b.put((queries, Shard(0, 2)), 3, runner, 10)  # type: ignore[arg-type]  # b ran shard 0's next batch
    assert [k[1].index for k in a] == [0, 1]  # a has not cached anything since
    a.put((queries, Shard(1, 2)), 4, runner, 10)  # type: ignore[arg-type]
    assert [k[1].index for k in a] == [1]  # shard 0 is b's now
    assert a.take((queries, Shard(1, 2)), 4) is runner
    b.put((queries, Shard(0, 2)), 5, runner, 10)  # type: ignore[arg-type]
    assert [k[1].index for k in b] == [0]
    assert [k[1].index for k in plain] == [0, 1]


def test_the_runner_cache_bound_reads_its_old_variable_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """$GRETA_LIVE_BYTES, the variable's earlier name, still sets the bound (with a warning);
    $GRETA_RUNNER_CACHE_BYTES wins when both are set."""
    from greta_stream.spark.shard_state import runner_cache_bytes

    monkeypatch.delenv("GRETA_RUNNER_CACHE_BYTES", raising=False)
    monkeypatch.delenv("GRETA_LIVE_BYTES", raising=False)
    assert runner_cache_bytes(7) == 7
    monkeypatch.setenv("GRETA_LIVE_BYTES", "1000")
    with pytest.warns(FutureWarning, match="GRETA_RUNNER_CACHE_BYTES"):
        assert runner_cache_bytes(7) == 1000
    monkeypatch.setenv("GRETA_RUNNER_CACHE_BYTES", "2000")
    assert runner_cache_bytes(7) == 2000


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=5)
    | st.integers() | st.integers(min_value=2**62, max_value=2**70) | st.integers(max_value=-(2**62)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.dictionaries(st.sampled_from(["type", "time", "v", "big"]), _JSON_VALUES, max_size=4).map(json.dumps),
    st.sampled_from(['{"v": NaN}', '{"v": Infinity, "w": 1}', "{oops", "[1, 2]", "12345678901234567890", '"x"', ""]),
    st.none(),
), max_size=12))
def test_batch_parse_equals_one_line_at_a_time(lines: list) -> None:
    """The batch JSON parser (one scan of the batch decides whether ints
    beyond 64 bits need a second look) reads every line as `loads` does:
    ints of any size stay ints, NaN and Infinity parse, malformed text is a
    `malformed` dead letter holding the text."""
    def one(v: Any) -> Any:
        if v is None:
            return None
        try:
            return loads(v)
        except ValueError as exc:
            return DeadLetter("malformed", v, f"not JSON: {exc}")

    got = parse_json_records(lines)
    want = [one(v) for v in lines]
    assert json.dumps(got, default=repr) == json.dumps(want, default=repr)
    assert [type(x) for x in got] == [type(x) for x in want]


_ROW_VALUES = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6)
               | st.integers(min_value=10**4300, max_value=10**4400) | st.datetimes()
               | st.datetimes(timezones=st.just(__import__("datetime").timezone.utc)))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _ROW_VALUES, max_size=6), st.lists(_ROW_VALUES, max_size=3))
def test_row_text_is_the_general_encoders(row: dict, group: list) -> None:
    """Result rows and group keys go out through the C json encoder where it
    can: the same text as the general encoder (big ints, inf and NaN as null,
    datetimes as ISO-8601 with Z), which keys in Kafka and the results store
    rely on."""
    from greta_stream.connectors.jsonl import dumps, dumps_row

    assert dumps_row(row) == dumps(row)
    assert dumps_row(group) == dumps(group)


def test_incremental_state_writes_what_a_batch_changed_not_the_window() -> None:
    """The same stream (20 events/s in batches of a minute, 60 windows per event) with a
    5-minute and a 40-minute window: once the windows are full, the incremental operator writes
    about the same bytes per micro-batch for both (a batch's chunk and a small
    value); the whole-state operator writes the window every batch."""
    from greta_stream.testing.shards import OperatorSim

    def per_batch(minutes: int, incremental: bool) -> float:
        q = QUERIES["stock"].replace("WITHIN 60 s SLIDE 20 s", f"WITHIN {minutes} minutes SLIDE {minutes} s")
        sim = OperatorSim(2, incremental=incremental)
        rnd = random.Random(5)
        spec = RunSpec.create(q)
        sizes = []
        for b in range(minutes + 20):  # the window filled, then 20 more batches of a minute
            sim.batch(QuerySet.of({"q": spec}), [
                {"type": "Stock", "time": b * 60 + i / 20, "company": rnd.randrange(8), "sector": rnd.randrange(2),
                 "price": float(rnd.randrange(100))} for i in range(1200)])
            if incremental:
                sizes.append(sum(sim.written[-2:]))
            else:
                sizes.append(sum(len(v) for _, v in sim.states.values()))
        return float(np.median(sizes[-20:]))

    short, long = per_batch(5, True), per_batch(40, True)
    assert long < 1.5 * short
    assert per_batch(40, False) > 4 * per_batch(5, False)  # the window, rewritten whole


def test_a_long_window_refers_to_groups_of_chunks_and_keeps_every_chunk_a_restore_needs() -> None:
    """Batches of ten seconds over a 20-minute window: a shard's state refers to groups of its kept
    chunks (what it writes per batch stays small), and the state store keeps every member of a group
    it refers to. Each batch starts on a worker that has met none of the groups (no cached runner,
    no known group: every restore reads them back), rows equal `evaluate`'s, and chunks of closed
    windows are removed."""
    from greta_stream.engine import chunks
    from greta_stream.testing.shards import OperatorSim

    q = QUERIES["stock"].replace("WITHIN 60 s SLIDE 20 s", "WITHIN 20 minutes SLIDE 60 s")
    spec = RunSpec.create(q)
    sim = OperatorSim(2, incremental=True, rebuild=True)
    rnd = random.Random(7)
    events = []
    stored = []
    for b in range(300):
        batch = [{"type": "Stock", "time": b * 10 + i, "company": rnd.randrange(4), "sector": rnd.randrange(2),
                  "price": float(rnd.randrange(50))} for i in range(10)]
        events += batch
        chunks._GROUPS.clear()
        sim.batch(QuerySet.of({"q": spec}), batch)
        stored.append(sum(len(c) for c in sim.chunks.values()))
    assert chunks._GROUPS  # the last batch's restores read groups back
    assert max(stored[-50:]) < 1.5 * max(stored[150:200])  # closed windows' chunks go: the store stays bounded
    chunks._GROUPS.clear()
    sim.finish(QuerySet.of({"q": spec}))
    want = evaluate(q, events)
    assert sorted(map(repr, sim.rows["q"])) == sorted(map(repr, want))


@pytest.mark.parametrize("query", ["stock", "nested"])
def test_a_step_that_restores_writes_what_a_step_with_its_cached_runner_writes(query: str) -> None:
    """Spark hands a shard's batch to either of its Python workers, so a step often finds no cached
    runner and restores from the state store. Such a step writes the same value size and the same
    chunks as one that goes on with its cached runner: a restored chunk keeps its key (it is not
    re-encoded into other bytes and written again), whatever the window's length."""
    from greta_stream.testing.shards import OperatorSim

    text = QUERIES["stock"].replace("WITHIN 60 s SLIDE 20 s", "WITHIN 10 minutes SLIDE 60 s")
    if query == "nested":
        text = ("RETURN sector, COUNT(*) PATTERN (SEQ(Stock A, Stock S+))+ "
                "WHERE [company] AND A.price < NEXT(S).price GROUP-BY sector WITHIN 10 minutes SLIDE 60 s")
    spec = RunSpec.create(text)
    assert spec.runner_kind == "columnar"

    def written(rebuild: bool) -> tuple[list[int], list[set[str]]]:
        sim = OperatorSim(2, incremental=True, rebuild=rebuild)
        rnd = random.Random(3)
        stored = []
        for b in range(40):
            sim.batch(QuerySet.of({"q": spec}), [
                {"type": "Stock", "time": b * 30 + i / 4, "company": rnd.randrange(6), "sector": rnd.randrange(2),
                 "price": float(rnd.randrange(60))} for i in range(120)])
            stored.append(set().union(*map(set, sim.chunks.values())))
        return sim.written, stored

    cached, restored = written(False), written(True)
    assert restored[1] == cached[1]  # the same chunks, by key, in the store after every batch
    assert sum(restored[0]) == sum(cached[0])
