"""Groups inside groups: a Kleene plus over a SEQ inside another, an optional group that loops inside a group,
counted repetitions inside a loop and loops inside a counted or an optional group, on the columnar
engine (`(SEQ(A, (SEQ(H, B))+))+`, `SEQ(X, (SEQ(A, (SEQ(H, B))*))+)`), against the general engine, the oracle
and through micro-batches with restores, under each strategy.

Each looped group steps back from its last state to its first (`parts.loop_steps`); an inner group's last
state is then the source of two steps back (to its own first state and to the outer group's), each a read
of the same store, and one trend counts once however it is cut into iterations. A state's lanes count the
innermost group ending at it whose first state holds a count (`parts.counted_span`), and a state past nested
optional parts steps back over each of them (`parts.before`).
"""

from __future__ import annotations

from typing import Any

from columnar_support import (
    assert_columnar_shapes,
    case_tests,
    chain_events,
    dense_query,
    differential_tests,
    shape_queries,
)
from columnar_support import dense_events as dense
from hypothesis import strategies as st

SHAPES = [  # (pattern, edge predicates it may take, alias it aggregates)
    ("(SEQ(A a, (SEQ(B b, C c))+))+", ["c.v > NEXT(a).v", "a.v <= NEXT(b).v", "c.v >= NEXT(b).v"], "a"),
    ("(SEQ(A a, (SEQ(B b, C c))+, D d))+", ["d.v < NEXT(a).v", "c.f <= NEXT(d).f", "b.v != NEXT(c).v"], "c"),
    ("SEQ(D d, (SEQ(A a, (SEQ(B b, C c))+))+)", ["c.v > NEXT(a).v", "d.v <= NEXT(a).v"], "b"),
    ("SEQ(D d, (SEQ(A a, (SEQ(B b, C c))*))+)", ["c.v > NEXT(a).v", "a.v < NEXT(a).v", "a.v >= NEXT(b).v"], "a"),
    ("SEQ(D d, (SEQ(A a, (SEQ(B b, C c))*))+, E e)", ["a.v < NEXT(e).v", "c.v < NEXT(e).v"], "a"),
    ("(SEQ(A a, (SEQ(B b+, C c))+))+", ["b.v > NEXT(b).v", "c.v < NEXT(a).v"], "b"),
    ("(SEQ(A a+, (SEQ(B b, C c))?))+", ["a.v >= NEXT(a).v", "c.v < NEXT(a).v"], "a"),
    ("(SEQ(A a, (SEQ(B b, (SEQ(C c, D d))+))+))+", ["d.v > NEXT(a).v", "d.v >= NEXT(b).v"], "c"),
    ("SEQ(E e, (SEQ(A a, (SEQ(B b, C c))+))+, D d)", ["c.v < NEXT(d).v", "e.v != NEXT(a).v"], "a"),
    ("(SEQ(A a, (SEQ(B b, NOT E e, C c))+))+", ["c.v > NEXT(a).v"], "c"),
    ("(SEQ(A a, B b?, (SEQ(B x, C c))+))+", ["a.v < NEXT(x).v", "c.v >= NEXT(a).v"], "a"),
    # a counted repetition inside a Kleene plus over a SEQ: its lanes count it, the loop starts again from lane 0
    ("(SEQ(A a, B b{2}, C c))+", ["a.v > NEXT(b).v", "b.v <= NEXT(b).v", "c.v < NEXT(a).v"], "b"),
    ("(SEQ(C c, B b{2}))+", ["c.v > NEXT(b).v", "b.v <= NEXT(b).v", "b.v < NEXT(c).v"], "b"),
    ("(SEQ(A a, B b{1,2}, C c))+", ["b.v <= NEXT(b).v", "c.v < NEXT(a).v", "a.f <= NEXT(b).f"], "b"),
    ("(SEQ(A a, B b{2,}, C c))+", ["b.v >= NEXT(b).v", "c.v != NEXT(a).v"], "a"),
    ("(SEQ(A a, B b{0,2}, C c))+", ["b.v <= NEXT(b).v", "a.v < NEXT(c).v", "c.v >= NEXT(a).v"], "c"),
    ("(SEQ(A a, (SEQ(B b, C c)){2}))+", ["c.v > NEXT(a).v", "c.v <= NEXT(b).v", "a.v < NEXT(b).v"], "b"),
    ("(SEQ(A a, (SEQ(B b, C c)){1,2}, D d))+", ["d.v > NEXT(a).v", "c.f <= NEXT(b).f"], "c"),
    ("(SEQ(A a+, (SEQ(B b, C c)){2,}))+", ["a.v >= NEXT(a).v", "c.v < NEXT(a).v"], "a"),
    ("(SEQ(A a, B b{2}, (SEQ(C c, D d)){2}))+", ["b.v < NEXT(c).v", "d.v >= NEXT(c).v", "d.v > NEXT(a).v"], "c"),
    ("(SEQ(A a, (SEQ(B b, C c)){2}, (SEQ(C x, D d))+))+", ["c.v < NEXT(x).v", "d.v >= NEXT(x).v"], "b"),
    ("SEQ((SEQ(A a, (SEQ(B b, C c))+))+, D d{2})", ["c.v > NEXT(a).v", "c.v <= NEXT(d).v", "d.v < NEXT(d).v"], "d"),
    # a counted repetition inside a group that is a part of a SEQ: the innermost group ending at it counts
    ("SEQ(D d, (SEQ(A a, B b{2}, C c))+)", ["b.v <= NEXT(b).v", "c.v < NEXT(a).v", "d.v < NEXT(a).v"], "b"),
    ("SEQ(A a, (SEQ(B b, (SEQ(C c, D d)){0,2}))+)", ["d.v < NEXT(b).v", "b.v >= NEXT(c).v", "b.v < NEXT(b).v"], "c"),
    ("SEQ(A a, (SEQ(B b, (SEQ(C c, D d)){2}))+, E e)", ["d.v >= NEXT(c).v", "d.v < NEXT(b).v", "d.v < NEXT(e).v"],
     "d"),
    ("(SEQ(A a, (SEQ(B b, (SEQ(C c, D d)){2}))+))+", ["d.v > NEXT(a).v", "d.v >= NEXT(c).v"], "c"),
    ("SEQ(A a, (SEQ(B b, C c{1,3}))+, D d)", ["c.v <= NEXT(c).v", "c.v > NEXT(b).v", "c.v < NEXT(d).v"], "c"),
    ("SEQ(A a, (SEQ(B b, C c{0,2}))+)", ["c.v <= NEXT(c).v", "b.v > NEXT(b).v", "c.v > NEXT(b).v"], "b"),
    # a looped group inside a counted one: only the counted group's own step back moves up a lane
    ("SEQ(D d, (SEQ(A a, (SEQ(B b, C c))+, E e)){2})", ["c.v >= NEXT(b).v", "e.v < NEXT(a).v", "d.v < NEXT(a).v"],
     "c"),
    ("(SEQ(A a, (SEQ(B b, C c))+, E e)){2,3}", ["c.v >= NEXT(b).v", "e.v < NEXT(a).v"], "b"),
    ("SEQ(D d, (SEQ(A a, (SEQ(B b, C c))*, E e)){1,2}, A x)", ["c.v > NEXT(b).v", "a.v < NEXT(e).v", "e.v <= NEXT(x).v"],
     "a"),
    # a counted group ending with a looped group: the count is the group's whose first state holds it
    ("SEQ(D d, (SEQ(A a, (SEQ(B b, C c))+)){2})", ["c.v >= NEXT(b).v", "c.v < NEXT(a).v", "d.v < NEXT(a).v"], "c"),
    ("(SEQ(A a, (SEQ(B b, C c))+)){2,3}", ["c.v >= NEXT(b).v", "c.v <= NEXT(a).v"], "b"),
    ("(SEQ(E e, (SEQ(A a, (SEQ(B b, C c))+)){2}))+", ["c.v < NEXT(a).v", "c.v > NEXT(e).v", "c.f <= NEXT(b).f"],
     "a"),
    ("SEQ(A a, (SEQ(B b, (SEQ(C c, D d))+)){0,2}, E e)", ["d.v >= NEXT(c).v", "d.v < NEXT(b).v"], "c"),
    # a looped group or a counted repetition inside an optional group
    ("SEQ(A a, (SEQ(B b, C c{2}))?, E e)", ["a.v < NEXT(b).v", "c.v <= NEXT(c).v", "c.v > NEXT(e).v"], "c"),
    # optional parts inside an optional group: a state past several of them steps back over each
    ("SEQ(A a, (SEQ(B b, (SEQ(C c, D d))?))?, E e)", ["a.v < NEXT(e).v", "b.v < NEXT(e).v", "d.v >= NEXT(e).v"], "b"),
    ("SEQ(A a, (SEQ(B b, C c?))?, D d)", ["a.v < NEXT(d).v", "b.v <= NEXT(d).v", "c.v > NEXT(d).v"], "c"),
    ("SEQ(A a, (SEQ(B b, C c{0,2}))?, D d)", ["c.v <= NEXT(c).v", "b.v > NEXT(d).v"], "c"),
    ("SEQ(A a, (SEQ(B b, C c?)){0,2}, D d)", ["c.v < NEXT(b).v", "b.v <= NEXT(b).v", "a.v > NEXT(d).v"], "b"),
    ("SEQ(A a, (SEQ(B b?, C c))*, D d)", ["c.v < NEXT(c).v", "c.v >= NEXT(b).v", "a.v < NEXT(c).v"], "c"),
    ("SEQ(A a, (SEQ(B b, (SEQ(C c, D d))*))?, E e)", ["d.v >= NEXT(c).v", "b.v < NEXT(e).v"], "c"),
    ("SEQ(A a, (SEQ(B b, (SEQ(C c, D d))+))?, E e)", ["d.v >= NEXT(c).v", "a.v < NEXT(e).v", "d.v < NEXT(e).v"], "c"),
    ("SEQ(A a, (SEQ(B b, (SEQ(C c, D d))+))*, E e)", ["d.v >= NEXT(c).v", "d.v > NEXT(b).v"], "a"),
    ("SEQ(A a, (SEQ(B b, (SEQ(C c, D d))+, E x)){0,2}, E e)", ["d.v >= NEXT(c).v", "x.v < NEXT(b).v"], "c"),
]
LOCALS = ["a.v > 0", "b.f < 2", "c.v < 3", "d.v != 1"]
NESTED_QUERY = shape_queries(SHAPES, LOCALS, ["COUNT(*)", "SUM({agg}.v)", "MAX({agg}.f)", "MIN(c.v)", "AVG({agg}.v)"])


def dense_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return dense(types="AABBCCDE", n_max=n_max)


(test_a_nested_loop_equals_the_general_engine, test_a_nested_loop_equals_the_oracle,
 test_a_nested_loop_streamed_equals_the_general_engine) = differential_tests(NESTED_QUERY, dense_events,
                                                                             examples=(300, 150, 60))

CHAINS = {  # a trend of each shape through two iterations of the outer group or more, the inner ones several times
    "(SEQ(A a, (SEQ(B b, C c))+))+": "ABCBCABC",
    "(SEQ(A a, (SEQ(B b, C c))+, D d))+": "ABCBCDABCD",
    "SEQ(D d, (SEQ(A a, (SEQ(B b, C c))+))+)": "DABCBCABC",
    "SEQ(D d, (SEQ(A a, (SEQ(B b, C c))*))+)": "DAABCBCAABC",
    "SEQ(D d, (SEQ(A a, (SEQ(B b, C c))*))+, E e)": "DABCAABCE",
    "(SEQ(A a, (SEQ(B b+, C c))+))+": "ABBCBCABC",
    "(SEQ(A a+, (SEQ(B b, C c))?))+": "AABCAABCA",
    "(SEQ(A a, (SEQ(B b, (SEQ(C c, D d))+))+))+": "ABCDCDBCDABCD",
    "SEQ(E e, (SEQ(A a, (SEQ(B b, C c))+))+, D d)": "EABCBCABCD",
    "(SEQ(A a, (SEQ(B b, NOT E e, C c))+))+": "ABCBECABC",
    "(SEQ(A a, B b?, (SEQ(B x, C c))+))+": "ABBCBCABC",
    "(SEQ(A a, B b{2}, C c))+": "ABBCABBBC",
    "(SEQ(C c, B b{2}))+": "CBBCBBB",
    "(SEQ(A a, B b{1,2}, C c))+": "ABCABBCABBBC",
    "(SEQ(A a, B b{2,}, C c))+": "ABBBCABBC",
    "(SEQ(A a, B b{0,2}, C c))+": "ACABCABBBC",
    "(SEQ(A a, (SEQ(B b, C c)){2}))+": "ABCBCABCBCBC",
    "(SEQ(A a, (SEQ(B b, C c)){1,2}, D d))+": "ABCDABCBCDBCD",
    "(SEQ(A a+, (SEQ(B b, C c)){2,}))+": "AABCBCABCBCBC",
    "(SEQ(A a, B b{2}, (SEQ(C c, D d)){2}))+": "ABBCDCDABBCDCD",
    "(SEQ(A a, (SEQ(B b, C c)){2}, (SEQ(C x, D d))+))+": "ABCBCCDCDABCBCCD",
    "SEQ((SEQ(A a, (SEQ(B b, C c))+))+, D d{2})": "ABCBCABCDD",
    "SEQ(D d, (SEQ(A a, B b{2}, C c))+)": "DABBCABBBC",
    "SEQ(A a, (SEQ(B b, (SEQ(C c, D d)){0,2}))+)": "ABCDCDBBCD",
    "SEQ(A a, (SEQ(B b, (SEQ(C c, D d)){2}))+, E e)": "ABCDCDBCDCDE",
    "(SEQ(A a, (SEQ(B b, (SEQ(C c, D d)){2}))+))+": "ABCDCDBCDCDABCDCD",
    "SEQ(A a, (SEQ(B b, C c{1,3}))+, D d)": "ABCCBCCCBCD",
    "SEQ(A a, (SEQ(B b, C c{0,2}))+)": "ABBCCBC",
    "SEQ(D d, (SEQ(A a, (SEQ(B b, C c))+, E e)){2})": "DABCBCEABCE",
    "(SEQ(A a, (SEQ(B b, C c))+, E e)){2,3}": "ABCBCEABCEABCE",
    "SEQ(D d, (SEQ(A a, (SEQ(B b, C c))*, E e)){1,2}, A x)": "DAEABCBCEA",
    "SEQ(D d, (SEQ(A a, (SEQ(B b, C c))+)){2})": "DABCBCABCBC",
    "(SEQ(A a, (SEQ(B b, C c))+)){2,3}": "ABCBCABCABCBC",
    "(SEQ(E e, (SEQ(A a, (SEQ(B b, C c))+)){2}))+": "EABCBCABCEABCABCBC",
    "SEQ(A a, (SEQ(B b, (SEQ(C c, D d))+)){0,2}, E e)": "ABCDCDBCDE",
    "SEQ(A a, (SEQ(B b, C c{2}))?, E e)": "ABCCCE",
    "SEQ(A a, (SEQ(B b, (SEQ(C c, D d))?))?, E e)": "ABCDBE",
    "SEQ(A a, (SEQ(B b, C c?))?, D d)": "ABCBD",
    "SEQ(A a, (SEQ(B b, C c{0,2}))?, D d)": "ABCCBCD",
    "SEQ(A a, (SEQ(B b, C c?)){0,2}, D d)": "ABCBBCD",
    "SEQ(A a, (SEQ(B b?, C c))*, D d)": "ABCCBCD",
    "SEQ(A a, (SEQ(B b, (SEQ(C c, D d))*))?, E e)": "ABCDCDE",
    "SEQ(A a, (SEQ(B b, (SEQ(C c, D d))+))?, E e)": "ABCDCDE",
    "SEQ(A a, (SEQ(B b, (SEQ(C c, D d))+))*, E e)": "ABCDCDBCDE",
    "SEQ(A a, (SEQ(B b, (SEQ(C c, D d))+, E x)){0,2}, E e)": "ABCDCDEBCDEE",
}


@st.composite
def chain_case(draw: Any, noise: int = 6) -> tuple[str, list[dict]]:
    """(query, events): a shape's chain (`CHAINS`) with up to `noise` other events among it, about two a second,
    in a window of 6 to 15 s: trends through several iterations of each group, which dense streams seldom hold."""
    pattern, edges, agg = draw(st.sampled_from(SHAPES))
    text = dense_query(draw, pattern, edges, LOCALS, ["COUNT(*)", f"SUM({agg}.v)", f"MAX({agg}.f)", "AVG(c.v)"])
    within = draw(st.integers(6, 15))
    text = f"{text.rpartition(' WITHIN ')[0]} WITHIN {within} s SLIDE {draw(st.integers(1, within))} s"
    return text, chain_events(draw, CHAINS[pattern], noise, groups=True)


(test_nested_chains_equal_the_general_engine, test_nested_chains_equal_the_oracle,
 test_nested_chains_streamed_equal_the_general_engine) = case_tests(chain_case, chain_case(noise=1),
                                                                    examples=(400, 80, 80))


def test_every_shape_runs_on_the_columnar_engine() -> None:
    assert_columnar_shapes(SHAPES)
