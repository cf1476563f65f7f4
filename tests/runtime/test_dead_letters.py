"""Dead letters have one schema (`DeadLetter.FIELDS`), written by `to_dict` and read back by
`from_dict` on every path; the tally reads which attribute is missing from the letter's fields,
never from its detail text."""

from __future__ import annotations

import json

import pytest

import greta_stream
from greta_stream.compiler.compiled import compile_query
from greta_stream.engine import DeadLetter
from greta_stream.runtime.dead_letters import name_problems, tally


def test_an_output_record_reads_back_as_the_letter_it_was() -> None:
    letter = DeadLetter("missing_attribute", {"type": "Stock", "time": 1}, "Stock events need attribute 'prize'",
                        "Stock", "prize")
    record = json.loads(json.dumps(letter.to_dict()))
    assert DeadLetter.from_dict(record) == letter
    assert list(record) == [name for name, _ in DeadLetter.FIELDS]
    plain = DeadLetter("malformed", "not json", "not JSON")
    assert plain.to_dict() == {"reason": "malformed", "detail": "not JSON", "event": "not json"}  # as before
    assert DeadLetter.from_dict(plain.to_dict()) == plain
    # the output's schema (Spark SQL DDL) has a column for each field a letter writes, in its order; a row of
    # those columns (a table's: null where a letter has no such field) reads back as the letter
    columns = [column.split() for column in DeadLetter.ddl().split(", ")]
    assert [name for name, _ in columns] == list(letter.to_dict())
    for each in (letter, plain):
        row = {name: each.to_dict().get(name) for name, _ in columns}
        assert DeadLetter.from_dict(row) == each


def test_the_missing_attribute_comes_from_the_letter_not_its_wording() -> None:
    worded_otherwise = DeadLetter("missing_attribute", {"type": "Stock", "price": 3}, "no prize here", "Stock", "prize")
    query = compile_query("RETURN COUNT(*), SUM(S.prize) PATTERN Stock S+ WITHIN 10 s")
    assert name_problems(query, {"Stock": 3}, {}, tally([worded_otherwise] * 3).carried) == [
        "attribute 'prize' of S is on no Stock event (they have price, type); did you mean 'price'?"]


def test_a_validator_names_the_type_and_attribute_of_what_it_refuses(recwarn: pytest.WarningsRecorder) -> None:
    """One event lacks 'prize', the other holds a string there: refused both, but 'prize' is no misspelling."""
    rows = greta_stream.evaluate("RETURN COUNT(*), SUM(S.prize) PATTERN Stock S+ WITHIN 10 s",
                                 [{"type": "Stock", "time": 1, "price": 3}, {"type": "Stock", "time": 2, "prize": "x"}])
    assert rows.problems == [] and not recwarn.list
    assert [(d.reason, d.event_type, d.attribute) for d in rows.dead_letters] == [
        ("missing_attribute", "Stock", "prize"), ("wrong_type", "Stock", "prize")]


def test_a_null_and_an_absent_attribute_are_told_apart_and_the_summary_counts_each_wording() -> None:
    """Real records: a null price, no company at all. The summary of the two letters names both, each with
    its count, not the first letter's wording for both."""
    events = [{"type": "Stock", "time": 1, "company": "A", "price": None},
              {"type": "Stock", "time": 2, "price": 3.5},
              {"type": "Stock", "time": 3, "company": "A", "price": None},
              {"type": "Stock", "time": 4, "company": "A", "price": 39}]
    rows = greta_stream.evaluate("RETURN company, COUNT(*) PATTERN Stock S+ WHERE [company] AND "
                                 "S.price > NEXT(S).price GROUP-BY company WITHIN 10 s", events)
    details = [d.detail for d in rows.dead_letters]
    assert details == ["attribute 'price' is null (the query needs it on Stock events)",
                       "attribute 'company' is missing (the query needs it on Stock events)",
                       "attribute 'price' is null (the query needs it on Stock events)"]
    assert tally(rows.dead_letters).summary() == (
        "3 dead letters: 3 missing_attribute (2: attribute 'price' is null (the query needs it on Stock events); "
        "1: attribute 'company' is missing (the query needs it on Stock events))")
    # one wording: as it says; one wording per letter (times behind a watermark): the first, not a list of them
    assert tally(rows.dead_letters[:1]).summary() == (
        "1 dead letter: 1 missing_attribute (attribute 'price' is null (the query needs it on Stock events))")
    late = [DeadLetter("late", {"time": t}, f"time {t} is behind the watermark 900") for t in range(40)]
    assert tally(late).summary() == "40 dead letters: 40 late (time 0 is behind the watermark 900)"
    few = tally(late[:5])
    assert few.summary() == ("5 dead letters: 5 late (1: time 0 is behind the watermark 900; 1: time 1 is behind "
                             "the watermark 900; 1: time 2 is behind the watermark 900; 2 other)")
    assert tally(rows.dead_letters).merge(few).summary().startswith("8 dead letters: 5 late (1: time 0")
