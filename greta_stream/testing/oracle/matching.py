"""The oracle's matcher: expressions, predicates, bindings of a pattern in one window.

Shares nothing with the engine (see `greta_stream.testing.oracle`): its own
expression evaluator, predicate rules and depth-first pattern matcher, one
concern a module:

- `expressions`: the events and windows, and the expression evaluator (`holds`);
- `rules`: the query's predicates sorted into local, edge and constant ones,
  and its partitions (`Rules`, `frozen`);
- `shapes`: a pattern's SEQ parts, repetition counts, nullability and
  Glushkov first/last/follow sets;
- `matcher`: does a bound sequence parse as a pattern (middle NOTs included);
- `strategies`: the selection strategies, pair by pair (SEMANTICS section 8);
- `search`: the depth-first trend search of one window (`window_trends`).

This module gathers the names the oracle reads.
"""

from __future__ import annotations

from greta_stream.testing.oracle.expressions import Event, Window, holds
from greta_stream.testing.oracle.rules import Rules, frozen
from greta_stream.testing.oracle.search import window_trends
from greta_stream.testing.oracle.shapes import nullable

__all__ = ["Event", "Rules", "Window", "frozen", "holds", "nullable", "window_trends"]
