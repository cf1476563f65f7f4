"""CET mode against the brute-force oracle on small random queries and streams.

The oracle (`greta_stream.testing.oracle`) enumerates trends straight from
docs/QUERY_LANGUAGE.md; the extractor must report exactly the same trends per
(window, group) with the same bindings: `enumerate_trends` for `all`,
`complete_trends` for `complete`. The generators cover every operator,
predicates, GROUP-BY, negation of every kind, sliding and fractional windows
(tests/engine/test_differential.py). Each case also runs with three cache
settings (no cache: plain depth-first search; tiny graphlets: many cut edges
per pane; the default), which must not change a single record.
"""

from __future__ import annotations

from collections import Counter

from cet_support import SETTINGS, cases, describe, extract, keyed, totals
from hypothesis import given, settings
from hypothesis import strategies as st

from greta_stream import evaluate
from greta_stream.query import parse
from greta_stream.testing.oracle import complete_trends, enumerate_trends

CACHES = [dict(cache_units=0), dict(graphlet_units=3), {}]


def check(text: str, events: list[dict], trends: str) -> None:
    oracle = complete_trends if trends == "complete" else enumerate_trends
    expected = oracle(parse(text), events)
    runs = [extract(text, events, trends=trends, **c) for c in CACHES]
    got = keyed(text, runs[0])
    msg = describe(text, events, expected, got)
    assert set(got) == set(expected), msg  # keys may mix types (bad events): compare as sets
    for key, want in expected.items():
        assert Counter(got[key]) == Counter(want), msg
    for key, (total, truncated) in totals(text, runs[0]).items():
        assert total == len(expected[key]) and not truncated, msg
    for other in runs[1:]:
        assert other == runs[0], msg  # same records, same order, whatever the cache


@settings(max_examples=120, **SETTINGS)
@given(cases(windows=("tumbling", "slide_4_2", "slide_5_1")))
def test_all_trends_equal_oracle(case: tuple[str, list[dict]]) -> None:
    check(*case, "all")


@settings(max_examples=120, **SETTINGS)
@given(cases(windows=("tumbling", "slide_4_2", "slide_5_1")))
def test_complete_trends_equal_oracle(case: tuple[str, list[dict]]) -> None:
    check(*case, "complete")


@settings(max_examples=100, **SETTINGS)
@given(cases(pattern_filter=lambda p: bool(p.negative)), st.sampled_from(["all", "complete"]))
def test_negation_every_window(case: tuple[str, list[dict]], trends: str) -> None:
    """Patterns with NOT (middle, leading, trailing, nested) over every window shape."""
    check(*case, trends)


@settings(max_examples=60, **SETTINGS)
@given(cases(dirty=True), st.sampled_from(["all", "complete"]))
def test_bad_events(case: tuple[str, list[dict]], trends: str) -> None:
    check(*case, trends)


@settings(max_examples=80, **SETTINGS)
@given(cases(windows=("tumbling", "slide_4_2", "slide_6_4", "frac_ms")))
def test_number_of_all_trends_is_count(case: tuple[str, list[dict]]) -> None:
    """|all trends| of a (window, group) = COUNT(*) of aggregation mode."""
    text, events = case
    records = extract(text, events, trends="all")
    counted = Counter((r["window_start"], r["window_end"], tuple(r[c] for c in _groups(text))) for r in records)
    count_text = "RETURN COUNT(*) AS n, " + text.split("\n", 1)[0][len("RETURN "):] + "\n" + text.split("\n", 1)[1]
    rows = evaluate(count_text, events)
    by_key = {(r["window_start"], r["window_end"], tuple(r[c] for c in _groups(text))): r["n"] for r in rows}
    assert dict(counted) == by_key, describe(text, events, by_key, dict(counted))


def _groups(text: str) -> tuple[str, ...]:
    from greta_stream import compile_query

    return tuple(compile_query(text).group_columns)
