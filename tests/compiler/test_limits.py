"""Queries that would cost without bound are refused with a position:
nesting beyond MAX_NESTING, windows beyond the caps of `Limits`."""

from __future__ import annotations

import pytest

from greta_stream import Limits, RunSpec, compile_query, evaluate
from greta_stream.errors import QueryError
from greta_stream.query.parser import MAX_NESTING

DEEP = {
    "nested SEQ": "RETURN COUNT(*) PATTERN " + "SEQ(A, " * 500 + "B" + ")" * 500 + " WITHIN 10 s",
    "500 pluses": "RETURN COUNT(*) PATTERN A" + "+" * 500 + " WITHIN 10 s",
    "20,000 ANDs": "RETURN COUNT(*) PATTERN A+ WHERE " + " AND ".join(["A.x > 1"] * 20_000) + " WITHIN 10 s",
    "5,000 terms": "RETURN COUNT(*) PATTERN A+ WHERE A.x > " + " + ".join(["1"] * 5000) + " WITHIN 10 s",
    "5,000 signs": "RETURN COUNT(*) PATTERN A+ WHERE A.x > " + "- " * 5000 + "1 WITHIN 10 s",
    "nested NOT": "RETURN COUNT(*) PATTERN A+ WHERE " + "NOT " * 5000 + "A.x > 1 WITHIN 10 s",
}


@pytest.mark.parametrize("text", DEEP.values(), ids=DEEP.keys())
def test_deep_nesting_is_a_query_error_with_a_position(text: str) -> None:
    for run in (compile_query, lambda t: evaluate(t, [{"type": "A", "time": 1, "x": 2}])):
        with pytest.raises(QueryError) as exc:
            run(text)
        p = exc.value.first
        assert f"more than {MAX_NESTING} levels" in p.msg
        assert p.line == 1 and 25 <= p.column < len(text)


def test_nesting_within_the_limit_compiles() -> None:
    conds = " AND ".join(f"A.x > {i}" for i in range(MAX_NESTING // 2))
    assert compile_query(f"RETURN COUNT(*) PATTERN SEQ(A+, (SEQ(B, C+))+) WHERE {conds} WITHIN 10 s")
    assert compile_query("RETURN COUNT(*) PATTERN A+ WHERE " + "(" * 2000 + "A.x > 1" + ")" * 2000 + " WITHIN 1 s")


@pytest.mark.parametrize(("window", "setting", "number"), [
    ("WITHIN 1 day SLIDE 1 ms", "max_windows_per_event = 1,000", "86,400,000 windows"),
    ("WITHIN 30000 days SLIDE 1 s", "max_windows_per_event = 1,000", "2,592,000,000 windows"),
    ("WITHIN 1 day SLIDE 86399 s", "max_panes_per_window = 10,000", "86,400 panes"),
])
def test_window_caps_are_refused_at_compile_time(window: str, setting: str, number: str) -> None:
    text = f"RETURN COUNT(*)\nPATTERN A+\n{window}"
    for run in (compile_query, RunSpec.create, lambda t: evaluate(t, [{"type": "A", "time": 1}] * 3)):
        with pytest.raises(QueryError) as exc:
            run(text)
        p = exc.value.first
        assert setting in p.msg and number in p.msg
        assert (p.line, p.column) == (3, window.index("SLIDE") + 7)


def test_window_caps_are_settings() -> None:
    text = "RETURN COUNT(*) PATTERN A+ WITHIN 10 s SLIDE 1 s"
    assert RunSpec.create(text).query.window.windows_per_event == 10
    with pytest.raises(QueryError, match="max_windows_per_event = 9"):
        RunSpec.create(text, limits=Limits(max_windows_per_event=9))
    with pytest.raises(QueryError, match="max_panes_per_window = 2"):
        compile_query("RETURN COUNT(*) PATTERN A+ WITHIN 3 s SLIDE 2 s", limits=Limits(max_panes_per_window=2))
    assert compile_query("RETURN COUNT(*) PATTERN A+ WITHIN 1 day SLIDE 1 ms", limits=None)
    with pytest.raises(ValueError, match="max_panes_per_window"):
        Limits(max_panes_per_window=0)


@pytest.mark.parametrize("window", ["WITHIN 10000000000000 seconds", "WITHIN 400000 days SLIDE 1 day",
                                    "WITHIN 366000 d"])
def test_windows_longer_than_1000_years_are_refused_on_every_path(window: str) -> None:
    """Window bounds must be times a timestamp stream can show: the longest window is 1,000 years,
    whatever the run's limits (the streaming engine overflowed on a timestamp window of 10^12 s)."""
    text = f"RETURN COUNT(*)\nPATTERN A+\n{window}"
    clause = "WITHIN"
    for run in (compile_query, lambda t: compile_query(t, limits=None), RunSpec.create,
                lambda t: evaluate(t, [{"type": "A", "time": "2024-01-01T00:00:00Z"}])):
        with pytest.raises(QueryError) as exc:
            run(text)
        p = exc.value.first
        assert f"{clause} " in p.msg and "longer than 1,000 years" in p.msg
        assert (p.line, p.column) == (3, window.index(clause) + len(clause) + 2)
    ok = evaluate("RETURN COUNT(*) PATTERN A+ WITHIN 365000 days", [{"type": "A", "time": "2024-01-01T00:00:00Z"}])
    assert [r["count"] for r in ok] == [1]
