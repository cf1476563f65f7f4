"""CET properties: the cap, and streaming equals batch.

Streaming feeds micro-batches in shuffled order, advances the watermark
between them and snapshots + restores the extractor after each; the records
(and their order) must equal one batch run. The cap keeps the first
`max_trends` trends of the uncapped order, with the exact total.
"""

from __future__ import annotations

from cet_support import SETTINGS, cases, describe, extract, stream
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=80, **SETTINGS)
@given(cases(), st.sampled_from(["all", "complete"]), st.integers(0, 2**16), st.sampled_from([None, 1, 2, 5]))
def test_streaming_equals_batch(case: tuple[str, list[dict]], trends: str, seed: int, cap: int | None) -> None:
    text, events = case
    batch = extract(text, events, trends=trends, max_trends=cap)
    got = stream(text, events, seed, trends=trends, max_trends=cap)
    assert got == batch, describe(text, events, batch, got)


@settings(max_examples=80, **SETTINGS)
@given(cases(windows=("tumbling", "slide_4_2", "slide_5_1")), st.sampled_from(["all", "complete"]),
       st.integers(1, 4))
def test_cap_keeps_the_first_trends_and_the_exact_total(case: tuple[str, list[dict]], trends: str, cap: int) -> None:
    text, events = case
    full = extract(text, events, trends=trends)
    capped = extract(text, events, trends=trends, max_trends=cap)
    msg = describe(text, events, full, capped)
    by_key: dict[tuple, list[dict]] = {}
    for r in full:
        by_key.setdefault((r["window_start"], _group(r)), []).append(r)
    expected = []
    for rows in by_key.values():
        total = len(rows)
        for r in rows[:cap]:
            expected.append(dict(r, total=total, truncated=total > cap))
    assert capped == expected, msg


def _group(r: dict) -> tuple:
    skip = {"window_start", "window_end", "trend", "total", "truncated", "aliases", "events"}
    return tuple(sorted((k, v) for k, v in r.items() if k not in skip))
