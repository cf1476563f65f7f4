"""The aggregate functions are one table (query/aggregates.py): every part reads it.

Each function of the table parses in any case, gives through `evaluate` (both
engines) what the brute-force oracle gives, and types its Spark column as the
table says; a function made of the propagated fields is one entry: one added to
the table here is parsed, compiled, evaluated and checked without any other
change; an unknown one is named with the known ones.
"""

from __future__ import annotations

import pytest

from greta_stream import QueryError, RunSpec, evaluate
from greta_stream.query import aggregates, parser
from greta_stream.query.parser import parse
from greta_stream.testing.oracle import oracle_rows

EVENTS = [{"type": "A", "time": t, "p": p, "g": t % 2} for t, p in enumerate([3, 1, 4, 1, 5, 9, 2, 6], start=1)]


def _query(items: str) -> str:
    return f"RETURN g, {items} PATTERN A S+ WHERE S.p < NEXT(S).p GROUP-BY g WITHIN 6 s SLIDE 2 s"


def _rows(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted(r.items())) for r in rows)


@pytest.mark.parametrize("name", list(aggregates.FUNCTIONS))
@pytest.mark.parametrize("engine", ["auto", "general"])
def test_every_function_of_the_table_gives_the_oracles_rows(name: str, engine: str) -> None:
    item = "COUNT(*)" if name == "COUNT" else f"{name.lower()}(S.p)" if aggregates.function(name).value else f"{name}(S)"
    text = _query(f"{item}, COUNT(S)")
    got = evaluate(RunSpec.create(text, engine=engine), EVENTS)
    assert got and _rows(got) == _rows(oracle_rows(parse(text), EVENTS))


@pytest.fixture
def total(monkeypatch: pytest.MonkeyPatch) -> None:
    """TOTAL(X.a): a new function made of the sum field, added to the table alone."""
    table = dict(aggregates.FUNCTIONS)
    table["TOTAL"] = aggregates.Function("TOTAL", "sum", "sum", "exact_if_integral", aggregates.FUNCTIONS["SUM"].oracle)
    monkeypatch.setattr(aggregates, "FUNCTIONS", table)
    parser._lark.cache_clear()
    yield
    parser._lark.cache_clear()


def test_a_function_made_of_propagated_fields_is_one_table_entry(total: None) -> None:
    text = _query("TOTAL(S.p), sum(S.p)")
    for engine in ("auto", "general"):
        rows = evaluate(RunSpec.create(text, engine=engine), EVENTS)
        assert rows and all(r["total_S_p"] == r["sum_S_p"] for r in rows)
        assert _rows(rows) == _rows(oracle_rows(parse(text), EVENTS))


def test_the_spark_column_of_each_function_is_typed_by_the_table() -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.types import DoubleType, LongType, StringType

    from greta_stream.spark.typed import _payload_schema

    spec = RunSpec.create(_query("COUNT(*), COUNT(S), SUM(S.p), AVG(S.p), MIN(S.p), MAX(S.p)"))
    schema, exact = _payload_schema(spec, {"p": LongType(), "g": LongType()})
    types = {f.name: f.dataType for f in schema.fields}
    assert types["count"] == types["count_S"] == types["sum_S_p"] == StringType()
    assert exact == {"count", "count_S", "sum_S_p"}
    assert types["avg_S_p"] == DoubleType() and types["min_S_p"] == types["max_S_p"] == LongType()
    schema, exact = _payload_schema(spec, {"p": DoubleType()})
    assert {f.name: f.dataType for f in schema.fields}["sum_S_p"] == DoubleType() and "sum_S_p" not in exact


@pytest.mark.parametrize("text", ["RETURN STDDEV(S.p) PATTERN A S+ WITHIN 6 s",
                                  "RETURN g, median(S.p) AS m PATTERN A S+ GROUP-BY g WITHIN 6 s"])
def test_an_unknown_function_is_named_with_the_known_ones(text: str) -> None:
    with pytest.raises(QueryError) as err:
        evaluate(text, EVENTS)
    message = str(err.value)
    word = "STDDEV" if "STDDEV" in text else "median"
    assert f"unknown aggregate function {word!r}; the functions are COUNT, SUM, AVG, MIN, MAX" in message
    problem = err.value.problems[0]
    assert (problem.line, problem.column) == (1, text.index(word) + 1)
