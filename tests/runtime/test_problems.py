"""A run that processed no event says why, in Python too: `.problems` and a `UserWarning` name a type
no event has (with the types the events have and the closest one) or an attribute every event lacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import greta_stream

EVENTS = [json.loads(line) for line in Path("samples/stock/events.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("engine", ["auto", "general"])
def test_a_misspelled_type_warns_with_the_types_the_events_have(engine: str) -> None:
    with pytest.warns(UserWarning, match=r"no event is of a type of the query \(Stok\); the events' types are "
                                         r"Stock \(2,000\); did you mean 'Stock' for 'Stok'\?"):
        rows = greta_stream.evaluate("RETURN COUNT(*) PATTERN Stok S+ WITHIN 10 seconds", EVENTS, engine=engine)
    assert list(rows) == [] and len(rows.problems) == 1
    assert rows.other_types == {"Stock": 2000}


def test_a_type_far_from_every_event_type_has_no_guess() -> None:
    with pytest.warns(UserWarning) as caught:
        rows = greta_stream.evaluate("RETURN COUNT(*) PATTERN Quake Q+ WITHIN 10 seconds", EVENTS[:10])
    assert rows.problems == ["no event is of a type of the query (Quake); the events' types are Stock (10)"]
    assert len(caught) == 1


@pytest.mark.parametrize("engine", ["auto", "general"])
def test_a_misspelled_attribute_warns_naming_it(engine: str) -> None:
    with pytest.warns(UserWarning, match="attribute 'prize' of S is on no Stock event"):
        rows = greta_stream.evaluate("RETURN COUNT(*), AVG(S.prize) PATTERN Stock S+ WITHIN 10 seconds", EVENTS,
                                     engine=engine)
    assert len(rows.dead_letters) == 2000 and "did you mean 'price'?" in rows.problems[0]


def test_a_good_run_warns_nothing(recwarn: pytest.WarningsRecorder) -> None:
    rows = greta_stream.evaluate("RETURN COUNT(*) PATTERN Stock S+ WITHIN 10 seconds", EVENTS)
    assert rows and rows.problems == []
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]


CLUSTER = [json.loads(line) for line in Path("samples/cluster/events.jsonl").read_text().splitlines()]
PART = "WHERE [mapper, job] {extra}GROUP-BY mapper WITHIN 1 minute"


@pytest.mark.parametrize("engine", ["auto", "general"])
@pytest.mark.parametrize(("pattern", "extra", "says"), [
    ("SEQ(Start S, NOT end X, Measurement M+)", "",
     ["type 'end' of X (under NOT) matches no event; did you mean 'End'? (events of other types: End (194))"]),
    ("SEQ(Start S, NOT End X, Measurement M+)", "AND X.memry > 0 ",
     ["attribute 'memry' of X (under NOT) is on no End event (they have cpu, id, job, load, mapper, memory, time, "
      "type); did you mean 'memory'?"]),
    ("SEQ(start S, Measurement M+, END E)", "",
     ["type 'start' of S matches no event; did you mean 'Start'? (events of other types: Start (204), End (194))",
      "type 'END' of E matches no event; did you mean 'End'? (events of other types: Start (204), End (194))"]),
    ("SEQ(Start S, NOT SEQ(end X, End Y), Measurement M+)", "",
     ["type 'end' of X (under NOT) matches no event; did you mean 'End'? (194 events of End, the type of Y "
      "(under NOT))"]),
], ids=["negated-type", "negated-attribute", "two-types-of-a-seq", "a-type-of-another-part"])
def test_a_mistake_in_one_part_of_the_query_is_named(engine: str, pattern: str, extra: str, says: list[str]) -> None:
    """Part by part, not only for the query as a whole: a type under a NOT, an attribute of a negated
    alias, one type of a SEQ whose other types match, a type that another part of the query has."""
    query = f"RETURN mapper, COUNT(*) PATTERN {pattern} {PART.format(extra=extra)}"
    with pytest.warns(UserWarning) as caught:
        rows = greta_stream.evaluate(query, CLUSTER, engine=engine)
    assert rows.problems == says
    assert [str(w.message) for w in caught if issubclass(w.category, UserWarning)] == says


@pytest.mark.parametrize("engine", ["auto", "general"])
def test_an_aggregated_attribute_no_event_of_its_type_has_is_named(engine: str) -> None:
    query = ("RETURN mapper, COUNT(*), MAX(S.cppu) PATTERN SEQ(Start S, Measurement M+, End E) "
             + PART.format(extra=""))
    with pytest.warns(UserWarning, match="attribute 'cppu' of S is on no Start event"):
        rows = greta_stream.evaluate(query, CLUSTER, engine=engine)
    assert rows.problems == ["attribute 'cppu' of S is on no Start event (they have cpu, id, job, load, mapper, "
                             "memory, time, type); did you mean 'cpu'?"]


@pytest.mark.parametrize("engine", ["auto", "general"])
def test_a_null_is_no_misspelling(engine: str, recwarn: pytest.WarningsRecorder) -> None:
    """Real records hold nulls: the events holding one are dead-lettered, the rest count, and no
    problem is named, even when every event of the type holds a null in one place or another."""
    events = [{**e, "price": None} if i % 7 == 0 else e for i, e in enumerate(EVENTS)]
    query = "RETURN COUNT(*), MAX(S.price) PATTERN Stock S+ WHERE S.price > NEXT(S).price WITHIN 10 seconds"
    rows = greta_stream.evaluate(query, events, engine=engine)
    assert rows and rows.problems == [] and len(rows.dead_letters) == 286
    everyone = [{"type": "Stock", "time": i, "price": None if i % 2 else 3, "volume": None if i % 2 == 0 else 4}
                for i in range(10)]
    rows = greta_stream.evaluate("RETURN COUNT(*), MAX(S.price), SUM(S.volume) PATTERN Stock S+ WITHIN 10 seconds",
                                 everyone, engine=engine)
    assert list(rows) == [] and rows.problems == [] and len(rows.dead_letters) == 10
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]


def test_a_negated_type_that_never_came_is_quiet_when_no_name_is_close(recwarn: pytest.WarningsRecorder) -> None:
    """`NOT Failure F` over a stream without failures is a query, not a mistake."""
    query = "RETURN COUNT(*) PATTERN SEQ(Start S, NOT Failure F, Measurement M+) WHERE [mapper, job] WITHIN 1 minute"
    rows = greta_stream.evaluate(query, CLUSTER)
    assert rows and rows.problems == []
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]
