"""Poison lines (`greta_stream.testing.hostile`): text that must be a dead
letter with its reason, never a failed stream, on every path that reads JSON
lines: `evaluate --events` and the shard step's parser here; `greta-stream
run` in tests/spark/test_hostile.py, the service in tests/service/test_isolation.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from greta_stream import evaluate
from greta_stream.connectors.jsonl import loads, read_events
from greta_stream.engine import DeadLetter
from greta_stream.spark.shard import parse_json_records, step
from greta_stream.testing.hostile import POISON_LINES

ROOT = Path(__file__).resolve().parents[1]
Q = ("RETURN company, COUNT(*), SUM(S.price) PATTERN Stock S+ WHERE [company] AND S.price > NEXT(S).price "
     "GROUP-BY company WITHIN 20 s SLIDE 10 s")

POISON = [line for line, _ in POISON_LINES]
DEEP, BAD_UTF8, TWICE_TIME, TWICE_GROUP = POISON
DETAILS = [detail for _, detail in POISON_LINES]


def valid_events() -> list[dict]:
    return [{"type": "Stock", "time": t, "company": t % 3, "price": (t * 7) % 11} for t in range(60)]


def poisoned_file(path: Path) -> list[dict]:
    events = valid_events()
    lines = [json.dumps(e).encode() for e in events]
    for i, poison in enumerate(POISON):
        lines.insert(10 * (i + 1), poison)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return events


def test_the_reader_dead_letters_each_poison_line_with_its_reason(tmp_path: Path) -> None:
    events = poisoned_file(tmp_path / "e.jsonl")
    read = list(read_events(tmp_path / "e.jsonl", unique=("time", "company")))
    dead = [r for r in read if isinstance(r, DeadLetter)]
    assert [r for r in read if not isinstance(r, DeadLetter)] == events
    assert [d.reason for d in dead] == ["malformed"] * 4
    assert all(want in d.detail for d, want in zip(dead, DETAILS)), [d.detail for d in dead]
    assert "\ufffd" in dead[1].record  # the text as far as it is text, the bad bytes replaced
    # without unique keys a repeated key is read as Python's parser reads it: the last value
    assert loads(TWICE_TIME.decode())["time"] == 900


@pytest.mark.usefixtures("subprocesses")
def test_evaluate_events_dead_letters_poison_lines(tmp_path: Path) -> None:
    events = poisoned_file(tmp_path / "e.jsonl")
    res = subprocess.run([sys.executable, "-m", "greta_stream", "evaluate", "--query", Q, "--events",
                          str(tmp_path / "e.jsonl"), "--dead-letter", str(tmp_path / "dead.jsonl"), "--no-progress"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    assert [loads(line) for line in res.stdout.splitlines()] == evaluate(Q, events)
    dead = [json.loads(line) for line in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert [d["reason"] for d in dead] == ["malformed"] * 4
    # from standard input too
    res = subprocess.run([sys.executable, "-m", "greta_stream", "evaluate", "--query", Q, "--events", "-",
                          "--no-progress"], input=(tmp_path / "e.jsonl").read_bytes(), capture_output=True,
                         cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr.decode()
    assert [loads(line) for line in res.stdout.decode().splitlines()] == evaluate(Q, events)


@pytest.mark.parametrize("engine", ["auto", "general"])
def test_the_shard_step_dead_letters_poison_lines(engine: str) -> None:
    """The operator's parse (Spark repairs text that is not UTF-8 and flags it; the step's
    parser refuses the rest): rows as `evaluate`, a dead letter per poison line."""
    from greta_stream import RunSpec

    events = valid_events()
    lines = [json.dumps(e) for e in events] + [p.decode("utf-8", "replace") for p in (DEEP, TWICE_TIME, TWICE_GROUP)]
    records = parse_json_records(lines, ("time", "company"))
    spec = RunSpec.create(Q, engine=engine)
    out, state, _ = step(spec, None, records, 0)
    out += step(spec, state, [{"type": "__greta_flush__", "time": 5_800_000_000}], 0, flush=True)[0]
    rows = [loads(o["payload"]) for o in out if o["kind"] == "row"]
    assert sorted(map(repr, rows)) == sorted(map(repr, evaluate(Q, events)))
    dead = [json.loads(o["payload"]) for o in out if o["kind"] == "dead"]
    assert Counter(d["reason"] for d in dead) == {"malformed": 3}
