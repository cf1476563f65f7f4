"""CET mode under the selection strategies and with bounded repetition
(SEMANTICS section 8) against the brute-force oracle: the same trends and
bindings per (window, group), all of them and the complete ones, whatever
the cache settings. Queries come from the engine's strategy generator
(tests/engine/test_strategies.py) with `RETURN TRENDS`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from cet_support import SETTINGS, extract
from hypothesis import assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
import test_strategies as generators  # noqa: E402  (tests/engine: the strategy query generator)
from test_cet_differential import check  # noqa: E402  (the oracle comparison, three cache settings)


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
