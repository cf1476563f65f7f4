"""Packed aggregates at their promotion boundaries (engine/lanes.py).

Round 2 made cells whole bytes (so a widening repack copies byte columns),
scales float cells in steps of 32 bits, and routes run events by key. These
tests pin the exactness those changes must keep:

- `Layout._repack_bytes` equals unpack-then-pack for any cells and widths;
- closed forms for `A+` with no predicate over n events of one window:
  COUNT(*) = 2**n - 1, COUNT(A) = n * 2**(n-1), SUM(A.x) = 2**(n-1) * sum(x),
  checked as n crosses 2**63 (counts promote past int64) with int values and
  with floats whose binary exponents keep getting finer (each one rescales
  the float cells), so SUM is the correctly rounded exact value;
- the same stream split into micro-batches at every watermark gives the
  same rows (promotion in the middle of a batch or between batches).
"""

from __future__ import annotations

import random
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from problems_support import evaluate  # greta_stream.evaluate, its problem warnings checked

from greta_stream.engine import Engine
from greta_stream.engine.lanes import Layout

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
QUERY = "RETURN COUNT(*), COUNT(A), SUM(A.x), AVG(A.x) PATTERN A+ WITHIN 1000 seconds"


@settings(max_examples=200, **SETTINGS)
@given(
    hc=st.sampled_from([30, 60, 120]),
    a=st.sampled_from([0, 32, 64]),
    grow=st.tuples(st.sampled_from([1, 2]), st.sampled_from([0, 32])),
    lanes=st.integers(1, 70),
    seed=st.integers(0, 2**32),
)
def test_byte_repack_equals_unpack_pack(hc: int, a: int, grow: tuple[int, int], lanes: int, seed: int) -> None:
    rnd = random.Random(seed)
    old = Layout(("n", "c0", "fc1", "fp1"), hc, a, 2)
    new = Layout(("n", "c0", "fc1", "fp1", "ip1"), hc * grow[0], a + grow[1], 2)
    cells = [
        {c: rnd.getrandbits(hc - 1 if c in ("n", "c0", "fc1") else hc + a - 1) for c in old.cells}
        for _ in range(lanes)
    ]
    x = old.pack(cells)
    assert old._repack_bytes(x, new) == new.pack(old.unpack(x))
    assert new.unpack(old.repack(x, new))[: len(cells)] == [{**c, "ip1": 0} for c in cells]


def _float(q: Fraction) -> float:
    try:
        return float(q)
    except OverflowError:  # the engine reports SUM past float range as +-inf
        return float("inf") if q > 0 else float("-inf")


def _closed_form(xs: list[int | float]) -> dict[str, object]:
    n = len(xs)
    exact = Fraction(2) ** (n - 1) * sum(Fraction(x) for x in xs)
    any_float = any(isinstance(x, float) for x in xs)
    total = _float(exact) if any_float else int(exact)
    return {
        "count": 2**n - 1,
        "count_A": n * 2 ** (n - 1),
        "sum_A_x": total,
        "avg_A_x": _float(exact / (n * 2 ** (n - 1))),
    }


def _events(xs: list[int | float]) -> list[dict]:
    return [{"type": "A", "time": i, "x": x} for i, x in enumerate(xs)]


def _check(xs: list[int | float]) -> None:
    rows = evaluate(QUERY, _events(xs))
    assert len(rows) == 1
    got = {k: rows[0][k] for k in ("count", "count_A", "sum_A_x", "avg_A_x")}
    want = _closed_form(xs)
    assert got == want
    assert type(got["sum_A_x"]) is type(want["sum_A_x"])


def test_counts_cross_int64_exactly() -> None:
    for n in (62, 63, 64, 65, 70):
        _check(list(range(1, n + 1)))
        _check([(-1) ** i * (2**40 + i) for i in range(n)])


def test_float_sums_rescale_exactly() -> None:
    # Each value has a finer binary exponent than the last: 3.5 (2**-1),
    # 0.1 (2**-55), 1e-20, 2**-100, 1e-300 (2**-1049), then coarse ones again.
    xs: list[int | float] = [3.5, 0.1, 1e-20, 2.0**-100, 1e-300, 1.25, 7, 123.456, -0.3, 5e-324]
    _check(xs)
    _check(xs * 7)  # 70 events: counts past 2**63, floats at every scale
    _check([0.1] * 65)


@settings(max_examples=60, **SETTINGS)
@given(
    xs=st.lists(
        st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False, width=64)),
        min_size=1,
        max_size=70,
    ),
    cut=st.data(),
)
def test_any_values_and_batches(xs: list[int | float], cut: st.DataObject) -> None:
    want = _closed_form(xs)
    marks = sorted(cut.draw(st.lists(st.integers(0, len(xs)), max_size=4)))
    engine = Engine(QUERY)
    done = 0
    for m in marks:
        for e in _events(xs)[done:m]:
            engine.add(e)
        done = max(done, m)
        assert engine.advance(m) == []
    for e in _events(xs)[done:]:
        engine.add(e)
    rows = engine.finish()
    got = {k: rows[0][k] for k in ("count", "count_A", "sum_A_x", "avg_A_x")}
    assert got == want
    assert type(got["sum_A_x"]) is type(want["sum_A_x"])
