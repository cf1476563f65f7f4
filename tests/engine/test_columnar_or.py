"""ORs in edge predicates on the columnar engine: what it takes, what it hands to the general engine and why.

The rows are checked against the general engine and the oracle by the hypothesis tests of
test_columnar_seq.py, whose edge predicates nest comparisons in ORs and ANDs; here, the edges of that.
"""

from __future__ import annotations

import random
import re

import pytest
from columnar_support import check_against_general

from greta_stream import RunSpec
from greta_stream.engine.columnar import Unsupported, columnar_plan
from greta_stream.engine.columnar.union import core_of

HEAD = "RETURN COUNT(*), SUM(x.v) PATTERN SEQ(A a, A x+) WHERE "
TAIL = " WITHIN 8 s SLIDE 2 s"


def _plan(where: str):  # noqa: ANN202
    return columnar_plan(RunSpec.create(HEAD + where + TAIL).query)


def _events(seed: int, n: int = 40) -> list[dict]:
    rnd = random.Random(seed)
    return [{"type": "A", "time": rnd.randrange(20), "v": rnd.randrange(6), "f": rnd.random()} for _ in range(n)]


def test_an_or_of_ands_is_one_conjunct_of_clauses_in_one_scanned_store() -> None:
    plan = _plan("(x.v < NEXT(x).v OR (x.f > NEXT(x).f AND x.v != NEXT(x).v)) AND a.v <= NEXT(x).v")
    loop, step = sorted(plan.scans, key=lambda sc: (sc.src, sc.dst))[::-1]
    assert (loop.src, loop.dst) == (1, 1) and loop.groups == ((0, 0), (0, 1), (0, 1)) and loop.disjunctive
    assert (step.src, step.dst) == (0, 1) and step.groups == ((0, 0),) and not step.disjunctive
    assert plan.edge is None  # an OR is never the indexed comparison


@pytest.mark.parametrize("where, why", [
    ("NOT (x.v < NEXT(x).v OR x.v > 3)", "not a comparison of X with NEXT(Y)"),
    ("(x.v < NEXT(x).v OR x.v > 3)", "not a comparison of X with NEXT(Y)"),
    ("(" + " OR ".join(f"x.v + {i} < NEXT(x).v" for i in range(17)) + ")", "more than 16 comparisons"),
])
def test_what_the_kernel_does_not_take_goes_to_the_general_engine_saying_why(where: str, why: str) -> None:
    with pytest.raises(Unsupported, match=re.escape(why)):
        _plan(where)
    spec = RunSpec.create(HEAD + where + TAIL)
    assert spec.columnar is None and why in str(spec.columnar_refusal)


def test_a_query_with_an_or_runs_columnar_alone_and_joins_no_union() -> None:
    """Its rows equal the general engine's; a union of queries shares no traversal with it."""
    where = "(x.v < NEXT(x).v OR x.f > NEXT(x).f)"
    for seed in range(5):
        check_against_general(HEAD + where + TAIL, _events(seed))
    with pytest.raises(Unsupported, match="an OR in an edge predicate"):
        core_of(columnar_plan(RunSpec.create("RETURN COUNT(*) PATTERN A x+ WHERE " + where + TAIL).query))


NEGATED = ["NOT (x.v < NEXT(x).v)", "NOT (x.v = NEXT(x).v)", "NOT (x.v != NEXT(x).v)",
           "NOT (x.v >= NEXT(x).v OR x.f < NEXT(x).f)", "NOT (x.v > NEXT(x).v AND NOT (x.f <= NEXT(x).f))",
           "NOT (a.v > NEXT(x).v) AND NOT NOT (x.v < NEXT(x).v)"]


@pytest.mark.parametrize("where", NEGATED)
def test_a_not_over_edge_comparisons_turns_them_around(where: str) -> None:
    """`NOT (x.v < NEXT(x).v)` is `x.v >= NEXT(x).v` on the finite numbers the kernel compares, and a NOT
    over an AND or an OR goes down to its comparisons: the same rows as the general engine."""
    assert RunSpec.create(HEAD + where + TAIL).columnar is not None
    for seed in range(8):
        check_against_general(HEAD + where + TAIL, _events(seed))


def test_a_not_that_turns_into_the_same_comparisons_gives_the_same_plan() -> None:
    assert _plan("NOT (x.v < NEXT(x).v)").edge == _plan("x.v >= NEXT(x).v").edge
