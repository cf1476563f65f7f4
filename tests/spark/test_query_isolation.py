"""A query's rows never depend on the queries that share its stream.

The operator's shards are driven without Spark (`OperatorSim`: routing by
the stream's layout, state per shard key, Spark's watermark, timeouts) over
random streams and random changes of the query set between micro-batches:
queries join (with other GROUP-BY attributes, lateness and engines), stop
(the last running one too: the stream then holds it, `QuerySet.holding`)
and start again (keeping their state), are deleted, and are patched (a new
lateness keeps the state, a new text starts afresh). Each query's rows and
late events are then what the contract gives for it alone: `evaluate` over
the events it saw that were not behind its own watermark (the stream's
latest event time of earlier batches less its own lateness, never going
back, nor behind the windows its shard's clock closed: `Life.take`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greta_stream import QuerySet, RunSpec, evaluate
from greta_stream.engine import FieldNames
from greta_stream.runtime.units import SoloUnit
from greta_stream.spark.layout import StreamLayout, open_layout
from greta_stream.testing.shards import OperatorSim

pytestmark = pytest.mark.spark

TEXTS = [
    # Q1 variants: GROUP-BY sector, company or nothing; two windows; two aggregate lists
    "RETURN sector, COUNT(*), AVG(S.price) PATTERN Stock S+ WHERE [company, sector] AND S.price > NEXT(S).price "
    "GROUP-BY sector WITHIN 20 s SLIDE 10 s",
    "RETURN COUNT(*) PATTERN Stock S+ WHERE [company, sector] AND S.price > NEXT(S).price WITHIN 20 s SLIDE 10 s",
    "RETURN company, COUNT(*), MAX(S.price) PATTERN Stock S+ WHERE [company, sector] AND S.price < NEXT(S).price "
    "GROUP-BY company WITHIN 30 s SLIDE 10 s",
    "RETURN sector, SUM(S.price) PATTERN Stock S+ WHERE [company, sector] AND S.price > NEXT(S).price "
    "GROUP-BY sector WITHIN 40 s SLIDE 20 s",
    # a middle NOT and a second type
    "RETURN sector, COUNT(*) PATTERN SEQ(Stock S+, NOT Halt H, Stock T) WHERE [sector] GROUP-BY sector "
    "WITHIN 20 s SLIDE 10 s",
    # patterns around one Kleene part `Stock S+` (a union: one traversal, a lane per query)
    "RETURN sector, COUNT(*), SUM(S.price) PATTERN SEQ(Halt H, Stock S+) WHERE [sector] AND "
    "S.price > NEXT(S).price GROUP-BY sector WITHIN 20 s SLIDE 10 s",
    "RETURN sector, COUNT(*) PATTERN Stock S+ WHERE [sector] AND S.price > NEXT(S).price AND S.price > 99 "
    "GROUP-BY sector WITHIN 30 s SLIDE 10 s",
    "RETURN sector, MAX(S.price) PATTERN SEQ(Stock S+, Halt H) WHERE [sector] AND S.price > NEXT(S).price "
    "GROUP-BY sector WITHIN 20 s SLIDE 10 s",
]
LATENESS = [0, 5, 30]


def stream(seed: int, n: int = 240) -> list[dict]:
    rnd = random.Random(seed)
    events: list[dict] = []
    for i in range(n):
        c = rnd.randrange(4)
        events.append({"type": "Stock", "time": i // 2 + rnd.choice([0, 0.5]), "company": c, "sector": c % 2,
                       "price": rnd.choice([98.0, 99.5, 100.0, 101.25, 102.0]), "id": i})
    events += [{"type": "Halt", "time": rnd.randrange(n // 2), "sector": rnd.randrange(2), "id": f"h{k}"}
               for k in range(4)]
    events.append({"type": "Stock", "time": 7, "company": 1, "id": "bad"})  # no sector: dead for every query
    return events


def batches_of(events: list[dict], n_batches: int, seed: int, disorder: float) -> list[list[dict]]:
    """Batches in time order, each shuffled; with `disorder`, some events come up to two batches late."""
    rnd = random.Random(seed)
    ordered = sorted(events, key=lambda e: e["time"])
    cuts = sorted(rnd.sample(range(1, len(ordered)), n_batches - 1))
    out = [ordered[a:b] for a, b in zip([0, *cuts], [*cuts, len(ordered)])]
    for i in range(len(out) - 1):
        for e in list(out[i]):
            if rnd.random() < disorder:
                out[i].remove(e)
                out[min(len(out) - 1, i + rnd.choice([1, 2]))].append(e)
    for b in out:
        rnd.shuffle(b)
    return out


@dataclass
class Life:
    """One registration of a query (a new text starts a new one): what it saw and what was late for it."""

    text: str
    engine: str
    seen: list[dict] = field(default_factory=list)
    late: list[dict] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    closed_by: float = float("-inf")  # its watermark when it last ran: the windows that closed (inf: all)
    # the latest event time through its last batch less its lateness: a shard closes windows by its own clock
    # (its events of the batch included), so a query that left may have reported windows up to this
    reach: float = float("-inf")

    def check(self, want: list[dict]) -> None:
        """Its rows: each window once, exact, every window its watermark closed and none past its reach."""
        got = sorted(map(key, self.rows))
        assert len(set(got)) == len(got), self.text
        closed = {key(r) for r in want if r["window_end"] <= self.closed_by}
        reached = {key(r) for r in want if r["window_end"] <= self.reach}
        assert closed <= set(got) <= reached, (self.text, set(got) - reached, closed - set(got))

    def take(self, batch: list[dict], dropped: list[dict]) -> None:
        """A batch's events, `dropped` those its shards dead-lettered as late. Behind its watermark
        (`closed_by`) an event is late, from its reach on it is not. In between it is late in a shard whose
        clock passed it: that shard closed windows up to its clock less the lateness of then, and a PATCH
        that raised the lateness since does not open them again (the watermark never goes back), so such
        an event is as its shard judged it, and never past the reach."""
        top = max(self.closed_by, self.reach)
        ids = {e["id"] for e in dropped}
        assert all(e["time"] < top for e in dropped), (self.text, top, sorted(e["time"] for e in dropped))
        for e in batch:
            late = e["time"] < self.closed_by or (e["time"] < top and e["id"] in ids)
            (self.late if late else self.seen).append(e)


def run_schedule(seed: int, n_batches: int, shards: int, disorder: float,
                 operator: str = "whole") -> tuple[list[Life], OperatorSim]:
    rnd = random.Random(seed)
    events = stream(seed)
    batches = batches_of(events, n_batches, seed, disorder)
    # live: the stream takes each change of its query set as the service's do (a control row to every shard)
    sim = OperatorSim(shards, incremental=operator != "whole", rebuild=operator == "rebuilt", live=True)
    running: dict[str, tuple[RunSpec, Life]] = {}
    stopped: dict[str, tuple[RunSpec, Life]] = {}
    lives: list[Life] = []
    stream_max = 0.0  # the latest event time of the earlier batches: the watermark before lateness

    def join(name: str, other_than: str = "") -> None:
        text, engine = rnd.choice([t for t in TEXTS if t != other_than]), rnd.choice(["auto", "general"])
        life = Life(text, engine)
        lives.append(life)
        running[name] = (RunSpec.create(text, engine=engine, lateness_s=rnd.choice(LATENESS)), life)

    def collect(name: str, life: Life) -> None:  # the rows emitted so far under this name belong to this life
        life.rows += sim.rows.pop(name, [])

    n = 0
    join(f"q{n}")
    for batch in batches:
        action = rnd.choice(["join", "join", "stop", "start", "delete", "lateness", "text", "none", "none"])
        names = sorted(running)
        if action == "join" or not running:
            n += 1
            join(f"q{n}")
        elif action == "stop":  # the last running query too: the stream then holds it (`QuerySet.holding`)
            name = rnd.choice(names)
            stopped[name] = running.pop(name)
        elif action == "start" and stopped:
            name = rnd.choice(sorted(stopped))
            running[name] = stopped.pop(name)
        elif action == "delete" and len(running) > 1:
            name = rnd.choice(names)
            collect(name, running.pop(name)[1])
        elif action == "lateness":  # the same run fingerprint: the state is kept
            name = rnd.choice(names)
            spec, life = running[name]
            running[name] = (RunSpec.create(life.text, engine=life.engine, lateness_s=rnd.choice(LATENESS)), life)
        elif action == "text":  # a new query under the same name: its state starts afresh
            name = rnd.choice(names)
            life = running.pop(name)[1]
            collect(name, life)
            join(name, other_than=life.text)
        queries = of(running, stopped)
        for spec, life in running.values():  # a query's watermark never goes back (a PATCH raising its lateness)
            life.closed_by = max(life.closed_by, stream_max - spec.lateness_s if stream_max else float("-inf"))
        dead_before = {name: len(sim.dead.get(name, [])) for name in running}
        sim.batch(queries, batch)
        stream_max = max([stream_max, *(e["time"] for e in batch)])
        for name, (spec, life) in running.items():
            life.take(batch, [d["event"] for d in sim.dead.get(name, [])[dead_before[name]:] if d["reason"] == "late"])
            life.reach = max(life.reach, stream_max - spec.lateness_s)
    final = of(running, stopped)
    sim.finish(final)
    for name, (_, life) in running.items():
        life.closed_by = life.reach = float("inf")
        collect(name, life)
    for name, (_, life) in stopped.items():
        collect(name, life)
    return lives, sim


def of(running: dict[str, tuple[RunSpec, Life]], stopped: dict[str, tuple[RunSpec, Life]]) -> QuerySet:
    """The stream's query set: its running queries, or none (every query stopped) holding the stopped ones."""
    if not running:
        return QuerySet.holding(stopped, FieldNames())
    return QuerySet.of([(name, spec) for name, (spec, _) in running.items()], paused=stopped)


def key(row: dict) -> str:
    return repr(sorted(row.items()))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**16), st.integers(2, 9), st.integers(1, 4), st.sampled_from([0.0, 0.15]),
       st.sampled_from(["whole", "incremental", "rebuilt"]))
def test_each_query_gives_its_own_rows_whatever_joins_or_leaves_its_stream(seed: int, n_batches: int, shards: int,
                                                                          disorder: float, operator: str) -> None:
    """With either operator; `rebuilt`: the incremental one with no cached runner, every shard
    rebuilt from its chunks at every call."""
    lives, sim = run_schedule(seed, n_batches, shards, disorder, operator)
    assert not sim.errors
    for life in lives:
        life.check(evaluate(life.text, [e for e in life.seen if e["id"] != "bad"], engine=life.engine))


def test_a_query_joining_without_group_by_leaves_the_grouped_query_where_it_was() -> None:
    """The case that went wrong: A groups by sector; B, without GROUP-BY,
    joins mid-stream and leaves again. A's rows are those it gives alone."""
    a = RunSpec.create(TEXTS[0], lateness_s=0)
    b = RunSpec.create(TEXTS[1], lateness_s=0)
    events = stream(3)
    batches = batches_of(events, 6, 3, 0.0)
    together, alone = OperatorSim(4), OperatorSim(4)
    for i, batch in enumerate(batches):
        queries = QuerySet.of({"a": a, "b": b}) if 1 <= i <= 3 else QuerySet.of({"a": a})
        together.batch(queries, batch)
        alone.batch(QuerySet.of({"a": a}), batch)
    together.finish(QuerySet.of({"a": a}))
    alone.finish(QuerySet.of({"a": a}))
    assert together.layout.slots == (("sector",), ())  # B got a slot of its own; A's shards did not move
    assert sorted(map(key, together.rows["a"])) == sorted(map(key, alone.rows["a"]))
    assert sorted(map(key, alone.rows["a"])) == sorted(map(key, evaluate(a, [e for e in events if e["id"] != "bad"])))


def test_lateness_is_each_querys_own_when_another_query_leaves() -> None:
    """A allows 30 s of lateness, B none. After B leaves, events 10-25 s behind
    the newest are on time for A (they were dead-lettered as late before)."""
    a = RunSpec.create(TEXTS[0], lateness_s=30)
    b = RunSpec.create(TEXTS[3], lateness_s=0)
    first = [{"type": "Stock", "time": t, "company": t % 4, "sector": t % 2, "price": 100.0 - t % 7} for t in range(100)]
    behind = [{"type": "Stock", "time": t, "company": t % 4, "sector": t % 2, "price": 99.0} for t in range(75, 90)]
    sim = OperatorSim(2)
    sim.batch(QuerySet.of({"a": a, "b": b}), first)
    sim.batch(QuerySet.of({"a": a}), [{"type": "Stock", "time": 100, "company": 0, "sector": 0, "price": 1.0}])
    sim.batch(QuerySet.of({"a": a}), behind)
    assert "a" not in sim.dead
    sim.finish(QuerySet.of({"a": a}))
    want = evaluate(a, [*first, {"type": "Stock", "time": 100, "company": 0, "sector": 0, "price": 1.0}, *behind])
    assert sorted(map(key, sim.rows["a"])) == sorted(map(key, want))


def test_a_raised_lateness_does_not_open_the_windows_a_shards_clock_closed() -> None:
    """q allows no lateness: its shard closes the windows its first batch's events pass (its clock, 49 s:
    those that end by 40 s). A PATCH then raises the lateness to 30 s: the watermark stays at 49 s (it
    never goes back), so events at 35 s (in 20-40 s, reported) and 45 s are late, not on time by the
    stream's 49 s less 30 s."""
    first = [{"type": "Stock", "time": t, "company": 0, "sector": 0, "price": 100.0 - t} for t in range(50)]
    behind = [{"type": "Stock", "time": t, "company": 0, "sector": 0, "price": 1.0} for t in (35, 45)]
    after = [{"type": "Stock", "time": 50, "company": 0, "sector": 0, "price": 0.5}]
    sim = OperatorSim(1)
    sim.batch(QuerySet.of({"q": RunSpec.create(TEXTS[1], lateness_s=0)}), first)
    assert [r["window_end"] for r in sim.rows["q"]] == [10, 20, 30, 40]
    raised = QuerySet.of({"q": RunSpec.create(TEXTS[1], lateness_s=30)})
    sim.batch(raised, behind + after)
    assert [(d["reason"], d["event"]["time"]) for d in sim.dead["q"]] == [("late", 35), ("late", 45)]
    sim.finish(raised)
    assert sorted(map(key, sim.rows["q"])) == sorted(map(key, evaluate(TEXTS[1], first + after)))


def test_a_lowered_lateness_closes_windows_in_shards_no_event_or_timer_wakes() -> None:
    """q allows 30 s: after events up to 49 s its shard's timer waits for the watermark to pass 50 s
    (the window 0-20 s, plus 30 s). A PATCH lowers the lateness to 5 s: the new set's control row
    wakes the shard in the next batch, which brings no event of its own, and the windows up to 44 s
    come out there, not when a later event or the old timer would wake it."""
    spec = RunSpec.create(TEXTS[0], lateness_s=30)
    events = [{"type": "Stock", "time": t, "company": t % 4, "sector": t % 2, "price": 100.0 - t % 7} for t in range(50)]
    sim = OperatorSim(1, live=True)
    sim.batch(QuerySet.of({"q": spec}), events)
    assert {r["window_end"] for r in sim.rows["q"]} == {10}
    sim.batch(QuerySet.of({"q": RunSpec.create(TEXTS[0], lateness_s=5)}), [])
    want = [r for r in evaluate(spec, events) if r["window_end"] <= 49 - 5]
    assert sorted(map(key, sim.rows["q"])) == sorted(map(key, want))


def test_a_query_that_raises_fails_alone_and_is_tried_again_in_the_next_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """One query's evaluation raises: an "error" output names it, the other
    query's rows are unchanged, later batches of the same run skip it, and a
    new run (a restarted stream) goes on from the state it had."""
    good = RunSpec.create(TEXTS[0])
    bad = RunSpec.create(TEXTS[2], engine="general")
    events = [e for e in stream(5) if e["id"] != "bad"]
    batches = batches_of(events, 5, 5, 0.0)
    advance = SoloUnit.advance
    calls = {"n": 0}

    def flaky(self: SoloUnit, watermark_of):  # noqa: ANN001, ANN202
        if self.name == "bad":
            calls["n"] += 1
            if calls["n"] == 3:
                raise RuntimeError("a bug in one query\nwith a second line")
        return advance(self, watermark_of)

    monkeypatch.setattr(SoloUnit, "advance", flaky)
    sim, alone = OperatorSim(1), OperatorSim(1)
    run = QuerySet.of({"good": good, "bad": bad}, epoch=1)
    for batch in batches:
        sim.batch(run, batch)
        alone.batch(QuerySet.of({"good": good}), batch)
    assert sim.errors == {"bad": "RuntimeError: a bug in one query"}
    assert calls["n"] == 3  # skipped for the rest of its run
    sim.finish(QuerySet.of({"good": good, "bad": bad}, epoch=2))  # the next run tries it again
    alone.finish(QuerySet.of({"good": good}))
    assert sorted(map(key, sim.rows["good"])) == sorted(map(key, alone.rows["good"]))
    assert calls["n"] == 4 and sim.rows.get("bad")


def test_the_layout_keeps_slots_and_the_shard_count(tmp_path) -> None:  # noqa: ANN001
    """A stream's layout only grows: a query keeps its slot whatever joins or
    leaves; another shard count for the same checkpoint is refused."""
    a, b, c = (RunSpec.create(TEXTS[i]) for i in (0, 1, 2))
    layout = open_layout(tmp_path, QuerySet.of({"a": a}), None, 4)
    assert (layout.shards, layout.slots, layout.slot_of("a")) == (4, (("sector",),), 0)
    layout = open_layout(tmp_path, QuerySet.of({"b": b, "c": c}, paused=["a"]), None, 8)
    assert layout.shards == 4 and [layout.slot_of(n) for n in "abc"] == [0, 1, 2]
    assert set(layout.keys(0)).isdisjoint(layout.keys(1)) and layout.locate(layout.keys(2)[3]) == (2, 3)
    with pytest.raises(Exception, match="written with 4 shards, this run asks for 3"):
        open_layout(tmp_path, QuerySet.of({"a": a}), 3, 4)
    # a checkpoint from before layouts: its queries stay in the one slot of the attributes they shared
    (tmp_path / "old" / "offsets").mkdir(parents=True)
    old = open_layout(tmp_path / "old", QuerySet.of({"a": a, "c": c}), 2, 4)
    assert old.legacy and old.slots == ((),) and old.slot_of("a") == old.slot_of("c") == 0
    assert open_layout(tmp_path / "old", QuerySet.of({"b": b}), None, 4).slot_of("b") == 0
    assert StreamLayout.from_dict(old.to_dict()) == old


@pytest.mark.parametrize("ahead_s", [10 * 86_400, 4_000_000_000])
def test_an_event_far_ahead_of_the_stream_moves_no_query_watermark(ahead_s: float) -> None:
    """One event ten days from now (ahead of this replayed stream by years, not of the
    wall clock: it moves Spark's watermark), or in 2096 (kept out of it): dead-lettered
    as `future`; every event after it counts, and windows go on closing as events come."""
    import time

    spec = RunSpec.create(TEXTS[0], lateness_s=5)
    events = [e for e in stream(11) if e["id"] != "bad"]
    batches = batches_of(events, 6, 11, 0.0)
    far = {"type": "Stock", "time": (time.time() + ahead_s) if ahead_s < 10**9 else ahead_s, "company": 1,
           "sector": 1, "price": 5.0, "id": "far"}
    sim = OperatorSim(3)
    for i, batch in enumerate(batches):
        sim.batch(QuerySet.of({"q": spec}), batch + ([far] if i == 2 else []))
    assert [d["reason"] for d in sim.dead["q"]] == ["future"]
    before_last = max(e["time"] for e in batches[-2])  # the last batch's watermark, before lateness
    got, everything = set(map(key, sim.rows["q"])), set(map(key, evaluate(spec, events)))
    assert {key(r) for r in evaluate(spec, events) if r["window_end"] <= before_last - 5} <= got <= everything
    sim.finish(QuerySet.of({"q": spec}))
    assert sorted(map(key, sim.rows["q"])) == sorted(map(key, evaluate(spec, events)))


@pytest.mark.parametrize(("seed", "n_batches", "shards", "disorder", "operator"), [
    (26, 5, 2, 0.0, "incremental"),  # a general-engine query paused on a rebuilt runner kept its chunks' keys
    (367, 8, 1, 0.15, "incremental"),  # a columnar middle NOT: the same, with kept chunks
    (18766, 5, 1, 0.0, "whole"),  # a name back to an earlier text: not that life's state left in a shard
    (1034, 2, 1, 0.0, "whole"),  # a query on alone from its family's state, whose first window spec was another's
    (65535, 5, 1, 0.15, "whole"),  # a PATCH raised the lateness of a query whose shard's clock had closed windows
    (48889, 8, 4, 0.0, "incremental"),  # a PATCH lowered the lateness below the shards' timers, then a stop
])
def test_schedules_that_went_wrong(seed: int, n_batches: int, shards: int, disorder: float, operator: str) -> None:
    lives, sim = run_schedule(seed, n_batches, shards, disorder, operator)
    assert not sim.errors
    for life in lives:
        life.check(evaluate(life.text, [e for e in life.seen if e["id"] != "bad"], engine=life.engine))


def test_a_query_leaving_its_family_goes_on_in_its_own_windows() -> None:
    """A (20 s sliding 10 s) and B (40 s sliding 20 s) run as one family, whose
    kept events count windows in A's spec; B alone from that state counts in its own."""
    a, b = RunSpec.create(TEXTS[0]), RunSpec.create(TEXTS[3])
    events = sorted((e for e in stream(1034) if e["type"] == "Stock" and e["id"] != "bad"), key=lambda e: e["time"])
    for operator in ("whole", "incremental"):
        sim = OperatorSim(1, incremental=operator == "incremental")
        sim.batch(QuerySet.of({"a": a, "b": b}), events[:100])
        sim.batch(QuerySet.of({"b": b}), events[100:])
        sim.finish(QuerySet.of({"b": b}))
        assert sorted(map(key, sim.rows["b"])) == sorted(map(key, evaluate(b, events))), operator


def test_a_name_back_to_its_first_text_starts_afresh() -> None:
    """q runs text A, then B, then A again: a shard no event reached while B ran
    still holds A's first state, which is not taken for the new A's."""
    a, b = RunSpec.create(TEXTS[2]), RunSpec.create(TEXTS[0])  # company, sector: other slots
    early = [{"type": "Stock", "time": t, "company": 3, "sector": 1, "price": 100.0 - t} for t in range(10)]
    late = [{"type": "Stock", "time": 40 + t, "company": 3, "sector": 1, "price": 100.0 - t} for t in range(10)]
    for operator in ("whole", "incremental"):
        sim = OperatorSim(2, incremental=operator == "incremental")
        sim.batch(QuerySet.of({"q": a}), early)
        sim.batch(QuerySet.of({"q": b}), [])
        sim.rows.pop("q", None)
        sim.batch(QuerySet.of({"q": a}), late)
        sim.finish(QuerySet.of({"q": a}))
        assert sorted(map(key, sim.rows["q"])) == sorted(map(key, evaluate(a, late))), operator
        assert sim.layout.life_of("q")[1] == 2


def test_two_streams_of_the_same_queries_in_one_worker_keep_apart() -> None:
    """A worker's cached runner goes on only from the very state it wrote: a second
    stream (or a new checkpoint) of the same queries and shards is not the first."""
    spec = RunSpec.create(TEXTS[1])
    first, second = OperatorSim(1, incremental=True), OperatorSim(1, incremental=True)
    one = [{"type": "Stock", "time": t, "company": 0, "sector": 0, "price": 100.0 - t} for t in range(30)]
    two = [{"type": "Stock", "time": t, "company": 1, "sector": 1, "price": 100.0 + t} for t in range(30)]
    first.batch(QuerySet.of({"q": spec}), one[:15])
    second.batch(QuerySet.of({"q": spec}), two[:15])
    first.batch(QuerySet.of({"q": spec}), one[15:])
    second.batch(QuerySet.of({"q": spec}), two[15:])
    for sim, events in ((first, one), (second, two)):
        sim.finish(QuerySet.of({"q": spec}))
        assert sorted(map(key, sim.rows["q"])) == sorted(map(key, evaluate(spec, events)))
