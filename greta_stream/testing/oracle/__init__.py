"""Brute-force reference oracle for the query semantics (docs/QUERY_LANGUAGE.md).

This module enumerates event trends one by one, straight from the written
semantics, and aggregates them naively. It is the yardstick the engine is
tested against, so it must share NO logic with the engine, the compiler or
the analyzer: it imports nothing from `greta_stream` except the AST module
and has its own pattern matcher, expression evaluator, window assignment and
negation handling. It is exponential by design; use it on streams of about
ten events.

Public API:
- `enumerate_trends(query, events)`: every trend counted by COUNT(*), per
  (window_start, window_end, group values);
- `oracle_rows(query, events)`: the result rows of docs/QUERY_LANGUAGE.md section 4;
- `complete_trends(query, events)`: the maximal trends of section 5.

Choices where docs/QUERY_LANGUAGE.md is silent:
- a binding is a trend when SOME parse of it satisfies every middle NOT
  (with distinct aliases all parses create the same adjacencies anyway);
- a trend is complete when no trend of the same window and partition has a
  STRICT superset of its events (trends with equal event sets but different
  bindings are all kept);
- an edge predicate with only `NEXT(Y)` references constrains every adjacent
  pair whose second event is bound to `Y`; a predicate without references
  must hold for every trend;
- events with a missing or null needed attribute (or a non-number for
  SUM/MIN/MAX/AVG) are skipped as bad events; times must be numbers.

Selection strategies and bounded repetition (SEMANTICS.md section 8):
- the matcher enumerates the skip-till-any-match trends of the positive
  pattern (bounded repetition counts iterations, a part that matches nothing
  makes its SEQ neighbours adjacent, edge predicates hold for every pair of
  consecutive events); `Query.strategy` then keeps a trend only if every
  adjacent pair (x, y) passes it (skip-till-next-match: y has no candidate;
  contiguous: no event of a pattern type of the trend's partition lies
  strictly between x and y in time);
- negative patterns (middle, leading, trailing) keep plain existence of a
  match, i.e. skip-till-any-match, whatever the query's strategy;
- the step that makes (x, y) adjacent is read off the AST from their aliases
  (Glushkov first/last/follow sets, each step with the middle NOTs it
  crosses: none for a repetition's loop); should two steps join the same
  aliases with different NOTs, z is a candidate when it satisfies the
  negation conditions of at least one of them (for a pair that passed its
  own middle NOT this always holds: a match between x and z is also between
  x and y);
- a candidate lies in the trend's partition when it carries the trend's
  values of the equivalence/GROUP-BY attributes that apply to y's alias;
  contiguity uses the attributes that apply to every alias (negative ones
  included) and ignores local predicates;
- the SEMANTICS "(and run)" of a candidate is read as the window: only the
  window's good events of the pattern's types are candidates or breakers.
"""

from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction
from typing import Any

from greta_stream.query.aggregates import function
from greta_stream.query.ast import Aggregate, GroupItem, Query
from greta_stream.testing.oracle.matching import Event, Rules, Window, frozen, holds, window_trends

Trend = tuple  # tuple[tuple[event_id, alias], ...] in time order
Key = tuple  # (window_start, window_end, group_values)

__all__ = ["Trend", "complete_trends", "enumerate_trends", "oracle_rows"]


# ------------------------------------------------------------ events, windows


def _is_number(value: Any) -> bool:
    """int or float, not bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _prepare(
    query: Query,
    rules: Rules,
    events: list[dict],
    type_field: str,
    time_field: str,
    id_field: str,
) -> list[Event]:
    """Time-sorted events whose type is in the pattern, bad events dropped."""
    types = set(rules.alias_type.values())
    numeric = _aggregate_attrs(query, rules)
    out = []
    for pos, raw in enumerate(events):
        etype, time = raw.get(type_field), raw.get(time_field)
        if etype not in types or time is None:
            continue
        if not _is_number(time):
            raise ValueError(f"oracle supports numeric times only, got {time!r}")
        aliases = [a for a, t in rules.alias_type.items() if t == etype]
        needed = set().union(*(rules.alias_attrs.get(a, set()) for a in aliases))
        if any(raw.get(attr) is None for attr in needed):
            continue
        if any(not _is_number(raw.get(attr)) for attr in numeric.get(etype, ())):
            continue
        eid = raw[id_field] if raw.get(id_field) is not None else pos
        out.append(Event(eid, etype, Fraction(repr(time)) if isinstance(time, float) else Fraction(time), raw))
    return sorted(out, key=lambda e: e.time)


def _aggregate_attrs(query: Query, rules: Rules) -> dict[str, set[str]]:
    """Event type -> attributes that SUM/MIN/MAX/AVG read (numbers only)."""
    out: dict[str, set[str]] = defaultdict(set)
    for item in query.returns:
        if isinstance(item, Aggregate) and item.alias is not None and item.attr is not None:
            out[rules.alias_type[item.alias]].add(item.attr)
    return out


def _windows(query: Query, events: list[Event]) -> list[Window]:
    """Every window [k*slide, k*slide+within) holding at least one event."""
    within = Fraction(query.within.seconds)
    slide = Fraction(query.slide_or_within.seconds)
    ks: set[int] = set()
    for event in events:
        ks.update(
            range(
                math.floor((event.time - within) / slide) + 1,
                math.floor(event.time / slide) + 1,
            )
        )
    return [Window(k * slide, k * slide + within) for k in sorted(ks)]


def _bound(value: Fraction) -> int | float:
    """A window bound as a row shows it: the int if integral, else the first
    float that reads (as it prints) as the bound or more, so that float times
    t with start <= t < end are the window's (past 15 significant digits the
    nearest float can read below the bound: 2**49 + 0.3 rounds to a float that
    prints as 2**49 + 0.2)."""
    if value.denominator == 1:
        return int(value)
    f = float(value)
    while Fraction(repr(f)) < value:
        f = math.nextafter(f, math.inf)
    return f


def _sort_value(value: Any) -> tuple:
    """Sort key that tolerates mixed group value types."""
    if isinstance(value, (int, float)):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    return (2, repr(value))


def _sort_key(key: Key) -> tuple:
    """Sort key of (window_start, window_end, group values)."""
    return key[0], key[1], tuple(_sort_value(v) for v in key[2])


# ------------------------------------------------------------ collection


def _collect(
    query: Query,
    events: list[dict],
    type_field: str = "type",
    time_field: str = "time",
    id_field: str = "id",
) -> dict[Key, list[tuple]]:
    """(window_start, window_end, group) -> [(seq, eq), ...], sorted by key."""
    rules = Rules(query)
    prepared = _prepare(query, rules, events, type_field, time_field, id_field)
    if not all(holds(expr, {}) for expr in rules.constants):
        return {}
    out: dict[Key, list[tuple]] = defaultdict(list)
    for window in _windows(query, prepared):
        inside = [e for e in prepared if window.start <= e.time < window.end]
        for seq, eq in window_trends(rules, query.pattern, inside, window, query.strategy):
            group = tuple(eq[attr] for attr in query.group_by)
            out[(_bound(window.start), _bound(window.end), group)].append((seq, eq))
    return {key: out[key] for key in sorted(out, key=_sort_key)}


def _as_trend(seq: tuple) -> Trend:
    """A bound sequence as ((event_id, alias), ...)."""
    return tuple((event.eid, alias) for event, alias in seq)


def enumerate_trends(
    query: Query,
    events: list[dict],
    *,
    type_field: str = "type",
    time_field: str = "time",
    id_field: str = "id",
) -> dict[Key, list[Trend]]:
    """Every trend counted by COUNT(*), per (window_start, window_end, group)."""
    found = _collect(query, events, type_field, time_field, id_field)
    return {key: [_as_trend(seq) for seq, _ in items] for key, items in found.items()}


def complete_trends(
    query: Query, events: list[dict], **field_names: str
) -> dict[Key, list[Trend]]:
    """Maximal trends (docs/QUERY_LANGUAGE.md section 5), judged per partition, keyed per group."""
    out: dict[Key, list[Trend]] = {}
    for key, items in _collect(query, events, **field_names).items():
        partitions: dict[tuple, list[tuple]] = defaultdict(list)
        for seq, eq in items:
            partitions[frozen(eq)].append(seq)
        kept = [seq for seq, eq in items if _is_maximal(seq, partitions[frozen(eq)])]
        if kept:
            out[key] = [_as_trend(seq) for seq in kept]
    return out


def _is_maximal(seq: tuple, others: list[tuple]) -> bool:
    """No trend in `others` has a strict superset of seq's events."""
    mine = {id(event) for event, _ in seq}
    return not any(mine < {id(event) for event, _ in other} for other in others)


# ------------------------------------------------------------ aggregates


def oracle_rows(query: Query, events: list[dict], **field_names: str) -> list[dict]:
    """Result rows of docs/QUERY_LANGUAGE.md section 4, sorted by window and group."""
    renames: dict[str, str] = {}
    for item in query.returns:
        if isinstance(item, GroupItem):
            renames.setdefault(item.attr, item.column)
    rows = []
    for (start, end, group), items in _collect(query, events, **field_names).items():
        row: dict[str, Any] = {"window_start": start, "window_end": end}
        for attr, value in zip(query.group_by, group):
            row[renames.get(attr, attr)] = value
        seqs = [seq for seq, _ in items]
        for item in query.returns:
            if isinstance(item, Aggregate):
                row[item.column] = _aggregate(item, seqs)
        rows.append(row)
    return rows


def _aggregate(agg: Aggregate, seqs: list[tuple]) -> Any:
    """One aggregate over the trends of a (window, group)."""
    fn = function(agg.func)  # query/aggregates.py: what each function is over the trends themselves
    if agg.alias is None:
        return len(seqs)
    bound = [event for seq in seqs for event, alias in seq if alias == agg.alias]
    if fn.value is None:  # COUNT(X): the bound events themselves
        return fn.oracle(bound)
    return fn.oracle([event.data[agg.attr] for event in bound])
