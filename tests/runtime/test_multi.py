"""Many queries over one stream (runtime/multi.py): every query's rows and dead letters are what it gives alone.

The shard step runs a `QuerySet` with one `MultiRunner` per shard; here it
is driven over random query sets (windows, slides, edge directions, GROUP-BY,
aggregates, local constants, lateness, a CET query, a general-engine query),
random streams with bad and late events, random micro-batch splits and shard
counts, and compared query by query with the same query run alone. Then a
restart with another query set, and the state sizes of queries sharing a state.
"""

from __future__ import annotations

import gc
import weakref

from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_support import OTHERS, drive, key, spec_of, split, stream, template

from greta_stream import MultiRunner, QuerySet, evaluate


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(0, 107), min_size=1, max_size=6, unique=True),
    st.lists(st.sampled_from([0, 4, 15]), min_size=8, max_size=8),
    st.booleans(), st.integers(0, 2**16), st.integers(1, 5), st.integers(1, 3), st.integers(0, 3),
)
def test_each_query_of_a_stream_gives_its_own_rows(picks: list[int], lateness: list[int], others: bool, seed: int,
                                                    n_batches: int, n_shards: int, bad_time: int) -> None:
    texts = [template(i) for i in picks] + (OTHERS if others else [])
    queries = QuerySet.of([(f"q{i}", spec_of(t, lateness[i % 8])) for i, t in enumerate(texts)])
    events = stream(seed, bad_time=bad_time == 0, int_prices=bad_time == 1, text_price=bad_time == 2)
    batches = split(events, n_batches, seed)
    rows, dead = drive(queries, batches, n_shards, incremental=bad_time == 3)
    for name, spec in queries:
        alone = QuerySet.of({name: spec})
        want_rows, want_dead = drive(alone, batches, 1)
        assert sorted(map(key, rows[name])) == sorted(map(key, want_rows[name])), name
        assert sorted(dead[name]) == sorted(want_dead[name]), name
        if lateness[0] == 0 and spec.lateness_s == 0 and n_batches == 1:
            got = sorted(map(key, rows[name]))
            assert got == sorted(map(key, evaluate(spec, events))), name


def test_a_restarted_stream_keeps_the_state_of_the_queries_it_still_has() -> None:
    """The query set changes between two micro-batches: a kept query goes on
    from its state, a new one starts empty, a removed one is dropped."""
    a, b, c = (spec_of(template(i), 0) for i in (0, 7, 20))
    events = stream(3)

    def before(e: object, t: float) -> bool:
        return isinstance(e, dict) and isinstance(e.get("time"), (int, float)) and e["time"] < t

    first = [e for e in events if before(e, 30)]
    second = [e for e in events if not before(e, 30)]
    multi = MultiRunner(QuerySet.of({"a": a, "b": b}))
    inf = lambda spec, kind: float("inf")  # noqa: E731
    wm = lambda spec, kind: 30  # noqa: E731
    multi.add_many(first)  # the first batch: no watermark yet
    early = multi.advance(wm)
    blob = multi.snapshot()
    later = MultiRunner.restore(QuerySet.of({"a": a, "c": c}), blob)
    later.add_many(second, wm)
    rows = early + later.advance(inf)
    got_a = sorted(key(r) for n, r in rows if n == "a")
    assert got_a == sorted(map(key, evaluate(a, events)))
    got_c = sorted(key(r) for n, r in rows if n == "c")
    assert got_c == sorted(map(key, evaluate(c, second)))  # it started at the stream's position
    assert [n for n, _ in rows[len(early):]] and all(n in ("a", "c") for n, _ in rows[len(early):])
    assert {n for n, _ in early} == {"a", "b"}



def test_queries_sharing_a_state_count_its_bytes_once() -> None:
    """A family's state is one blob under each of its queries' names: their sizes split it."""
    queries = QuerySet.of([(f"q{i}", spec_of(template(i), 0)) for i in (18, 19, 20)])  # one family
    multi = MultiRunner(queries)
    multi.add_many(stream(1, n=200))
    blob = multi.snapshot()
    sizes = multi.state_sizes
    assert len(multi.units) == 1 and all(sizes.values())
    family = len(next(iter(multi.units)).snapshot()["q18"][1])
    assert sum(sizes.values()) == family < len(blob)


def test_a_micro_batch_is_read_once_whatever_the_number_of_queries(monkeypatch) -> None:  # noqa: ANN001
    """Every query's preparation reads the one parsed batch (`columnar.Input`): a field of the
    records is read and typed once for ten queries, and their rows are still each their own."""
    from greta_stream.engine.columnar import columns

    reads: list[str] = []
    real_raw = columns.Input.raw

    def counting_raw(self, name, rows=None):  # noqa: ANN001, ANN202
        if self.fields is None and self.frame is None and name not in self._raw:
            reads.append(name)
        return real_raw(self, name, rows)

    monkeypatch.setattr(columns.Input, "raw", counting_raw)
    texts = [template(i) for i in range(0, 100, 10)]
    queries = QuerySet.of([(f"q{i}", spec_of(t, 0)) for i, t in enumerate(texts)], sharing=False)
    events = stream(7)
    multi = MultiRunner(queries)
    multi.add_many(events)
    got = multi.finish()
    assert sorted(set(reads)) == sorted(reads), f"a field read twice: {sorted(reads)}"
    assert {"type", "time", "price"} <= set(reads)
    for name, spec in queries:
        mine = sorted(key(row) for n, row in got if n == name)
        assert mine == sorted(map(key, evaluate(spec, events))), name


def test_reconfigure_equals_a_restore_into_the_new_query_set() -> None:
    """Queries join, leave, pause and come back between micro-batches: a runner taken over to each new
    set (`reconfigure`, what a worker's cached runner does) gives every row a restore from the state gives."""
    import random

    from greta_stream import QuerySet, RunSpec

    texts = [f"RETURN COUNT(*), MAX(S.price) PATTERN Stock S+ WHERE S.price > {i % 3} AND S.price > NEXT(S).price "
             f"WITHIN {10 + i % 2} s" for i in range(8)]
    texts += ["RETURN COUNT(*) PATTERN SEQ(Stock A, Stock S+) WHERE A.price < NEXT(S).price WITHIN 7 s",
              "RETURN sector, COUNT(*) PATTERN Stock S+ WHERE [sector] GROUP-BY sector WITHIN 5 s SLIDE 1 s"]
    rng = random.Random(1)
    events = [{"type": "Stock", "time": t, "price": rng.randint(1, 9), "sector": rng.randint(0, 2)} for t in range(200)]
    sets = [(["q0", "q1", "q8"], ()), (["q0", "q1", "q2", "q8", "q9"], ()), (["q1", "q2", "q3", "q4", "q9"], ("q0",)),
            (["q0", "q2", "q3", "q4", "q5", "q9"], ("q1",)), (["q0", "q5", "q6", "q7", "q8", "q9"], ())]

    def run(take_over: bool) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        multi: MultiRunner | None = None
        for b, (names, paused) in enumerate(sets):
            queries = QuerySet.of({n: RunSpec.create(texts[int(n[1:])]).for_streaming() for n in names},
                                  paused=paused, epoch=7)
            if multi is None:
                multi = MultiRunner(queries)
            elif take_over:
                multi.reconfigure(queries)
            else:
                multi = MultiRunner.restore(queries, multi.snapshot())
            multi.expect(lambda spec, kind, t=b * 40 - 5: t)
            multi.add_many(events[b * 40:(b + 1) * 40], lambda spec, kind, t=b * 40 - 5: t)
            for name, row in multi.advance(lambda spec, kind, t=(b + 1) * 40 - 5: t):
                out.setdefault(name, []).append(row)
            multi.snapshot()
        return out

    assert run(take_over=True) == run(take_over=False) != {}


def test_a_runner_goes_with_its_last_reference() -> None:
    """A runner holds no reference cycle: a worker's cache that drops one frees its kept events then,
    not at a full collection of the garbage collector, which a worker may not run for many batches.
    Its units still send their dead letters to the sink the runner has now."""
    queries = QuerySet.of([(f"q{i}", spec_of(template(i), 0)) for i in (0, 7, 18)])
    gc.collect()
    gc.disable()
    try:
        letters: list[str] = []
        multi = MultiRunner(queries, dead_letter=lambda name, dl: letters.append(name))
        multi.dead_letter = lambda name, dl: letters.append("now " + name)
        multi.add_many(stream(2, n=200, bad_time=True))
        assert letters and all(name.startswith("now ") for name in letters)
        gone = weakref.ref(multi)
        del multi
        assert gone() is None
    finally:
        gc.enable()
