"""Helpers for the columnar engine tests (tests are not a package: imported by
name, as tests/cet/cet_support.py is).

Comparison with the general engine (`check_against_general`, `assert_same_rows`:
ints of the same type, floats within 1e-9); random queries of the shapes the
columnar engine covers (`queries`: single Kleene `A X+`, `(A X+)+`, `A+`;
GROUP-BY and equivalence attributes; at most one edge predicate `f(X) op
g(NEXT(X))` with op in < <= > >= = and an optional linear transform on either
side; local predicates; WITHIN / SLIDE of whole seconds or of fractions of
one (`1500 ms`, `0.25 s`); every aggregate over an
int and a float attribute) and random streams for them (`streams`: int, float,
mixed and negative times with ties, events of another type, bad events); the
records the oracle takes (`oracle_input`); and micro-batches: a stream split
with its watermarks (`batches_and_watermarks`), driven through a runner
(`drive`) and compared with the general engine driven the same way (`check`).
Dense streams (`dense_events`) and the three tests of a dense suite
(`differential_tests`: general engine, oracle, micro-batches).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, note
from hypothesis import strategies as st
from problems_support import evaluate  # greta_stream.evaluate, its problem warnings checked

from greta_stream import compile_query
from greta_stream.engine import Engine
from greta_stream.engine.columnar.stream import ColumnarStream
from greta_stream.query import ast

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------ comparison


def same_value(expected: Any, got: Any) -> bool:
    """Same type; exact for everything but floats (relative 1e-9)."""
    if type(expected) is not type(got):
        return False
    if isinstance(expected, float):
        return math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12)
    return expected == got


def describe(text: str, events: Any, expected: Any, got: Any, names: tuple[str, str]) -> str:
    lines = ["", "query:", text, "events:"]
    lines += [f"  {e!r}" for e in events] if isinstance(events, list) else [repr(events)]
    for name, rows in zip(names, (expected, got)):
        lines.append(f"{name}:")
        lines += [f"  {r!r}" for r in rows] if isinstance(rows, list) else [f"  {rows!r}"]
    return "\n".join(lines)


def assert_same_rows(text: str, events: Any, expected: list[dict], got: list[dict],
                     names: tuple[str, str] = ("general", "columnar")) -> None:
    msg = describe(text, events, list(expected), list(got), names)
    assert len(got) == len(expected), msg
    for want, have in zip(expected, got):
        assert list(have) == list(want), msg
        assert all(same_value(want[k], have[k]) for k in want), msg


def run_both(text: str, events: Any) -> tuple[Any, Any]:
    """(general, columnar) results; columnar must really run columnar."""
    general = evaluate(text, events, engine="general")
    columnar = evaluate(text, events, engine="columnar")
    assert columnar.engine == "columnar"
    assert general.engine == "general"
    return general, columnar


def check_against_general(text: str, events: list[dict]) -> Any:
    general, columnar = run_both(text, events)
    assert_same_rows(text, events, general, columnar)
    dl_g = [(d.reason, d.record) for d in general.dead_letters]
    dl_c = [(d.reason, d.record) for d in columnar.dead_letters]
    assert dl_c == dl_g, describe(text, events, dl_g, dl_c, ("general dead letters", "columnar dead letters"))
    for key in ("events_in", "events_dead_lettered"):
        assert columnar.metrics.get(key, 0) == general.metrics.get(key, 0), (key, general.metrics, columnar.metrics)
    return columnar


# ------------------------------------------------------ queries


OPS = ("<", "<=", ">", ">=", "=", "!=")


TRANSFORMS = ("", "", "", "{} * 2", "{} + 1", "{} - 3", "{} / 2", "{} * 0.5", "{} + 0.25", "{} * 0.1", "{} / 3",
              "-{}", "2 * {} - 1", "{} + {ref}.v", "{} - {ref}.f * 2")


INT_ATTR, FLOAT_ATTR = "v", "f"


AGG_CHOICES = (("COUNT", None),) + tuple((func, attr) for attr in (INT_ATTR, FLOAT_ATTR)
                                          for func in ("SUM", "AVG", "MIN", "MAX"))


LOCALS = (
    "{a}.v > 0", "{a}.v <= 1", "{a}.f * 2 < 7", "NOT ({a}.v = 1)", "({a}.v < -1 OR {a}.f >= 2)",
    "{a}.v != {a}.f", "1 < {a}.v + {a}.f", "({a}.v > -3 AND NOT {a}.f > 8)",
)


@dataclass
class Spec:
    text: str
    alias: str
    group_by: list[str]
    equiv: list[str]  # extra equivalence attributes (every alias)
    edge_attrs: set[str]
    numeric: set[str]  # attributes the aggregates need as numbers
    within: Fraction
    slide: Fraction


@st.composite
def fine_window(draw, max_within: int, max_slide: int) -> tuple[Fraction, Fraction, str]:
    """(within, slide, clause) of a window that is not whole seconds: steps of
    100, 250 or 500 ms (times of tenths and quarters fall on its bounds)."""
    step = draw(st.sampled_from([100, 250, 500]))
    slide_ms = step * draw(st.integers(1, max(1, min(10, max_slide * 1000 // step))))
    within_ms = slide_ms * draw(st.integers(1, max(1, min(4, max_within * 1000 // slide_ms))))
    if within_ms + step <= max_within * 1000 and draw(st.booleans()):
        within_ms += step  # a SLIDE that does not divide WITHIN
    within, slide = Fraction(within_ms, 1000), Fraction(slide_ms, 1000)
    if draw(st.booleans()):
        clause = f"WITHIN {within_ms} ms" + (f" SLIDE {slide_ms} ms" if slide_ms != within_ms else "")
    else:
        clause = f"WITHIN {float(within)} s SLIDE {float(slide)} s"
    return within, slide, clause


@st.composite
def queries(draw, max_within: int = 20, max_slide: int = 10) -> Spec:
    alias = draw(st.sampled_from(["X", "X", "A"]))
    ev = "A" if alias == "A" else "A X"
    pattern = draw(st.sampled_from([f"{ev}+", f"{ev}+", f"({ev}+)+", f"(({ev}+)+)+"]))

    where: list[str] = []
    edge_attrs: set[str] = set()
    op = draw(st.sampled_from((*OPS, None)))
    if op is not None:
        a = draw(st.sampled_from([INT_ATTR, FLOAT_ATTR]))
        b = draw(st.sampled_from([INT_ATTR, FLOAT_ATTR])) if draw(st.booleans()) else a
        edge_attrs = {a, b}
        tx, ty = draw(st.sampled_from(TRANSFORMS)), draw(st.sampled_from(TRANSFORMS))
        if draw(st.booleans()):
            tx = ""  # usually at most one transformed side
        x_ref, y_ref = alias, f"NEXT({alias})"
        left = (tx or "{}").format(f"{x_ref}.{a}", ref=x_ref)
        right = (ty or "{}").format(f"{y_ref}.{b}", ref=y_ref)
        edge_attrs |= {"v"} if "ref}.v" in tx + ty else set()
        edge_attrs |= {"f"} if "ref}.f" in tx + ty else set()
        if draw(st.booleans()):
            flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}
            left, right, op = right, left, flip[op]
        where.append(f"{left} {op} {right}")

    if draw(st.integers(0, 2)) == 0:  # a local predicate of X (the columnar engine filters with it)
        where.append(draw(st.sampled_from(LOCALS)).format(a=alias))

    group_by = draw(st.sampled_from([[], [], ["g"], ["h"], ["g", "h"], ["h", "g"]]))
    equiv: list[str] = []
    eq_kind = draw(st.sampled_from(["none", "none", "k", "X.k", "k+g"]))
    if eq_kind == "k":
        where.append("[k]")
        equiv = ["k"]
    elif eq_kind == "X.k":
        where.append(f"[{alias}.k]")
        equiv = ["k"]
    elif eq_kind == "k+g":
        where.append("[k, g]")
        equiv = ["k", "g"]
    where = draw(st.permutations(where))

    chosen = draw(st.lists(st.sampled_from(AGG_CHOICES), unique=True, max_size=5))
    aggs = [f"{func}({alias})" if attr is None else f"{func}({alias}.{attr})" for func, attr in chosen]
    aggs = draw(st.permutations([*aggs, "COUNT(*)"]))
    items = [f"{body} AS r{i}" if draw(st.integers(0, 5)) == 0 else body for i, body in enumerate(aggs)]
    items = [g for g in group_by if draw(st.booleans())] + items
    numeric = {attr for _, attr in chosen if attr is not None}

    w = s = draw(st.integers(1, max_within))
    window = f"WITHIN {w} s"
    if draw(st.booleans()):
        s = draw(st.integers(max(1, w // 4) if max_within > 20 else 1, min(max_slide, w)))
        window += f" SLIDE {s} s"
    elif draw(st.integers(0, 4)) == 0:
        window = f"WITHIN {w * 1000} ms"
    within, slide = Fraction(w), Fraction(s)
    if draw(st.integers(0, 3)) == 0:
        within, slide, window = draw(fine_window(max_within, max_slide))

    text = query_text(items, pattern, where, group_by, window)
    return Spec(text, alias, group_by, equiv, edge_attrs, numeric, within, slide)


def query_text(items: list[str], pattern: str, where: list[str], group_by: list[str], window: str) -> str:
    """The query's lines (noted for hypothesis's report)."""
    lines = ["RETURN " + ", ".join(items), "PATTERN " + pattern]
    if where:
        lines.append("WHERE " + " AND ".join(where))
    if group_by:
        lines.append("GROUP-BY " + ", ".join(group_by))
    lines.append(window)
    text = "\n".join(lines)
    note(text)
    return text


# ------------------------------------------------------ streams


def _time_strategy(kind: str) -> st.SearchStrategy:
    ints = st.integers(-12, 36)
    quarters = st.integers(-48, 144).map(lambda k: k / 4)
    tenths = st.integers(-120, 360).map(lambda k: k / 10)  # on the bounds of windows of 100 ms steps
    floats = st.floats(-12, 36, allow_nan=False, allow_infinity=False)
    # a hair before or after a whole second: window bounds in float arithmetic
    near = st.tuples(ints, st.sampled_from([-math.inf, math.inf])).map(lambda p: math.nextafter(p[0], p[1]))
    if kind == "int":
        return ints
    if kind == "quarter":
        return quarters
    if kind == "float":
        return st.one_of(quarters, tenths, floats, near)
    return st.one_of(ints, quarters, tenths, near)  # mixed int and float times


def _offset(draw) -> int:
    """Usually 0; else a large shift of every time (epoch seconds and beyond, within 2**50)."""
    return draw(st.sampled_from([0, 0, 0, 0, 0, 1_700_000_000, -1_700_000_000, 10**12, 2**49]))


SPELLINGS = (0, 1, 1.0, True, False, 0.0, -0.0, 2.5, "1", "p")


def _group_value(kind: str) -> st.SearchStrategy:
    if kind == "int":
        return st.integers(0, 2)
    if kind == "str":
        return st.sampled_from(["p", "q"])
    if kind == "spellings":  # one value spelled several ways: 1 == 1.0 == True
        return st.sampled_from(SPELLINGS)
    return st.sampled_from([0, 1, "p", "q"])


F_MODES = ("pos", "pos", "neg")  # float SUM/AVG: values of one sign (the contract's 1e-9)


ANY_F_MODES = ("pos", "neg", "both", "mixed_types", "wide")


HUGE_OUTSIDE_INT64 = (2**31, -(2**31) - 1, 2**53 - 1, -(2**53), 2**64, -(2**63) - 1, 10**30)  # exact in float64 or refused


HUGE_INT64 = (2**53 + 1, -(2**53) - 1, 2**53, 2**53 + 2, 2**62 + 1, 2**63 - 1, -(2**63))  # int64, past 2**53


def _f_values(mode: str) -> st.SearchStrategy:
    """Values of the float attribute f."""
    small = st.one_of(st.integers(0, 12).map(lambda k: k / 4), st.integers(0, 10**6).map(lambda k: k / 1000),
                      st.integers(1, 100).map(lambda k: k / 7))
    if mode == "pos":
        return small
    if mode == "neg":
        return small.map(lambda x: -x)
    if mode == "both":
        return st.one_of(small, small.map(lambda x: -x))
    if mode == "mixed_types":  # ints and floats in one column
        return st.one_of(small, st.integers(-3, 3))
    if mode == "json":  # as JavaScript's and Go's encoders write numbers: a whole value as an int (39 beside 39.02)
        return st.one_of(small, small.map(lambda x: -x)).map(lambda x: int(x) if x.is_integer() else x)
    return st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)  # "wide": tiny, subnormal, huge


@st.composite
def streams(draw, spec: Spec, max_events: int = 40, dirty: bool | None = None,
            f_modes: tuple[str, ...] = F_MODES, g_kinds: tuple[str, ...] = ("int", "str", "mixed"),
            min_events: int = 0, time_scale: int = 1, huge_ints: tuple[int, ...] = (),
            malformed: bool = True) -> list[dict]:
    n = draw(st.integers(min_events, max_events))
    time_kind = draw(st.sampled_from(["int", "int", "quarter", "float", "mixed"]))
    # few distinct times in a few windows: ties and long trends
    pool = draw(st.lists(_time_strategy(time_kind), min_size=1, max_size=12))
    times = st.sampled_from(pool) if draw(st.booleans()) else _time_strategy(time_kind)
    if time_scale != 1:
        times = times.map(lambda t: t * time_scale)
    offset = _offset(draw)
    if offset:
        times = times.map(lambda t: t + offset)
    v_vals = st.integers(-5, 5) if draw(st.booleans()) else st.integers(-3, 3)
    if huge_ints and draw(st.booleans()):
        v_vals = st.one_of(v_vals, st.sampled_from(huge_ints))
    f_vals = _f_values(draw(st.sampled_from(f_modes)))
    g_kind, h_kind = draw(st.sampled_from(g_kinds)), draw(st.sampled_from(["int", "str"]))
    with_ids = draw(st.booleans())
    events = []
    for i in range(n):
        event = {
            "type": "A" if draw(st.integers(0, 5)) else "B",
            "time": draw(times),
            "v": draw(v_vals),
            "f": draw(f_vals),
            "g": draw(_group_value(g_kind)),
            "h": draw(_group_value(h_kind)),
            "k": draw(st.integers(0, 1)),
        }
        if with_ids:
            event["id"] = f"e{i}"
        events.append(event)
    if dirty is None:
        dirty = draw(st.integers(0, 3)) == 0
    if dirty and events:
        for _ in range(draw(st.integers(1, 3))):
            event = draw(st.sampled_from([e for e in events if isinstance(e, dict)]))
            what = draw(st.sampled_from(["drop", "none", "string", "no_time", "none_time", "bad_time", "bad_type",
                                         "not_scalar", "malformed" if malformed else "drop"]))
            attr = draw(st.sampled_from(["v", "f", "g", "h", "k"]))
            if what == "drop":
                event.pop(attr, None)
            elif what == "none":
                event[attr] = None
            elif what == "string":
                # a string where the aggregates need a number (a bad event); a string
                # in an attribute read only by the edge predicate is a predicate error
                # in the general engine, which the columnar engine does not take
                target = sorted(spec.numeric)
                if target:
                    event[draw(st.sampled_from(target))] = "x"
                else:
                    event.pop(attr, None)
            elif what == "no_time":
                event.pop("time", None)
            elif what == "none_time":
                event["time"] = None
            elif what == "bad_time":
                event["time"] = draw(st.sampled_from([True, False, math.nan, math.inf, -math.inf]))
            elif what == "bad_type":
                if draw(st.booleans()):
                    event.pop("type", None)
                else:
                    event["type"] = draw(st.sampled_from(["", None, 5]))
            elif what == "not_scalar":  # a partition attribute must be a scalar
                event[draw(st.sampled_from(["g", "h", "k"]))] = draw(st.sampled_from([[1], {"a": 1}]))
            else:  # not a dict at all
                events.insert(draw(st.integers(0, len(events))), draw(st.sampled_from(["junk", None, 42, [1, 2]])))
    return events


@st.composite
def cases(draw, max_events: int = 40) -> tuple[str, list[dict]]:
    spec = draw(queries())
    events = draw(streams(spec, max_events))
    return spec.text, events


# ------------------------------------------------------ the oracle's input


def oracle_input(text: str, events: list[Any]) -> list[dict]:
    """The records the oracle takes (dicts, numeric or missing times, scalar
    partition attributes); the others are bad events the engines dead-letter."""
    partition = compile_query(text).common

    def ok(e: Any) -> bool:
        if not isinstance(e, dict):
            return False
        t = e.get("time")
        if t is not None and (isinstance(t, bool) or not math.isfinite(t)):
            return False
        return not any(isinstance(e.get(a), (list, dict)) for a in partition)

    return [e for e in events if ok(e)]


@st.composite
def dense_events(draw: Any, types: str, n_max: int = 30, n_min: int = 0, seconds: int = 12,
                 max_v: int = 3) -> list[dict]:
    """A dense stream over a few `seconds` (whole and quarter seconds: many equal times) of `types`
    (drawn with repetition: "AAB" is two A to a B), attributes v (0..max_v), f, k and g: trends run
    through several iterations, candidates and breakers lie between vertices (sparse streams seldom)."""
    n = draw(st.integers(min(n_min, n_max), n_max))
    times = st.one_of(st.integers(0, seconds), st.integers(0, 4 * seconds).map(lambda q: q / 4))
    return [{"type": draw(st.sampled_from(types)), "time": draw(times), "v": draw(st.integers(0, max_v)),
             "f": draw(st.sampled_from([0.5, 1.25, 2.0])), "k": draw(st.integers(0, 1)), "g": draw(st.integers(0, 1)),
             "id": i} for i in range(n)]


def long_run_events(types: str, n_max: int = 16) -> st.SearchStrategy[list[dict]]:
    """Events about two a second (a few share a time) of `types`, attributes as `dense_events`: the long
    trends through several iterations of each counted or looped group that a dense stream's few distinct
    times seldom hold."""
    @st.composite
    def events(draw: Any) -> list[dict]:
        out, t = [], 0
        for i in range(draw(st.integers(4, n_max))):
            t += draw(st.sampled_from([0, 0.25, 0.5, 0.5, 1]))
            out.append({"type": draw(st.sampled_from(types)), "time": t, "v": draw(st.integers(0, 3)),
                        "f": draw(st.sampled_from([0.5, 1.25, 2.0])), "k": draw(st.integers(0, 1)),
                        "g": draw(st.integers(0, 1)), "id": i})
        return out
    return events()


def long_run_tests(query: st.SearchStrategy[str], types: str, examples: tuple[int, int] = (150, 60)) -> tuple[Any, Any]:
    """Two hypothesis tests over `long_run_events`: the columnar engine against the general engine
    (16 events at most) and the oracle (11); `examples` each."""
    from hypothesis import given, settings

    from greta_stream.query import parse
    from greta_stream.testing.oracle import oracle_rows

    @settings(max_examples=examples[0], **SETTINGS)
    @given(query, long_run_events(types))
    def against_general(text: str, evs: list[dict]) -> None:
        check_against_general(text, evs)

    @settings(max_examples=examples[1], **SETTINGS)
    @given(query, long_run_events(types, n_max=11))
    def against_oracle(text: str, evs: list[dict]) -> None:
        got = evaluate(text, evs, engine="columnar")
        assert got.engine == "columnar"
        assert_same_rows(text, evs, oracle_rows(parse(text), evs), got, ("oracle", "columnar"))

    return against_general, against_oracle


def dense_query(draw: Any, pattern: str, edges: list[str], locals_: list[str], items: list[str],
                strategies: tuple[str, ...] = ast.STRATEGIES) -> str:
    """A query over `dense_events` of `pattern`: some of its `edges` (each twice as likely in as out) and of
    the `locals_` of its aliases, maybe `[k]`, maybe GROUP-BY g (then g first among the `items`), a
    strategy of `strategies`, a window of 3 to 12 s sliding 1 s up to all of it."""
    aliases = {w.split("{")[0].rstrip("+*?,)") for w in pattern.replace("(", " ").split() if w[0].islower()}
    where = [e for e in edges if draw(st.integers(0, 2))]
    where += [p for p in locals_ if p[0] in aliases and draw(st.integers(0, 1))]
    if draw(st.booleans()):
        where.append("[k]")
    group = draw(st.sampled_from(["", "g"]))
    within = draw(st.integers(3, 12))
    slide = draw(st.integers(1, within))
    return (f"RETURN {', '.join([*([group] if group else []), *items])} PATTERN {pattern} "
            f"SEMANTICS {draw(st.sampled_from(strategies))} " + (f"WHERE {' AND '.join(where)} " if where else "")
            + (f"GROUP-BY {group} " if group else "") + f"WITHIN {within} s SLIDE {slide} s")


Shape = tuple[str, list[str], str]  # (pattern, edge predicates it may take, alias its aggregates read)
ROUNDING = [0.1, 0.2, 0.3, 0.6, 0.7, 1, 2, 3, 0.30000000000000004]  # decimals whose sums, products round; no 0


def rounding_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    """Events of types A, B, E over 12 s whose `f` rounds in arithmetic (`ROUNDING`), ints `v` beside."""
    event = st.fixed_dictionaries({"type": st.sampled_from("AAABBE"), "time": st.integers(0, 12),
                                   "v": st.integers(0, 3), "f": st.sampled_from(ROUNDING),
                                   "k": st.integers(0, 1), "g": st.integers(0, 1)})
    return st.lists(event, max_size=n_max)


def shape_queries(shapes: list[Shape], locals_: list[str], items: list[str]) -> st.SearchStrategy[str]:
    """`dense_query`s of one of `shapes`, under each strategy; `items` with `{agg}` for the shape's alias."""
    @st.composite
    def query(draw: Any) -> str:
        pattern, edges, agg = draw(st.sampled_from(shapes))
        return dense_query(draw, pattern, edges, locals_, [i.format(agg=agg) for i in items], ast.STRATEGIES)

    return query()


def assert_columnar_shapes(shapes: list[Shape], with_edges: bool = False) -> None:
    """Each shape runs on the columnar engine under each strategy (`with_edges`: with all its edge predicates)."""
    from greta_stream import RunSpec

    for pattern, edges, _ in shapes:
        where = f"WHERE {' AND '.join(edges)} " if with_edges and edges else ""
        for strategy in ast.STRATEGIES:
            text = f"RETURN COUNT(*) PATTERN {pattern} SEMANTICS {strategy} {where}WITHIN 10 s"
            assert RunSpec.create(text).columnar_refusal == "", text


# ------------------------------------------------------ micro-batches


def batches_and_watermarks(draw: Any, events: list[Any]) -> list[tuple[list[Any], Any]]:
    """Events split into micro-batches (in time order, shuffled within), each
    with the watermark declared before it and reached after it."""
    rnd = random.Random(draw(st.integers(0, 2**16)))
    timed = sorted((e for e in events if isinstance(e, dict) and isinstance(e.get("time"), (int, float))
                    and not isinstance(e.get("time"), bool) and math.isfinite(e["time"])), key=lambda e: e["time"])
    rest = [e for e in events if not any(e is x for x in timed)]
    n = draw(st.integers(1, 6))
    cuts = sorted(rnd.sample(range(len(timed) + 1), min(n - 1, len(timed) + 1)))
    parts = [timed[a:b] for a, b in zip([0, *cuts], [*cuts, len(timed)])]
    for e in rest:
        parts[rnd.randrange(len(parts))].append(e)
    if len(parts) > 1 and draw(st.booleans()):  # stragglers: events that come a batch or more later
        for _ in range(draw(st.integers(1, 5))):
            i = rnd.randrange(len(parts) - 1)
            if parts[i]:
                e = parts[i].pop(rnd.randrange(len(parts[i])))
                parts[rnd.randrange(i + 1, len(parts))].append(e)
    delay = draw(st.sampled_from([0, 0.5, 1, 3, 10, math.inf]))
    out, high, watermark = [], -math.inf, -math.inf
    for part in parts:
        rnd.shuffle(part)
        high = max([high, *(e["time"] for e in part if any(e is x for x in timed))])  # Spark's max event time
        if delay != math.inf and high != -math.inf:
            watermark = max(watermark, high - delay)
        out.append((part, watermark))
    return out


def drive(stream_of: Any, text: str, plan: list[tuple[list[Any], Any]], restore: bool) -> tuple[list, list]:
    """Rows per call and dead letters of a stream driven through `plan`."""
    dead: list = []
    cq = compile_query(text)
    runner = stream_of(cq, dead.append)
    calls: list = []
    declared = -math.inf
    for records, watermark in plan:
        if restore:
            runner = type(runner).restore(cq, runner.snapshot(), dead_letter=dead.append)
        runner.expect(declared)
        runner.add_many(records)
        calls.append(runner.advance(watermark))
        declared = watermark
    calls.append(runner.finish())
    return calls, [(d.reason, d.record, d.detail) for d in dead]


def general(cq: Any, sink: Any) -> Engine:
    return Engine(cq, dead_letter=sink)


def columnar(cq: Any, sink: Any) -> ColumnarStream:
    return ColumnarStream(cq, dead_letter=sink)


def check(text: str, events: list[Any], plan: list[tuple[list[Any], Any]], restore: bool,
          make: Any = columnar) -> None:
    """The stream `make` builds (default: the columnar stream) gives the general engine's rows and dead letters."""
    want_calls, want_dead = drive(general, text, plan, restore)
    got_calls, got_dead = drive(make, text, plan, restore)
    assert len(got_calls) == len(want_calls)
    for want, got in zip(want_calls, got_calls):
        assert_same_rows(text, events, want, got)
    assert got_dead == want_dead


def differential_tests(query: st.SearchStrategy[str], events: Any, examples: tuple[int, int, int] = (200, 120, 60),
                       oracle_events: int = 10) -> tuple[Any, Any, Any]:
    """Three hypothesis tests of a dense-stream suite: the columnar engine against the general engine
    (`events()`), the oracle (`events(n_max=oracle_events)`) and micro-batches with restores; `examples`
    each. A test module binds them to names of its own (`test_..._equals_the_general_engine = ...`)."""
    from hypothesis import given, settings

    from greta_stream.query import parse
    from greta_stream.testing.oracle import oracle_rows

    @settings(max_examples=examples[0], **SETTINGS)
    @given(query, events())
    def against_general(text: str, evs: list[dict]) -> None:
        check_against_general(text, evs)

    @settings(max_examples=examples[1], **SETTINGS)
    @given(query, events(n_max=oracle_events))
    def against_oracle(text: str, evs: list[dict]) -> None:
        got = evaluate(text, evs, engine="columnar")
        assert got.engine == "columnar"
        assert_same_rows(text, evs, oracle_rows(parse(text), evs), got, ("oracle", "columnar"))

    @settings(max_examples=examples[2], **SETTINGS)
    @given(st.data())
    def streamed(data: st.DataObject) -> None:
        text, evs = data.draw(query), data.draw(events())
        check(text, evs, batches_and_watermarks(data.draw, evs), restore=data.draw(st.booleans()))

    return against_general, against_oracle, streamed


def chain_events(draw: Any, chain: str, noise: int, groups: bool = False) -> list[dict]:
    """The events of `chain` (a type per event, a trend of a suite's shape) with up to `noise` events of types
    A-E among them, about two a second (a few at one time), ids in time order; attributes as `dense_events`
    (k mostly 0, so that `[k]` seldom cuts the chain; g 0, or 0 or 1 with `groups`)."""
    types = list(chain)
    for _ in range(draw(st.integers(0, noise))):
        types.insert(draw(st.integers(0, len(types))), draw(st.sampled_from("ABCDE")))
    events, t = [], 0.0
    for i, type_ in enumerate(types):
        t += draw(st.sampled_from([0.5, 0.25, 0.5, 1.0, 0.0]))
        events.append({"type": type_, "time": t, "id": i, "v": draw(st.integers(0, 3)),
                       "k": draw(st.sampled_from([0, 0, 0, 1])), "f": draw(st.sampled_from([0.5, 1.25, 2.0])),
                       "g": draw(st.integers(0, 1)) if groups else 0})
    return events


def case_tests(cases: Callable[[], st.SearchStrategy[tuple[str, list[dict]]]],
               oracle_cases: st.SearchStrategy[tuple[str, list[dict]]],
               examples: tuple[int, int, int] = (300, 100, 60)) -> tuple[Any, Any, Any]:
    """`differential_tests` for a suite that draws the query and its events together (`cases()`: (query,
    events), a chain of the query's own shape with other events among it; `oracle_cases` small enough for
    the oracle)."""
    from hypothesis import given, settings

    from greta_stream.query import parse
    from greta_stream.testing.oracle import oracle_rows

    @settings(max_examples=examples[0], **SETTINGS)
    @given(cases())
    def against_general(case: tuple[str, list[dict]]) -> None:
        check_against_general(*case)

    @settings(max_examples=examples[1], **SETTINGS)
    @given(oracle_cases)
    def against_oracle(case: tuple[str, list[dict]]) -> None:
        text, evs = case
        got = evaluate(text, evs, engine="columnar")
        assert got.engine == "columnar"
        assert_same_rows(text, evs, oracle_rows(parse(text), evs), got, ("oracle", "columnar"))

    @settings(max_examples=examples[2], **SETTINGS)
    @given(st.data())
    def streamed(data: st.DataObject) -> None:
        text, evs = data.draw(cases())
        check(text, evs, batches_and_watermarks(data.draw, evs), restore=data.draw(st.booleans()))

    return against_general, against_oracle, streamed


STOCK = ("RETURN sector, COUNT(*), SUM(S.price), MAX(S.price) PATTERN Stock S+ "
         "WHERE [company, sector] AND S.price > NEXT(S).price GROUP-BY sector WITHIN 60 s SLIDE 20 s")


def stock(n: int, seed: int, t0: float = 0.0, price: Any = float) -> list[dict]:
    rnd = random.Random(seed)
    return [{"type": "Stock", "time": t0 + i * 0.75, "company": rnd.randrange(4), "sector": rnd.randrange(2),
             "price": price(rnd.randrange(90, 110))} for i in range(n)]
