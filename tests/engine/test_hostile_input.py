"""Hostile events: every record is accounted for (processed + dead letters +
ignored = input) on both engines, batch and streaming, and none raises."""

from __future__ import annotations

from typing import Any

import pytest

from greta_stream import evaluate, open_stream
from greta_stream.runtime import RunSpec

Q = "RETURN COUNT(*), SUM(S.price) PATTERN Stock S+ WHERE S.price > NEXT(S).price WITHIN 10 seconds"

# (time, reason): each cannot be placed exactly, so each is a dead letter
POISON: list[tuple[Any, str]] = [
    (10**400, "bad_time"), (-(10**400), "bad_time"), (10**30, "bad_time"), (2**50, "bad_time"),
    (1e300, "bad_time"), (1e18, "bad_time"), (float("nan"), "bad_time"), (float("inf"), "bad_time"),
    (float("-inf"), "bad_time"), ("1" + "0" * 5000, "bad_time"), ("nan", "bad_time"), ("1e400", "bad_time"),
    ("-inf", "bad_time"), ("10000-01-01T00:00:00Z", "bad_time"),
]


def base(n: int) -> list[dict[str, Any]]:
    return [{"type": "Stock", "time": i * 0.5, "price": (i * 7) % 13} for i in range(n)]


def accounted(rows: Any, n: int) -> None:
    m = rows.metrics
    assert m["events_in"] == n
    assert m["events_processed"] + m.get("events_dead_lettered", 0) + m.get("events_other_type", 0) == n
    assert len(rows.dead_letters) == m.get("events_dead_lettered", 0)


@pytest.mark.parametrize("engine", ["general", "columnar"])
@pytest.mark.parametrize(("time", "reason"), POISON, ids=[repr(t)[:20] for t, _ in POISON])
def test_each_poison_time_is_a_dead_letter_on_both_engines(engine: str, time: Any, reason: str) -> None:
    events = base(3000)
    events.insert(1500, {"type": "Stock", "time": time, "price": 1})
    rows = evaluate(Q, events, engine=engine)
    assert rows.engine == engine
    assert [d.reason for d in rows.dead_letters] == [reason]
    assert "out of range" in rows.dead_letters[0].detail or "finite" in rows.dead_letters[0].detail \
        or "neither" in rows.dead_letters[0].detail
    accounted(rows, 3001)
    assert list(rows) == list(evaluate(Q, base(3000), engine=engine))


def test_all_poison_at_once_equals_the_valid_events() -> None:
    events = base(2500)
    for i, (t, _) in enumerate(POISON):
        events.insert(100 * i, {"type": "Stock", "time": t, "price": 1})
    events += ["not an object", {"type": "Stock"}, {"time": 3}, {"type": "Other", "time": 10**9}]
    n = len(events)
    general, columnar = evaluate(Q, events, engine="general"), evaluate(Q, events, engine="columnar")
    for rows in (general, columnar):
        accounted(rows, n)
        assert list(rows) == list(evaluate(Q, base(2500), engine="general"))
    assert [(d.reason, d.detail) for d in general.dead_letters] == [(d.reason, d.detail) for d in columnar.dead_letters]


@pytest.mark.parametrize("engine", ["general", "auto"])
def test_far_future_events_are_dead_lettered_and_do_not_move_the_watermark(engine: str) -> None:
    """Once there is a watermark, an event more than max_future_s ahead of the
    newest time the stream took is a `future` dead letter; it holds no window
    back and later events in range are processed as if it never came: the rows
    equal evaluate's over them."""
    dead: list[Any] = []
    events = base(3000)
    stream = open_stream(Q, engine=engine, dead_letter=dead.append)
    stream.add_many(events[:1000])
    rows = stream.advance(400)
    newest = max(e["time"] for e in events[:1000])
    stream.add_many([{"type": "Stock", "time": newest + 30 * 86_400 + 1, "price": 1},   # beyond the default bound
                     {"type": "Stock", "time": 10**12, "price": 1}])
    stream.add_many(events[1000:2000])
    rows += stream.advance(1000)
    stream.add_many(events[2000:])
    rows += stream.finish()
    assert [d.reason for d in dead] == ["future", "future"]
    assert "max_future_s" in dead[0].detail
    assert rows == list(evaluate(Q, events, engine="general"))
    assert stream.metrics["events_dead_lettered"] == 2


def test_max_future_s_is_a_setting() -> None:
    spec = RunSpec.create(Q, max_future_s=5)
    dead: list[Any] = []
    stream = spec.build(dead_letter=dead.append)
    stream.add_many([{"type": "Stock", "time": 1, "price": 2}])
    stream.advance(2)
    stream.add_many([{"type": "Stock", "time": 7, "price": 1}, {"type": "Stock", "time": 13, "price": 1}])
    assert [d.reason for d in dead] == ["future"]  # 7 - 2 = 5 is within the bound, 13 - 7 = 6 is not
    assert "time 13 is more than 5 s ahead of the newest time the stream reached, 7" in dead[0].detail
    stream.add_many([{"type": "Stock", "time": 16, "price": 1}, {"type": "Stock", "time": 12, "price": 1}])
    assert len(dead) == 1  # the batch's own times reach 16 in steps of 5: 7 -> 12 -> 16
    assert RunSpec.create(Q, max_future_s=None).build().front.future_bound == float("inf")
    with pytest.raises(ValueError, match="max_future_s"):
        RunSpec.create(Q, max_future_s=0)
