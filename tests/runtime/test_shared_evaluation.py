"""Shared evaluation (runtime/plan, runtime/units.py): a family's queries on one columnar stream.

Queries that differ only in windows and aggregates form a family (one per
GROUP-BY attributes) with a kernel pass per window spec; a family whose
queries validate differently splits when a record tells them apart. Each
query gets the rows and dead letters it gets alone.
"""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from runtime_support import drive, key, spec_of, split, stream, template

from greta_stream import MultiRunner, QuerySet, plan_units


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**16), st.integers(2, 8), st.integers(1, 3))
def test_a_family_of_several_window_specs_and_groupings(seed: int, n_batches: int, n_shards: int) -> None:
    """Queries that differ only in windows and aggregates share one
    preparation and one pass per window spec; those of other GROUP-BY
    attributes are in other shards (a family each); each gets its own rows."""
    from greta_stream.runtime.plan import plan_units

    picks = [18, 19, 20, 24, 31, 36, 37, 38, 42]  # 3 window specs, 3 groupings, 2 aggregate lists, one direction
    queries = QuerySet.of([(f"q{i}", spec_of(template(i), 0)) for i in picks])
    units = plan_units(queries).units
    groupings = [{tuple(queries[n].query.group_by) for n in u.names} for u in units]
    assert sorted(map(sorted, groupings)) == [[()], [("company",)], [("sector",)]]  # a unit per GROUP-BY
    by_sector = next(u for u in units if queries[u.names[0]].query.group_by == ("sector",))
    assert len(by_sector.names) == 6 and len(by_sector.passes) == 3  # one family, a pass per window spec
    batches = split(stream(seed, n=200), n_batches, seed)
    rows, dead = drive(queries, batches, n_shards)
    for name, spec in queries:
        want_rows, want_dead = drive(QuerySet.of({name: spec}), batches, 1)
        assert sorted(map(key, rows[name])) == sorted(map(key, want_rows[name])), name
        assert sorted(dead[name]) == sorted(want_dead[name]), name


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**16), st.integers(1, 6))
def test_a_family_whose_queries_validate_differently_splits_when_they_disagree(seed: int, n_batches: int) -> None:
    """COUNT(*) reads a price through its edge predicate only, AVG(S.price)
    needs it to be a number: one family until a text price comes; then each
    query gets the rows and dead letters it gets alone."""
    count, avg = template(0), template(18)  # the same but for AVG(S.price)
    queries = QuerySet.of({"count": spec_of(count, 0), "avg": spec_of(avg, 0)})
    assert len(plan_units(queries).units) == 1
    events = stream(seed, n=100, text_price=True)
    batches = split(events, n_batches, seed)
    rows, dead = drive(queries, batches, 1)
    for name, spec in queries:
        want_rows, want_dead = drive(QuerySet.of({name: spec}), batches, 1)
        assert sorted(map(key, rows[name])) == sorted(map(key, want_rows[name])), name
        assert sorted(dead[name]) == sorted(want_dead[name]), name
    assert "wrong_type" in dead["avg"] and "wrong_type" not in dead["count"]
    multi = MultiRunner(queries)
    for b in batches:
        multi.add_many(b)
    assert len(multi.units[0].parts) == 2  # split by validation


def test_the_plan_counts_in_words() -> None:
    from greta_stream.runtime.plan import plan_units
    from greta_stream.runtime.queryset import QuerySet
    from greta_stream.runtime.spec import RunSpec

    one = RunSpec.create("RETURN COUNT(*) PATTERN A+ WITHIN 1 s")
    assert plan_units(QuerySet.of({"q": one})).explain().startswith("1 query in 1 unit;")
    two = QuerySet.of({"q": one, "r": RunSpec.create("RETURN COUNT(*) PATTERN B+ WITHIN 1 s")})
    assert plan_units(two).explain().startswith("2 queries in 2 units;")


FAMILY_PAIRS = [  # two queries whose plans differ in one thing beyond windows and aggregates
    ("(SEQ(A a+, B b))+", "SEQ(A a+, B b)", ""),  # the loop back over the SEQ
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", "SEQ(A a+, NOT SEQ(C c, F d), B b)", ""),  # a negated SEQ's types
    ("A a+", "A a+", "(a.v > NEXT(a).v OR a.w > NEXT(a).w)|a.v > NEXT(a).v AND a.w > NEXT(a).w"),  # OR or AND
    ("SEQ(A a, B b?, C c)", "SEQ(A a, B b, C c)", ""),  # an optional part
    ("SEQ(A a, B b*, C c)", "SEQ(A a, B b+, C c)", ""),
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", "SEQ(A a+, NOT SEQ(C c, D d), B b)", "|c.v < NEXT(d).v"),  # within it
    # a negated SEQ's optional part, Kleene part bound at both ends and counted group (`State.group`, `.count`)
    ("SEQ(A a+, NOT SEQ(C c, D d?, F f), B b)", "SEQ(A a+, NOT SEQ(C c, D d, F f), B b)", ""),
    ("SEQ(A a+, NOT SEQ(C c, D d+, F f), B b)", "SEQ(A a+, NOT SEQ(C c, D d, F f), B b)",
     "c.v < NEXT(d).v AND d.v < NEXT(f).v|c.v < NEXT(d).v AND d.v < NEXT(f).v"),
    ("SEQ(A a+, NOT (SEQ(C c, D d)){2}, B b)", "SEQ(A a+, NOT SEQ(C c, D d), B b)", ""),
    # which of two groups ending at one state is counted (its first state holds the count)
    ("(SEQ(F f, (SEQ(A a, (SEQ(B b, C c))+)){2}))+", "(SEQ(F f, (SEQ(A a, (SEQ(B b, C c)){2}))+))+", ""),
]


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**16), st.sampled_from(FAMILY_PAIRS))
def test_queries_whose_plans_differ_beyond_windows_are_no_family(seed: int, pair: tuple[str, str, str]) -> None:
    """Two queries that differ in their pattern's loop, a negated SEQ, the AND/OR shape of an edge predicate
    or an optional part are two units, each with the rows it gets alone (one family gave both the first
    one's rows)."""
    import random

    rnd = random.Random(seed)
    x, y, wheres = pair
    wx, wy = wheres.split("|") if wheres else ("", "")
    texts = {name: f"RETURN COUNT(*), SUM(a.v) PATTERN {p} " + (f"WHERE {w} " if w else "") + "WITHIN 10 s SLIDE 5 s"
             for name, p, w in (("x", x, wx), ("y", y, wy))}
    queries = QuerySet.of({name: spec_of(text, 0) for name, text in texts.items()})
    assert len(plan_units(queries).units) == 2
    events = [{"type": rnd.choice("ABCDF"), "time": t + rnd.choice([0, 0.5]), "v": rnd.randrange(5),
               "w": rnd.randrange(5)} for t in range(80)]
    rows, _ = drive(queries, [events], 1)
    for name, text in texts.items():
        alone, _ = drive(QuerySet.of({name: spec_of(text, 0)}), [events], 1)
        assert sorted(map(key, rows[name])) == sorted(map(key, alone[name])), name
        assume(alone[name])  # about 1 stream in 150 holds no `SEQ(A, B, C)` in a window: no rows to compare


def test_the_family_key_holds_every_field_of_the_plan_but_the_query_and_windows() -> None:
    """A field added to the columnar plan goes into the family key (or is named as left out on purpose)."""
    import dataclasses

    from greta_stream.engine.columnar import KernelPlan
    from greta_stream.runtime.plan.keys import FAMILY_FIELDS, NOT_FAMILY_FIELDS

    assert {f.name for f in dataclasses.fields(KernelPlan)} == FAMILY_FIELDS | NOT_FAMILY_FIELDS


def test_queries_whose_negated_seqs_match_differently_are_two_families() -> None:
    """`NOT SEQ(C c, D d)` with and without `c.v < NEXT(d).v` (or with another comparison) exclude other
    trends: their family keys differ; the same predicate under other aliases does not."""
    from greta_stream.runtime.plan.keys import family_key

    base = "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C {c}, D {d}), B b) {where}WITHIN 10 s"
    keys = [family_key(spec_of(base.format(c=c, d=d, where=w), 0)) for c, d, w in [
        ("c", "d", ""), ("c", "d", "WHERE c.v < NEXT(d).v "), ("c", "d", "WHERE c.v <= NEXT(d).v "),
        ("x", "y", "WHERE x.v < NEXT(y).v ")]]
    assert len(set(keys[:3])) == 3
    assert keys[1] == keys[3]
