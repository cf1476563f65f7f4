"""A Kleene plus over a SEQ inside a negated SEQ, bound where it starts and where it ends
(`NOT SEQ(C c, (SEQ(D d, E e))+, C f) WHERE c.v < NEXT(d).v AND e.v < NEXT(f).v`; a Kleene event `D d+`, a group
of one; `D d*`, optional; a Kleene event inside a group, `(SEQ(C c, D d+))+`, or a counted one, `D d{2}`), on the
columnar engine:
the first and the last iteration stand for a match (`parts.bound_groups`), or with an edge predicate on the
loop's step (`e.v < NEXT(d).v`) chains of any number of them, against the general engine, the oracle and
through micro-batches with restores.

A match that only two iterations make is rare in random streams: it needs a chain c d e d e f in order
whose first D the entry admits and whose last E the exit admits, while neither iteration alone (nor the
first D with the last E) makes one. So each stream holds the shape's chain with a few other events among
it, and a constrained step is most often `x.id + 1 = NEXT(y).id` (ids in time order: its two events next
to each other), which keeps the first D from pairing with the last E.
"""

from __future__ import annotations

from typing import Any

from columnar_support import case_tests, chain_events
from hypothesis import strategies as st

BOUND = [  # (pattern, its chain of types, the steps constrained: entry, the group's inner ones, exit; may take).
    # The group's last part is of a type of neither end, else an end could start or finish the match at it
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e))+, C f), B b)", "ACDEDECB", ["cd", "de", "ef"], ["a.v > NEXT(a).v"]),
    ("SEQ(A a+, NOT SEQ(C c, NOT B x, (SEQ(D d, E e))+, D f), B b)", "ACDEBDEDB", ["de", "ef"], []),  # entry: a NOT
    ("SEQ(A a+, NOT SEQ(C c, NOT E x, (SEQ(D d, C e))+, NOT E y, D f), B b)", "ACDCEDCDB", ["de"],
     ["c.f < NEXT(d).f"]),  # NOTs at both ends, an edge predicate across the first
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, NOT B x, E e))+, D f), B b)", "ACDEBDEDB", ["cd", "ef"], []),  # a NOT inside
    ("SEQ(NOT SEQ(C c, (SEQ(D d, E e))+, C f), A a+, B b)", "CDEDECAB", ["cd", "de", "ef"], ["a.v > NEXT(a).v"]),
    ("SEQ(A a+, B b, NOT SEQ(C c, (SEQ(D d, E e))+, C f))", "ABCDEDEC", ["cd", "de", "ef"], []),  # walked back
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e))+, (SEQ(D g, E h))+, C f), B b)", "ACDEDEDEDECB",  # two groups
     ["cd", "de!", "eg!", "gh!", "hf!"], []),  # !: always next to each other
    ("SEQ(A a, NOT SEQ(B c, (SEQ(A d, C e))+, B f), B b+)", "ABACACBB", ["cd", "de", "ef"], ["b.v >= NEXT(b).v"]),
    # an edge predicate on the loop's step from E back to D: chains of any number of iterations (walked until no
    # start rises), the loop's step most often next to each other in time so that a chain is one run of them
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e))+, C f), B b)", "ACDEDEDECB", ["cd", "de!", "ed", "ef"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e))+, C f), B b)", "ACDEDEDECB", ["cd", "de!", "ed!", "ef"], []),
    ("SEQ(NOT SEQ(C c, (SEQ(D d, E e))+, C f), A a+, B b)", "CDEDEDECAB", ["cd", "de!", "ed", "ef"], []),  # leading
    ("SEQ(A a+, B b, NOT SEQ(C c, (SEQ(D d, E e))+, C f))", "ABCDEDEDEC", ["cd", "de", "ed!", "ef"], []),  # trailing
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e))+, C f), B b)", "ACDEDEDECB", ["de!", "ed!", "ef"], []),  # entry free
    # a Kleene event, a group of one: a chain of D's whose first the entry admits and whose last the exit does
    ("SEQ(A a+, NOT SEQ(C c, D d+, E e), B b)", "ACDDDEB", ["cd", "dd", "de"], ["a.v > NEXT(a).v"]),
    ("SEQ(A a+, NOT SEQ(C c, NOT B x, D d+, E e), B b)", "ACDBDEB", ["de"], []),  # entry: a NOT
    ("SEQ(NOT SEQ(C c, D d+, E e), A a+, B b)", "CDDDEAB", ["cd", "de"], []),  # leading
    ("SEQ(A a+, B b, NOT SEQ(C c, D d+, E e))", "ABCDDDE", ["cd", "dd", "de"], []),  # trailing: walked back
    # counted: a match holds lo..hi iterations, chains of exactly so many where the loop's step is constrained
    ("SEQ(A a+, NOT (SEQ(C c, D d)){2}, B b)", "ACDCDCDB", ["cd", "dc"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e)){2,3}, C f), B b)", "ACDEDEDEDECB", ["cd", "de!", "ed!", "ef"], []),
    ("SEQ(A a+, NOT SEQ(C c, D d{2,}, E e), B b)", "ACDDDDEB", ["cd", "dd", "de"], []),
    ("SEQ(A a+, NOT D d{2}, B b)", "ADDDB", ["dd"], ["a.v > NEXT(a).v"]),
    ("SEQ(NOT (SEQ(C c, D d)){2,3}, A a+, B b)", "CDCDCDCDAB", ["cd", "dc"], []),  # leading
    ("SEQ(A a+, B b, NOT SEQ(C c, D d{3}))", "ABCDDDD", ["cd", "dd"], []),  # trailing: walked back
    # a part that may match nothing and loops or counts: a chain of it, or none (then C next to E)
    ("SEQ(A a+, NOT SEQ(C c, D d*, E e), B b)", "ACDDDEB", ["cd", "dd", "de"], ["c.f > NEXT(e).f"]),
    ("SEQ(A a+, NOT SEQ(C c, D d*, E e), B b)", "ACDDDEB", ["cd", "de"], []),
    ("SEQ(A a+, NOT SEQ(C c, D d{0,2}, E e), B b)", "ACDDEB", ["cd", "dd", "de"], []),
    ("SEQ(NOT SEQ(C c, D d{0,3}, E e), A a+, B b)", "CDDDEAB", ["cd", "dd!", "de"], []),  # leading
    ("SEQ(A a+, B b, NOT SEQ(C c, D d*, E e))", "ABCDDDE", ["cd", "dd", "de"], []),  # trailing: walked back
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e))*, C f), B b)", "ACDEDECB", ["cd", "de", "ef"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e)){0,3}, C f), B b)", "ACDEDEDECB", ["cd", "de!", "ed!", "ef"], []),
    # a Kleene event inside a group, constrained where its chain starts and where it ends: a chain of it
    ("SEQ(A a+, NOT SEQ((SEQ(C c, D d+))+, E e), B b)", "ACDDDEB", ["cd", "de"], ["a.v > NEXT(a).v"]),
    ("SEQ(A a+, NOT SEQ((SEQ(C c, D d+))+, E e), B b)", "ACDDDEB", ["cd", "dd", "de"], []),  # on its loop too
    ("SEQ(A a+, NOT SEQ((SEQ(C c, D d+))+, E e), B b)", "ACDDCDDEB", ["cd", "dd!", "dc", "de"], []),  # two rounds
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e+, D f))+, C g), B b)", "ACDEEEDCB", ["de", "ef"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, NOT B x, E e+, NOT B y, D f))+, C g), B b)", "ACDEBEDCB", ["cd", "fg"], []),  # NOTs
    ("SEQ(NOT SEQ(C c, (SEQ(D d, E e+))+, C f), A a+, B b)", "CDEEECAB", ["de", "ef"], []),  # leading
    ("SEQ(A a+, B b, NOT SEQ((SEQ(C c, D d+))+, E e))", "ABCDDDE", ["cd", "dd", "de"], []),  # trailing: walked back
    # a counted event inside a group: a chain of lo..hi of it (`State.chain`)
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e{2}))+, C f), B b)", "ACDEEECB", ["cd", "de", "ef"], []),
    ("SEQ(A a+, NOT SEQ((SEQ(C c{2,3}, D d))+, E e), B b)", "ACCCDEB", ["cd", "de"], []),  # first in its group
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e{2,}))+, C f), B b)", "ACDEEECB", ["de", "ee", "ef"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e{1,2}, D g))+, C f), B b)", "ACDEEDCB", ["de", "eg", "gf"], []),
    ("SEQ(A a+, B b, NOT SEQ(C c, (SEQ(D d, E e{2}))+))", "ABCDEE", ["cd", "de", "ee"], []),  # trailing
    # a part that may match nothing inside a group (between its ends): a chain of it, or its neighbours adjacent
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e*, D f))+, C g), B b)", "ACDEEDCB", ["cd", "de", "ef", "fg"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e*, D f))+, C g), B b)", "ACDDCB", ["cd", "df", "fg"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e*, D f))+, C g), B b)", "ACDEDDDCB", ["cd!", "de!", "ef!", "df!", "fg!"],
     []),  # a second iteration without E, the first with it
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e{0,2}, D f))+, C g), B b)", "ACDEEDDEDCB", ["cd", "de", "ef", "fd", "fg"],
     []),
    ("SEQ(A a+, B b, NOT SEQ(C c, (SEQ(D d, E e?, D f))+))", "ABCDEDDD", ["cd", "de", "ef", "fd"], []),  # trailing
    # ... and at a group's start or end: an iteration starts or ends at either part
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e?))+, C f), B b)", "ACDEDCB", ["cd", "de", "ed", "df", "ef"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e?))+, C f), B b)", "ACDEDCB", ["cd!", "de!", "df!", "ef!"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d?, E e))+, C f), B b)", "ACDEECB", ["cd", "ce", "de", "ee", "ef"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e*))+, C f), B b)", "ACDEEDCB", ["cd", "de", "ee", "ed", "dd", "df", "ef"],
     []),
    ("SEQ(A a+, B b, NOT SEQ(C c, (SEQ(D d?, E e))+, C f))", "ABCDEEC", ["cd", "ce", "de", "ee", "ef"], []),  # trailing
    ("SEQ(NOT SEQ(C c, (SEQ(D d, E e{0,2}))+, C f), A a+, B b)", "CDEDCAB", ["cd!", "de!", "ed!", "df!", "ef!"], []),
    # a group inside a group: chains of its iterations inside each of the outer one's
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f))+))+, C g), B b)", "ACDEFEFDEFCB",
     ["cd", "de", "ef", "fe", "fd", "fg"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ((SEQ(D d, E e))+, F f))+, C g), B b)", "ACDEDEFDEFCB",
     ["cd", "de", "ed", "ef", "fd", "fg"], []),  # at its start
    ("SEQ(A a+, B b, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f))+))+))", "ABCDEFEFDEF", ["cd", "de", "ef", "fe!", "fd"],
     []),  # trailing: walked back
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f)){2}))+, C g), B b)", "ACDEFEFCB", ["cd", "de", "ef", "fe", "fg"],
     []),  # counted
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f)){2,}))+, C g), B b)", "ACDEFEFEFCB",
     ["cd", "de", "ef!", "fe", "fg"], []),
    ("SEQ(NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f)){1,2}, D h))+, C g), A a+, B b)", "CDEFEFDCAB",
     ["cd", "de", "ef", "fe", "fh", "hg"], []),  # leading
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f))+))*, C g), B b)", "ACDEFEFCB",
     ["cd", "de", "ef", "fe", "fg", "cg"], []),  # in a group that may match nothing
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f))+))*, C g), B b)", "ACEFCB", ["ef", "fe", "fg", "cg"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f))*, D g))+, C h), B b)", "ACDEFEFDDCB",
     ["cd", "de", "ef", "fe", "fg", "dg", "gd", "gh"], []),  # a group that may match nothing inside a group
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f)){0,2}))+, C h), B b)", "ACDEFDEFEFCB",
     ["cd", "de", "ef", "fe", "fd", "dd", "dh", "fh"], []),  # at its end: an iteration ends at D or at F
    ("SEQ(A a+, NOT SEQ(C c, (SEQ((SEQ(E e, F f)){2}, D d))+, C h), B b)", "ACEFEFDEFEFDCB",
     ["ce", "ef", "fe", "fd", "de", "dh"], []),  # a group beginning with a counted group: its count and the outer's
    ("SEQ(A a+, NOT SEQ(C c, (SEQ((SEQ(E e, F f)){1,2}, D d)){2}, C h), B b)", "ACEFDEFEFDCB",
     ["ce", "ef", "fe", "fd", "de", "dh"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ((SEQ(E e, F f))*, D d))+, C h), B b)", "ACEFDDCB",
     ["ce", "cd", "ef", "fe", "fd", "de", "dd", "dh"], []),  # ... with one that may match nothing
    ("SEQ(A a+, B b, NOT SEQ(C c, (SEQ((SEQ(E e, F f)){0,2}, D d))*, C h))", "ABCEFDEFEFDC",
     ["ce", "cd", "ch", "ef", "fe", "fd", "de", "dd", "dh"], []),  # trailing, the outer one too
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e?))*, C f), B b)", "ACDEDCB", ["cd", "de", "ed", "dd", "df", "ef", "cf"],
     []),  # an optional group with an optional end
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d?, E e)){0,2}, C f), B b)", "ACDEECB", ["cd", "ce", "de", "ee", "ef", "cf"], []),
    # beside a part that may match nothing: a chain enters the group past it
    ("SEQ(A a+, NOT SEQ(C c, B x?, (SEQ(D d, E e))+, C f), B b)", "ACBDEDECB", ["cd", "de", "ef"], []),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e))+, B x*, C f), B b)", "ACDEDEBBCB", ["cd", "de", "ef", "xf"], []),
]
STEP = [  # a step's constraint: most often the two events next to each other in time (ids in time order), which
    # keeps an iteration from pairing the first D with the last E and the entry or exit from admitting another
    "{x}.id + 1 = NEXT({y}).id", "{x}.id + 1 = NEXT({y}).id", "{x}.id + 1 = NEXT({y}).id",
    "{x}.v < NEXT({y}).v", "{x}.f > NEXT({y}).f", "({x}.v < NEXT({y}).v OR {x}.f > NEXT({y}).f)"]
ITEMS = ["COUNT(*)", "SUM(b.v)", "MAX(a.f)", "AVG(a.v)"]


@st.composite
def bound_case(draw: Any, noise: int = 6) -> tuple[str, list[dict]]:
    """(query, events): a shape of `BOUND`, its chain with up to `noise` other events among it."""
    pattern, chain, steps, more = draw(st.sampled_from(BOUND))
    where = [(STEP[0] if step[2:] else draw(st.sampled_from(STEP))).format(x=step[0], y=step[1]) for step in steps] + [e for e in more if draw(st.booleans())]
    if not draw(st.integers(0, 3)):
        where.append("[k]")
    within = draw(st.integers(6, 12))
    strategy = draw(st.sampled_from(["skip-till-any-match"] * 4 + ["skip-till-next-match", "contiguous"]))
    text = (f"RETURN {', '.join(ITEMS)} PATTERN {pattern} SEMANTICS {strategy} "
            f"WHERE {' AND '.join(where)} WITHIN {within} s SLIDE {draw(st.integers(1, within))} s")
    return text, chain_events(draw, chain, noise)


(test_a_group_bound_at_both_ends_equals_the_general_engine, test_a_group_bound_at_both_ends_equals_the_oracle,
 test_a_group_bound_at_both_ends_streamed_equals_the_general_engine) = case_tests(bound_case, bound_case(noise=2))
