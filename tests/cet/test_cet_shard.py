"""The Spark shard step in CET mode, without a JVM: micro-batches equal one batch.

A driver loop plays Spark: records split into time-ordered micro-batches
(shuffled inside), each shard called with the state bytes of its last call
and the watermark of the batches before it; a last two empty batches move the watermark to an
infinite-ish value and flush every window. One output row per trend.
"""

from __future__ import annotations

import random
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from greta_stream import evaluate
from greta_stream.connectors.jsonl import loads
from greta_stream.runtime import RunSpec
from greta_stream.spark.shard import step

QUERY = ("RETURN TRENDS PATTERN SEQ(NOT E, A+, B) WHERE [g] AND A.v <= NEXT(A).v GROUP-BY g "
         "WITHIN 6 s SLIDE 2 s")


def events(seed: int, n: int = 40) -> list[dict]:
    rnd = random.Random(seed)
    return [{"type": rnd.choice("AAABE"), "time": rnd.randrange(30), "v": rnd.randrange(4), "g": rnd.randrange(2),
             "id": i} for i in range(n)]


def drive(cfg: RunSpec, evs: list[dict], n_batches: int, n_shards: int, seed: int) -> list[dict]:
    rnd = random.Random(seed)
    ordered = sorted(evs, key=lambda e: e["time"])
    cuts = sorted(rnd.sample(range(1, len(ordered)), n_batches - 1))
    batches = [ordered[a:b] for a, b in zip([0, *cuts], [*cuts, len(ordered)], strict=True)] + [[], []]
    states: dict[int, bytes | None] = {}
    rows: list[dict] = []
    watermark_ms = 0
    for batch in batches:
        rnd.shuffle(batch)
        by_shard: dict[int, list[dict]] = {}
        for e in batch:
            by_shard.setdefault(zlib.crc32(str(e["g"]).encode()) % n_shards, []).append(e)
        for shard in set(by_shard) | {s for s, b in states.items() if b}:
            out, states[shard], _ = step(cfg, states.get(shard), by_shard.get(shard, []), watermark_ms)
            rows += [loads(o["payload"]) for o in out if o["kind"] == "row"]
        watermark_ms = (max(e["time"] for e in batch) * 1000 if batch else 10**9)
    return rows


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 5), st.sampled_from([None, 2]), st.sampled_from(["all", "complete"]))
def test_shard_micro_batches_equal_batch(seed: int, n_batches: int, cap: int | None, trends: str) -> None:
    evs = events(seed)
    cfg = RunSpec.create(QUERY, mode="cet", trends=trends, max_trends=cap)
    got = drive(cfg, evs, n_batches, n_shards=3, seed=seed)
    want = list(evaluate(QUERY, evs, mode="cet", trends=trends, max_trends=cap))
    key = lambda r: (r["window_start"], r["g"])  # noqa: E731 - shards interleave groups; order within one is kept
    assert sorted(got, key=key) == sorted(want, key=key)
