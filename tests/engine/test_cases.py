"""Fixture cases: each tests/cases/*.json pairs a query with a stream and its rows.

A case has `query`, `expected`, and either `events` (a list of records) or
`stream` ("a1 b2": type = upper-cased letter, time = the digits) with
optional `attrs` per stream token. Adding a case needs no Python. Each case
is checked against the engine and against the brute-force oracle.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greta_stream import evaluate
from greta_stream.query import parse
from greta_stream.testing.oracle import oracle_rows

CASES = sorted((Path(__file__).parent.parent / "cases").glob("*.json"))


def load_case(path: Path) -> tuple[str, list[dict], list[dict]]:
    case = json.loads(path.read_text())
    if "events" in case:
        events = case["events"]
    else:
        attrs = case.get("attrs", {})
        events = [
            {"type": tok[0].upper(), "time": int(tok[1:]), "id": tok, **attrs.get(tok, {})}
            for tok in case["stream"].split()
        ]
    return case["query"], events, case["expected"]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_engine_matches_case(path: Path) -> None:
    query, events, expected = load_case(path)
    assert evaluate(query, events) == expected


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_oracle_matches_case(path: Path) -> None:
    query, events, expected = load_case(path)
    assert oracle_rows(parse(query), events) == expected
