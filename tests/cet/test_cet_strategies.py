"""CET mode under the selection strategies and with bounded repetition
(SEMANTICS section 8) against the brute-force oracle: the same trends and
bindings per (window, group), all of them and the complete ones, whatever
the cache settings. Queries come from the engine's strategy generator
(tests/engine/test_strategies.py) with `RETURN TRENDS`."""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

from cet_support import SETTINGS, describe, extract, keyed, totals
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from greta_stream.query import parse
from greta_stream.testing.oracle import complete_trends, enumerate_trends

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
import test_strategies as generators  # noqa: E402  (tests/engine: the strategy query generator)

CACHES = [dict(cache_units=0), dict(graphlet_units=3), {}]


def check(text: str, events: list[dict], trends: str) -> None:
    oracle = complete_trends if trends == "complete" else enumerate_trends
    expected = oracle(parse(text), events)
    runs = [extract(text, events, trends=trends, **c) for c in CACHES]
    got = keyed(text, runs[0])
    msg = describe(text, events, expected, got)
    assert set(got) == set(expected), msg
    for key, want in expected.items():
        assert Counter(got[key]) == Counter(want), msg
    for key, (total, truncated) in totals(text, runs[0]).items():
        assert total == len(expected[key]) and not truncated, msg
    for other in runs[1:]:
        assert other == runs[0], msg


def as_trends(text: str) -> str:
    return re.sub(r"^RETURN .*? PATTERN ", "RETURN TRENDS PATTERN ", text)


@settings(max_examples=150, **SETTINGS)
@given(generators.queries(), generators._events(8), st.sampled_from(["all", "complete"]))
def test_trends_under_strategies_and_repetitions_equal_the_oracle(text: str, events: list[dict], trends: str) -> None:
    text = as_trends(text)
    assume(generators.compiles(text))
    check(text, events, trends)


def test_the_sections_example_lists_the_six_trends() -> None:
    for strategy in ("skip-till-next-match", "contiguous"):
        records = extract(f"RETURN TRENDS PATTERN A+ SEMANTICS {strategy} WITHIN 10 s", generators.A3, trends="all")
        assert sorted(r["trend"] for r in records) == [["a1"], ["a1", "a2"], ["a1", "a2", "a3"], ["a2"], ["a2", "a3"],
                                                       ["a3"]]
