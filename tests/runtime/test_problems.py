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
    with pytest.warns(UserWarning, match="they have no attribute 'prize'"):
        rows = greta_stream.evaluate("RETURN COUNT(*), AVG(S.prize) PATTERN Stock S+ WITHIN 10 seconds", EVENTS,
                                     engine=engine)
    assert len(rows.dead_letters) == 2000 and "'prize' misspelled" in rows.problems[0]


def test_a_good_run_warns_nothing(recwarn: pytest.WarningsRecorder) -> None:
    rows = greta_stream.evaluate("RETURN COUNT(*) PATTERN Stock S+ WITHIN 10 seconds", EVENTS)
    assert rows and rows.problems == []
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]
