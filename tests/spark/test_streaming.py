"""Streaming on local Spark equals `evaluate` on the same events.

Events arrive shuffled over several micro-batches (one file each); a final
event of an unused type moves the watermark past every window. Bad and late
records go to the dead-letter sink and change nothing else.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest

from greta_stream import evaluate
from greta_stream.connectors.jsonl import dumps, loads
from greta_stream.connectors.sinks import read_jsonl_dir
from greta_stream.errors import ConfigError
from greta_stream.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig
from greta_stream.spark.pipeline import run
from greta_stream.testing.files import write_batches

pytestmark = pytest.mark.spark

QUERIES = {
    "stock": "RETURN sector, COUNT(*), AVG(S.price), MAX(S.price) PATTERN Stock S+ "
             "WHERE [company, sector] AND S.price > NEXT(S).price GROUP-BY sector WITHIN 60 s SLIDE 20 s",
    "negation": "RETURN g, COUNT(*), SUM(A.v), MIN(B.v) PATTERN SEQ(NOT E, A+, NOT SEQ(C, D), B, NOT E e2) "
                "WHERE [g] AND A.v <= NEXT(A).v GROUP-BY g WITHIN 12 s SLIDE 4 s",
    "runs": "RETURN segment, COUNT(*) PATTERN SEQ(NOT Accident X, Position P+) "
            "WHERE [P.vehicle, segment] AND P.speed > NEXT(P).speed GROUP-BY segment WITHIN 30 s SLIDE 10 s",
    # the columnar engine's wider shapes: one type at three positions (one negated), a middle and a
    # trailing NOT, MIN/MAX over a SEQ, a predicate across two positions
    "widened": "RETURN sector, COUNT(*), MAX(S.price), MIN(A.price) PATTERN SEQ(Stock A, NOT Halt H, Stock S+, "
               "NOT Stock N) WHERE [company, sector] AND S.price > NEXT(S).price AND A.price < NEXT(S).price "
               "AND N.price > 104 GROUP-BY sector WITHIN 60 s SLIDE 20 s",
    # selection strategies and bounded repetition (docs/QUERY_LANGUAGE.md section 11): per-vertex
    # first candidates and the partition's previous time stamp live in the shards' state
    "next-match": "RETURN sector, COUNT(*), AVG(S.price) PATTERN Stock S{2,} SEMANTICS skip-till-next-match "
                  "WHERE [company, sector] AND S.price > NEXT(S).price GROUP-BY sector WITHIN 60 s SLIDE 20 s",
    "contiguous": "RETURN g, COUNT(*), SUM(A.v), MAX(B.v) PATTERN SEQ(A+, C?, B{1,2}) SEMANTICS contiguous "
                  "WHERE [g] GROUP-BY g WITHIN 12 s SLIDE 4 s",
    # a counted repetition inside a SEQ: its lanes count B's iterations over the whole trend
    "counted": "RETURN g, COUNT(*), SUM(A.v), MAX(B.v) PATTERN SEQ(B, A{2,3}, NOT E, C) "
               "WHERE [g] AND A.v <= NEXT(A).v GROUP-BY g WITHIN 12 s SLIDE 4 s",
    # a counted group inside a SEQ (its loop's store a lane up), with arithmetic across its two events
    "group": "RETURN g, COUNT(*), SUM(C.v), MIN(B.v) PATTERN SEQ(A, (SEQ(B, C)){1,2}, D) "
             "WHERE [g] AND B.v - NEXT(C).v < 2 GROUP-BY g WITHIN 24 s SLIDE 4 s",
    # an optional group (taken whole or stepped over: A.v < NEXT(D).v only where it is) and a second
    # looped group in the same SEQ
    "optional-group": "RETURN g, COUNT(*), SUM(D.v), MAX(B.v) PATTERN SEQ(A, (SEQ(B, C))?, D, (SEQ(E, B b2))+) "
                      "WHERE [g] AND A.v < NEXT(D).v GROUP-BY g WITHIN 24 s SLIDE 4 s",
    # a quotient of the two events' prices (a pair program, judged pair by pair in a scanned store)
    "ratio": "RETURN sector, COUNT(*), AVG(S.price) PATTERN Stock S+ WHERE [company, sector] "
             "AND NEXT(S).price / S.price < 0.995 GROUP-BY sector WITHIN 60 s SLIDE 20 s",
    # an edge predicate within a negated SEQ (its matches: a dominance search over the kept events)
    "not-seq-edge": "RETURN g, COUNT(*), SUM(A.v) PATTERN SEQ(A+, NOT SEQ(C c, D d), B) "
                    "WHERE [g] AND c.v < NEXT(d).v GROUP-BY g WITHIN 12 s SLIDE 4 s",
    # a predicate across a NOT inside a negated SEQ, into a Kleene plus over a SEQ inside it
    "not-seq-group": "RETURN g, COUNT(*), SUM(A.v) PATTERN SEQ(A+, NOT SEQ(C c, NOT E e, (SEQ(D d, C f))+), B) "
                     "WHERE [g] AND c.v < NEXT(d).v GROUP-BY g WITHIN 12 s SLIDE 4 s",
    # an optional group inside a counted group (its loop steps back past the group too)
    "optional-in-group": "RETURN g, COUNT(*), SUM(A.v), MAX(D.v) PATTERN (SEQ(A, (SEQ(C, D))?)){2,3} "
                         "WHERE [g] AND A.v <= NEXT(A).v GROUP-BY g WITHIN 12 s SLIDE 4 s",
    # two counted groups in a SEQ, each in its lanes
    "two-groups": "RETURN g, COUNT(*), SUM(A.v) PATTERN SEQ((SEQ(A, B)){2}, (SEQ(C, D)){1,2}) "
                  "WHERE [g] GROUP-BY g WITHIN 40 s SLIDE 8 s",
    # a counted event beside a counted group (a counted group of one event), and an optional group inside a
    # Kleene plus over a SEQ that is a part of a SEQ
    "counted-beside": "RETURN g, COUNT(*), SUM(A.v) PATTERN SEQ((SEQ(A, B)){2}, C{1,2}) "
                      "WHERE [g] GROUP-BY g WITHIN 40 s SLIDE 8 s",
    "optional-in-loop": "RETURN g, COUNT(*), SUM(B.v) PATTERN SEQ(A, (SEQ(B, (SEQ(C, D))?))+, E) "
                        "WHERE [g] AND B.v <= NEXT(B).v GROUP-BY g WITHIN 24 s SLIDE 4 s",
    # an equivalence attribute of aliases apart: a run of vertices per value, B's in every run near it
    "apart": "RETURN g, COUNT(*), SUM(B.v), MAX(c.v) PATTERN SEQ(NOT E, A a, B+, D c) "
             "WHERE [g] AND [a.v, c.v] GROUP-BY g WITHIN 30 s SLIDE 5 s",
    # a NOT keyed by it too: an E bounds its value's run only
    "apart-not": "RETURN g, COUNT(*), SUM(B.v) PATTERN SEQ(NOT E e, A a, B+, D c) "
                 "WHERE [g] AND [a.v, c.v, e.v] GROUP-BY g WITHIN 30 s SLIDE 5 s",
    # contiguous with an attribute of every positive alias that the NOT lacks: another vehicle breaks a trend
    "contiguous-runs": "RETURN segment, COUNT(*), MAX(P.speed) PATTERN SEQ(Position P+, NOT Accident A) SEMANTICS "
                       "contiguous WHERE [P.vehicle, segment] GROUP-BY segment WITHIN 20 s SLIDE 5 s",
    # the same under skip-till-next-match: a candidate lies in the trend's run
    "apart-next": "RETURN g, COUNT(*), SUM(B.v) PATTERN SEQ(A a, B+, D c) SEMANTICS skip-till-next-match "
                  "WHERE [g] AND [a.v, c.v] GROUP-BY g WITHIN 30 s SLIDE 5 s",
    # a negated SEQ's part keyed by an equivalence attribute of some aliases: a match bounds its value's run
    "keyed-not-seq": "RETURN g, COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, D d), B) "
                     "WHERE [g] AND [a.v, c.v] GROUP-BY g WITHIN 12 s SLIDE 4 s",
    # six order comparisons on a negated SEQ's step: the pairs within a window's length scanned
    "not-seq-six": "RETURN g, COUNT(*), SUM(A.v) PATTERN SEQ(A+, NOT SEQ(C c, D d), B) WHERE [g] AND "
                   "c.v <= NEXT(d).v + 1 AND c.v >= NEXT(d).v - 3 AND c.v != NEXT(d).v + 1 AND c.v < NEXT(d).v + 4 "
                   "AND c.v * 2 > NEXT(d).v - 5 AND c.v - 1 < NEXT(d).v GROUP-BY g WITHIN 12 s SLIDE 4 s",
    # two attributes keying parts of one negated SEQ: a run per a's v; b reads d's w at its own
    "two-keys-not-seq": "RETURN g, COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, D d), B b) "
                        "WHERE [g] AND [a.v, c.v] AND [b.w, d.w] GROUP-BY g WITHIN 12 s SLIDE 4 s",
    # a group inside a negated SEQ bound at both ends, an edge predicate on its loop step: chains of iterations
    "not-seq-group-bound": "RETURN g, COUNT(*), SUM(A.v) PATTERN SEQ(A+, NOT SEQ(C c, (SEQ(D d, E e))+, C f), B) "
                           "WHERE [g] AND c.v < NEXT(d).v AND d.v > NEXT(e).v AND e.v < NEXT(f).v AND e.v <= NEXT(d).v "
                           "GROUP-BY g WITHIN 12 s SLIDE 4 s",
    # a NOT over a counted SEQ: a match through two iterations
    "not-seq-counted": "RETURN g, COUNT(*), SUM(A.v) PATTERN SEQ(A+, NOT (SEQ(C c, D d)){2}, B) WHERE [g] "
                       "GROUP-BY g WITHIN 12 s SLIDE 4 s",
    # groups nested in a Kleene plus over a SEQ: a looped one, and a counted event (a counted group of one)
    "nested": "RETURN g, COUNT(*), SUM(B.v) PATTERN (SEQ(A, (SEQ(B, C))+, D{2}))+ WHERE [g] AND C.v >= NEXT(B).v "
              "GROUP-BY g WITHIN 24 s SLIDE 4 s",
    # a counted repetition inside a counted group, a NOT inside it: written out into copies of B and E
    "count-in-count": "RETURN g, COUNT(*), SUM(B.v), MAX(C.v) PATTERN (SEQ(C, (SEQ(B, NOT E, D)){2})){1,2} "
                      "WHERE [g] AND B.v <= NEXT(D).v GROUP-BY g WITHIN 40 s SLIDE 8 s",
}


def make_events(seed: int = 1) -> list[dict]:
    rnd = random.Random(seed)
    events: list[dict] = []
    for t in range(0, 200):
        c = rnd.randrange(4)
        events.append({"type": "Stock", "time": t + 0.5, "company": c, "sector": c % 2,
                       "price": round(100 + rnd.gauss(0, 3), 2)})
        events.append({"type": rnd.choice("AABCDE"), "time": t, "v": rnd.randrange(5), "g": rnd.randrange(2),
                       "w": int(t) % 3})  # w: no draw of its own, the other attributes as they were
        if rnd.random() < 0.7:
            events.append({"type": "Position", "time": t, "vehicle": rnd.randrange(3), "segment": rnd.randrange(2),
                           "speed": rnd.randrange(100)})
        if rnd.random() < 0.03:
            events.append({"type": "Accident", "time": t, "segment": rnd.randrange(2)})
    for i, e in enumerate(events):
        e["id"] = i
    return events


def normalized(rows: list[dict]) -> list[dict]:
    return sorted((loads(dumps(r)) for r in rows), key=repr)


def pipeline(tmp: Path, names: list[str], shards: int = 3, operator: str | None = None) -> PipelineConfig:
    return PipelineConfig(
        source=SourceConfig(format="jsonl", path=str(tmp / "in"), max_files_per_trigger=1),
        queries=[QueryConfig(name=n, text=QUERIES[n], sinks=[SinkConfig(format="jsonl", path=str(tmp / "out" / n))],
                             dead_letter=SinkConfig(format="jsonl", path=str(tmp / "dead" / n))) for n in names],
        checkpoint=str(tmp / "chk"), lateness_s=60, once=True, shards=shards, operator=operator,
    )


@pytest.mark.parametrize("operator", ["transformWithStateInPandas", "applyInPandasWithState"])
def test_streaming_equals_batch_with_bad_and_late_events(spark, tmp_path: Path, operator: str) -> None:  # noqa: ANN001
    events = make_events()
    bad = ["{not json", json.dumps({"type": "A", "v": 1}), json.dumps({"type": "Stock", "time": 300.5, "company": 1}),
           json.dumps({"type": "A", "time": 1, "v": 1, "g": 0}),  # far behind the watermark by then: late
           json.dumps({"type": "Flush", "time": 100_000})]
    write_batches(tmp_path / "in", events, n_files=4, extra_last=bad)
    counts = run(pipeline(tmp_path, list(QUERIES), operator=operator), spark=spark, echo=lambda s: None)
    for name, text in QUERIES.items():
        got = list(read_jsonl_dir(tmp_path / "out" / name))
        assert got and normalized(got) == normalized(evaluate(text, events)), name
        assert len(got) == len(normalized(got))  # no duplicates
        reasons = sorted(d["reason"] for d in read_jsonl_dir(tmp_path / "dead" / name))
        assert counts[name]["dead_letters"] == len(reasons)
        assert "malformed" in reasons and "missing_time" in reasons
    assert sorted(d["reason"] for d in read_jsonl_dir(tmp_path / "dead" / "negation")) == ["late", "malformed", "missing_time"]
    assert sorted(d["reason"] for d in read_jsonl_dir(tmp_path / "dead" / "stock")) == ["malformed", "missing_attribute", "missing_time"]


@pytest.mark.parametrize("operator", ["transformWithStateInPandas", "applyInPandasWithState"])
def test_restart_from_checkpoint_loses_and_repeats_nothing(spark, tmp_path: Path, operator: str) -> None:  # noqa: ANN001
    events = make_events(seed=2)
    staging = tmp_path / "staging"
    write_batches(staging, events, n_files=5, seed=3, extra_last=[json.dumps({"type": "Flush", "time": 100_000})])
    files = sorted(staging.iterdir())
    (tmp_path / "in").mkdir()
    for f in files[:2]:
        shutil.copy2(f, tmp_path / "in" / f.name)  # keeps the mtime: Spark reads files in mtime order
    cfg = pipeline(tmp_path, ["negation"], shards=2, operator=operator)
    run(cfg, spark=spark, echo=lambda s: None)
    other = "applyInPandasWithState" if operator == "transformWithStateInPandas" else "transformWithStateInPandas"
    with pytest.raises(ConfigError, match=f"written by the {operator} operator, this run asks for {other}"):
        run(pipeline(tmp_path, ["negation"], shards=2, operator=other), spark=spark, echo=lambda s: None)
    first = list(read_jsonl_dir(tmp_path / "out" / "negation"))
    for f in files[2:]:
        shutil.copy2(f, tmp_path / "in" / f.name)  # keeps the mtime: Spark reads files in mtime order
    run(cfg, spark=spark, echo=lambda s: None)
    got = list(read_jsonl_dir(tmp_path / "out" / "negation"))
    assert first and len(got) > len(first)
    assert normalized(got) == normalized(evaluate(QUERIES["negation"], events))


def test_typed_parquet_input_with_timestamps(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """Typed columns (Parquet) with a timestamp time column give the rows of `evaluate`."""
    import pandas as pd

    stock = [e for e in make_events(seed=4) if e["type"] == "Stock"]
    frame = pd.DataFrame(stock)
    frame["time"] = pd.to_datetime(frame["time"], unit="s", utc=True) + pd.Timedelta(days=20_000)
    (tmp_path / "in").mkdir()
    for i, part in enumerate([frame.iloc[:300].sample(frac=1, random_state=1), frame.iloc[300:]]):
        path = tmp_path / "in" / f"part-{i}.parquet"
        part.to_parquet(path, index=False, coerce_timestamps="us")  # Spark cannot read nanoseconds
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the source reads files in modification order
    cfg = PipelineConfig(
        source=SourceConfig(format="parquet", path=str(tmp_path / "in"), max_files_per_trigger=1),
        queries=[QueryConfig(name="stock", text=QUERIES["stock"], sinks=[SinkConfig(format="jsonl", path=str(tmp_path / "out"))],
                             dead_letter=SinkConfig(format="jsonl", path=str(tmp_path / "dead")))],
        checkpoint=str(tmp_path / "chk"), lateness_s=60, once=True, shards=2,
    )
    run(cfg, spark=spark, echo=lambda s: None)
    got = normalized(list(read_jsonl_dir(tmp_path / "out")))
    watermark = frame["time"].max() - pd.Timedelta(seconds=60)  # --once emits the windows it passed
    expected = normalized([r for r in evaluate(QUERIES["stock"], frame) if r["window_end"] <= watermark])
    assert got and got == expected
    assert isinstance(got[0]["window_start"], str) and got[0]["window_start"].startswith("2024-")


def test_typed_parquet_input_with_numeric_times_runs_columnar(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """Typed columns with numeric times go to the columnar shards as
    DataFrames (no per-event dicts): every type in one file (so each column
    has missing values, NaN and null), a Stock row without a price, rows out
    of order; the rows are those of `evaluate` over the same frames."""
    import pandas as pd

    events = make_events(seed=5)
    events[10] = {k: v for k, v in events[10].items() if k != "price"} if events[10]["type"] == "Stock" else events[10]
    bad = {"type": "Stock", "time": 50.5, "company": 1, "sector": 1, "id": -1}  # no price: a dead letter
    frame = pd.DataFrame([*events, bad])
    (tmp_path / "in").mkdir()
    for i, part in enumerate([frame.iloc[:500].sample(frac=1, random_state=2), frame.iloc[500:]]):
        path = tmp_path / "in" / f"part-{i}.parquet"
        part.to_parquet(path, index=False)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the source reads files in modification order
    cfg = PipelineConfig(
        source=SourceConfig(format="parquet", path=str(tmp_path / "in"), max_files_per_trigger=1),
        queries=[QueryConfig(name=n, text=QUERIES[n], sinks=[SinkConfig(format="jsonl", path=str(tmp_path / "out" / n))],
                             dead_letter=SinkConfig(format="jsonl", path=str(tmp_path / "dead" / n))) for n in ("stock", "runs")],
        checkpoint=str(tmp_path / "chk"), lateness_s=60, once=True, shards=2,
    )
    run(cfg, spark=spark, echo=lambda s: None)
    watermark = frame["time"].max() - 60
    for name in ("stock", "runs"):
        got = normalized(list(read_jsonl_dir(tmp_path / "out" / name)))
        expected = normalized([r for r in evaluate(QUERIES[name], frame) if r["window_end"] <= watermark])
        assert got and got == expected, name
    dead = list(read_jsonl_dir(tmp_path / "dead" / "stock"))
    assert [d["event"]["id"] for d in dead if d["reason"] == "missing_attribute"] == [-1]
