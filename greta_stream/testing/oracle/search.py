"""The oracle's per-window trend search: depth-first over a window's events.

Shares nothing with the engine (see `greta_stream.testing.oracle`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from fractions import Fraction

from greta_stream.query.ast import ANY_MATCH, Not, Pattern, Seq, pattern_aliases
from greta_stream.testing.oracle.expressions import Event, Window
from greta_stream.testing.oracle.matcher import Matcher
from greta_stream.testing.oracle.rules import Rules, frozen
from greta_stream.testing.oracle.shapes import seq_parts
from greta_stream.testing.oracle.strategies import StrategyChecks


class WindowSearch:
    """Trend search over the time-sorted events of one window."""

    def __init__(
        self,
        rules: Rules,
        events: list[Event],
        window: Window,
        pattern: Pattern | None = None,
        strategy: str = ANY_MATCH,
    ):
        self.rules, self.events, self.window = rules, events, window
        self.spans: dict[tuple, set[tuple[Fraction, Fraction]]] = {}
        self._parts: dict[int, list[tuple[list[Not], Pattern]]] = {}
        self.strategy = strategy
        self.checks = StrategyChecks(rules, events, pattern, self.has_match)

    def parts(self, seq: Seq) -> list[tuple[list[Not], Pattern]]:
        """`seq_parts(seq)`, once per SEQ node."""
        key = id(seq)
        if key not in self._parts:
            self._parts[key] = seq_parts(seq)
        return self._parts[key]

    def search(
        self, pattern: Pattern, fixed: dict, strategy: str = ANY_MATCH
    ) -> Iterator[tuple[tuple, dict]]:
        """Yield (seq, eq) for every trend of `pattern` agreeing with `fixed`.

        `strategy` other than skip-till-any-match prunes every extension whose
        new adjacent pair breaks it (`pair_ok`); the caller checks the whole
        trend again with its final equivalence values.
        """
        by_type: dict[str, list[str]] = defaultdict(list)
        for ep, negative in pattern_aliases(pattern):
            if not negative:
                by_type[ep.type].append(ep.alias)
        yield from self._dfs(pattern, by_type, 0, (), dict(fixed), strategy)

    def _dfs(self, pattern, by_type, start, seq, eq, strategy) -> Iterator[tuple[tuple, dict]]:
        """Extend `seq` by later events in every admissible way."""
        if seq and Matcher(self, seq, eq).match(pattern, 0, len(seq)):
            yield seq, eq
        for idx in range(start, len(self.events)):
            event = self.events[idx]
            if seq and event.time <= seq[-1][0].time:
                continue
            for alias in by_type.get(event.type, ()):
                longer = seq + ((event, alias),)
                eq2 = self._admit(seq, eq, event, alias)
                if eq2 is None:
                    continue
                if seq and not self.checks.pair_ok(seq[-1], longer[-1], eq2, strategy):
                    continue
                if Matcher(self, longer, eq2, nots=False).prefix(pattern, 0):
                    yield from self._dfs(pattern, by_type, idx + 1, longer, eq2, strategy)

    def _admit(self, seq, eq, event, alias) -> dict | None:
        """Equivalence values after appending (event, alias), or None if illegal."""
        if not self.rules.local_ok(event, alias):
            return None
        if seq and not self.rules.edge_ok(seq[-1], (event, alias)):
            return None
        return self.rules.extend_equiv(eq, event, alias)

    # ---------------------------------------------- negation

    def has_match(
        self, neg: Not, eq: dict, lo: Fraction, hi: Fraction, lo_inclusive: bool = False
    ) -> bool:
        """Some match of `neg` in this window/partition starts after lo, ends before hi."""
        return any(
            (lo <= first if lo_inclusive else lo < first) and last < hi for first, last in self._spans(neg, eq)
        )

    def _spans(self, neg: Not, eq: dict) -> set[tuple[Fraction, Fraction]]:
        """(first time, last time) of every match of `neg.inner` in partition `eq`."""
        key = (id(neg), frozen(eq))
        if key not in self.spans:
            self.spans[key] = {
                (s[0][0].time, s[-1][0].time) for s, _ in self.search(neg.inner, eq)
            }
        return self.spans[key]



def _split_outer(pattern: Pattern) -> tuple[Not | None, Pattern, Not | None]:
    """(leading NOT, core pattern, trailing NOT) of the outermost pattern."""
    if not isinstance(pattern, Seq):
        return None, pattern, None
    parts = list(pattern.parts)
    lead = parts[0] if isinstance(parts[0], Not) else None
    if lead is not None:
        del parts[0]
    trail = parts[-1] if parts and isinstance(parts[-1], Not) else None
    if trail is not None:
        del parts[-1]
    core = parts[0] if len(parts) == 1 else Seq(tuple(parts))
    return lead, core, trail


def window_trends(
    rules: Rules,
    pattern: Pattern,
    events: list[Event],
    window: Window,
    strategy: str = ANY_MATCH,
) -> list[tuple[tuple, dict]]:
    """Every trend (seq, equivalence values) of the query in one window.

    `strategy` (SEMANTICS section 8) filters the trends of the positive
    pattern; negative patterns (middle, leading, trailing) are searched
    under skip-till-any-match whatever it is.
    """
    lead, core, trail = _split_outer(pattern)
    ctx = WindowSearch(rules, events, window, core, strategy)
    out = []
    for seq, eq in ctx.search(core, {}, strategy):
        first, last = seq[0][0].time, seq[-1][0].time
        if lead and ctx.has_match(lead, eq, window.start, first, lo_inclusive=True):
            continue
        if trail and ctx.has_match(trail, eq, last, window.end):
            continue
        if not ctx.checks.strategy_ok(seq, eq, strategy):
            continue
        out.append((seq, eq))
    return out
