"""The oracle's selection strategies (SEMANTICS section 8) over one window's events.

Skip-till-next-match and contiguous are checked pair by pair on the trend's
adjacent events; skip-till-any-match keeps every pair. Shares nothing with
the engine (see `greta_stream.testing.oracle`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from fractions import Fraction

from greta_stream.query.ast import ANY_MATCH, CONTIGUOUS, NEXT_MATCH, Not, Pattern
from greta_stream.testing.oracle.expressions import Event
from greta_stream.testing.oracle.rules import Rules
from greta_stream.testing.oracle.shapes import pattern_shape

HasMatch = Callable[[Not, dict, Fraction, Fraction], bool]  # some match of a NOT in (lo, hi) of a partition


class StrategyChecks:
    """Does an adjacent pair of a trend keep the selection strategy?"""

    def __init__(self, rules: Rules, events: list[Event], pattern: Pattern | None, has_match: HasMatch):
        self.rules, self.events, self.has_match = rules, events, has_match
        self.times = [e.time for e in events]
        self.follow = pattern_shape(pattern).follow if pattern is not None else {}
        every = set(rules.alias_type)
        # contiguity is judged within the partition of the attributes that apply to every alias
        self.every_attrs = sorted(a for a, aliases in rules.equiv.items() if aliases >= every)

    def strategy_ok(self, seq: tuple, eq: dict, strategy: str) -> bool:
        """Every adjacent pair of the trend keeps the strategy (SEMANTICS section 8)."""
        return all(self.pair_ok(seq[k - 1], seq[k], eq, strategy) for k in range(1, len(seq)))

    def _between(self, lo: Fraction, hi: Fraction) -> list[Event]:
        """Events of the window with lo < time < hi."""
        return self.events[bisect_right(self.times, lo) : bisect_left(self.times, hi)]

    def pair_ok(self, prev: tuple[Event, str], cur: tuple[Event, str], eq: dict, strategy: str) -> bool:
        """The adjacent pair (prev, cur) keeps `strategy` in a trend of partition `eq`.

        With fewer equivalence values than the trend's final ones (a prefix in
        the search) a rejection is final: more values only shrink the negative
        matches a candidate must avoid.
        """
        if strategy == ANY_MATCH:
            return True
        between = self._between(prev[0].time, cur[0].time)
        if strategy == CONTIGUOUS:
            return not any(self._breaks_contiguity(z, eq) for z in between)
        if strategy == NEXT_MATCH:
            return not any(self._is_candidate(prev, cur[1], z, eq) for z in between)
        raise ValueError(f"unknown selection strategy {strategy!r}")

    def _breaks_contiguity(self, z: Event, eq: dict) -> bool:
        """z (a pattern type: others are not here) lies in the trend's partition."""
        return all(z.data.get(attr) == eq.get(attr) for attr in self.every_attrs)

    def _is_candidate(self, prev: tuple[Event, str], alias: str, z: Event, eq: dict) -> bool:
        """z could have been bound to `alias` right after prev (section 8's candidate)."""
        x, x_alias = prev
        if z.type != self.rules.alias_type[alias] or not self.rules.local_ok(z, alias):
            return False
        if self.rules.extend_equiv(eq, z, alias) != eq:  # a value of its own: another partition
            return False
        if not self.rules.edge_ok(prev, (z, alias)):
            return False
        steps = self.follow.get((x_alias, alias), set())
        return any(
            not any(self.has_match(n, eq, x.time, z.time) for n in crossed) for crossed in steps
        )
