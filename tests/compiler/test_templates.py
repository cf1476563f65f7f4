"""Compiler: the shape of GRETA templates as sets of transitions (Alg. 1 and 3)."""

from __future__ import annotations

import pytest

from greta_stream import QueryError, compile_query


def shape(text: str) -> list[tuple]:
    cq = compile_query(text)
    return [
        (t.id, t.negative, set(t.start), set(t.end), {(tr.src, tr.dst, tr.negation) for tr in t.transitions},
         t.leading, t.trailing)
        for t in cq.templates
    ]


def test_seq_of_kleene_under_kleene() -> None:
    assert shape("RETURN COUNT(*) PATTERN (SEQ(A+, B))+ WITHIN 1 s") == [
        (0, False, {"A"}, {"B"}, {("A", "A", None), ("A", "B", None), ("B", "A", None)}, None, None)
    ]


def test_negation_split_into_templates() -> None:
    t0, t1, t2 = shape("RETURN COUNT(*) PATTERN (SEQ(A+, NOT SEQ(C, NOT E, D), B))+ WITHIN 1 s")
    assert t0 == (0, False, {"A"}, {"B"}, {("A", "A", None), ("A", "B", 1), ("B", "A", None)}, None, None)
    assert t1 == (1, True, {"C"}, {"D"}, {("C", "D", 2)}, None, None)
    assert t2 == (2, True, {"E"}, {"E"}, set(), None, None)


def test_leading_and_trailing_negation() -> None:
    t0, t1, t2 = shape("RETURN COUNT(*) PATTERN SEQ(NOT E, A+, B, NOT F) WITHIN 1 s")
    assert t0 == (0, False, {"A"}, {"B"}, {("A", "A", None), ("A", "B", None)}, 1, 2)
    assert t1[1:4] == (True, {"E"}, {"E"}) and t2[1:4] == (True, {"F"}, {"F"})


def test_kleene_of_kleene_has_one_self_loop() -> None:
    assert shape("RETURN COUNT(*) PATTERN (A+)+ WITHIN 1 s")[0][4] == {("A", "A", None)}


def test_partitions_and_sub_partitions() -> None:
    cq = compile_query(
        "RETURN segment, COUNT(*) PATTERN SEQ(NOT Accident A, Position P+) WHERE [P.vehicle, segment] "
        "GROUP-BY segment WITHIN 5 min SLIDE 1 min"
    )
    assert cq.common == ("segment",)
    assert [(c.attr, set(c.aliases)) for c in cq.run_components] == [("vehicle", {"P"})]
    assert cq.window.pane == 60 and cq.window.windows_per_event == 5


def test_explain_names_everything() -> None:
    text = compile_query(
        "RETURN sector, COUNT(*), AVG(S.price) PATTERN Stock S+ WHERE [company, sector] AND S.price > NEXT(S).price "
        "GROUP-BY sector WITHIN 10 minutes SLIDE 10 seconds"
    ).explain()
    for fragment in ["template T0 (positive)", "state S: Stock START END", "transition S -> S (kleene) if (S.price > NEXT(S).price)",
                     "partition by: sector, company", "panes of 10 s", "60 window(s) per event"]:
        assert fragment in text


@pytest.mark.parametrize(("text", "what", "column"), [
    ("RETURN COUNT(*) PATTERN " + "SEQ(" * 500 + "A a" + ")" * 500 + " WITHIN 10 s", "500 nested parentheses", 2024),
    ("RETURN COUNT(*) PATTERN A a" + "+" * 500 + " WITHIN 10 s", "500 repeated Kleene operators", 28),
    ("RETURN COUNT(*) PATTERN A a+ WHERE " + " AND ".join(["a.x > 1"] * 20000) + " WITHIN 10 s",
     "19999 conditions", 1),
])
@pytest.mark.usefixtures("subprocesses")
def test_a_query_nested_too_deeply_is_a_query_error_with_its_position(text: str, what: str, column: int) -> None:
    """`what` and `column`: where the deepest point is (the parser reports the first level past its bound)."""
    import subprocess
    import sys

    with pytest.raises(QueryError) as exc:
        compile_query(text)
    problem = exc.value.first
    assert "deep" in problem.msg and problem.line == 1 and 1 <= problem.column <= len(text)
    cli = subprocess.run([sys.executable, "-m", "greta_stream", "explain", "-q", "-"], input=text, capture_output=True,
                         text=True, timeout=120)
    assert cli.returncode == 2 and "too deeply" in cli.stderr and "Traceback" not in cli.stderr
