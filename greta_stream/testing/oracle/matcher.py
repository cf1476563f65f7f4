"""The oracle's pattern matcher: does a bound sequence parse as a pattern?

Shares nothing with the engine (see `greta_stream.testing.oracle`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from greta_stream.query.ast import EventPattern, Kleene, Not, Pattern, Repeat, Seq
from greta_stream.testing.oracle.shapes import counts, nullable

if TYPE_CHECKING:
    from greta_stream.testing.oracle.search import WindowSearch


class Matcher:
    """Does a bound sequence parse as a pattern (middle NOTs included)?

    Ranges `seq[i:j]` may be empty (i == j) for parts that may match nothing.
    Repetitions count iterations; an iteration is one nonempty match of the
    repeated pattern (an empty one changes nothing but the count, and only
    a nullable inner pattern has one). Results are booleans per (part,
    range): the bound sequence is the trend, however many parses it has.
    """

    def __init__(self, ctx: WindowSearch, seq: tuple, eq: dict, nots: bool = True):
        self.ctx, self.seq, self.eq, self.nots = ctx, seq, eq, nots
        self.memo: dict[tuple, bool] = {}

    def _cached(self, key: tuple, compute: Any) -> bool:
        """memo[key], computed once by `compute()`."""
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]

    # -------------------------------------------------- prefixes (NOTs ignored)

    def prefix(self, p: Pattern, i: int) -> bool:
        """seq[i:] is a prefix of some word of p (NOTs ignored: a sound prune)."""
        return self._cached(("prefix", id(p), i), lambda: self._prefix(p, i))

    def _prefix(self, p: Pattern, i: int) -> bool:
        """Uncached `prefix`."""
        n = len(self.seq)
        if i == n:
            return True
        if isinstance(p, EventPattern):
            return n - i == 1 and self.match(p, i, n)
        if isinstance(p, (Kleene, Repeat)):
            inner, _, hi = counts(p)
            return self._iters_prefix(inner, i, hi)
        if isinstance(p, Seq):
            return self._seq_prefix(self.ctx.parts(p), 0, i)
        raise ValueError(f"cannot match {p!r} here")

    def _iters_prefix(self, inner: Pattern, i: int, hi: int | None) -> bool:
        """seq[i:] (nonempty) is a prefix of at most `hi` iterations of inner."""
        def compute() -> bool:
            if hi is not None and hi <= 0:
                return False
            rest = None if hi is None else hi - 1
            return self.prefix(inner, i) or any(
                self.match(inner, i, k) and self._iters_prefix(inner, k, rest)
                for k in range(i + 1, len(self.seq))
            )

        return self._cached(("iters-prefix", id(inner), i, hi), compute)

    def _seq_prefix(self, parts: list, idx: int, i: int) -> bool:
        """seq[i:] is a prefix of some word of SEQ(parts[idx:])."""
        if i == len(self.seq) or self.prefix(parts[idx][1], i):
            return True
        return idx + 1 < len(parts) and any(
            self.match(parts[idx][1], i, k) and self._seq_prefix(parts, idx + 1, k)
            for k in range(i, len(self.seq))
        )

    # -------------------------------------------------- whole matches

    def match(self, p: Pattern, i: int, j: int) -> bool:
        """seq[i:j] (empty when i == j) matches p."""
        return self._cached((id(p), i, j), lambda: self._match(p, i, j))

    def _match(self, p: Pattern, i: int, j: int) -> bool:
        """Uncached `match`."""
        if i == j:
            return nullable(p)
        if isinstance(p, EventPattern):
            event, alias = self.seq[i]
            return j == i + 1 and alias == p.alias and event.type == p.type
        if isinstance(p, (Kleene, Repeat)):
            inner, lo, hi = counts(p)
            return self._iters(inner, i, j, lo, hi)
        if isinstance(p, Seq):
            return self._seq(self.ctx.parts(p), 0, i, j)
        raise ValueError(f"cannot match {p!r} here")

    def _iters(self, inner: Pattern, i: int, j: int, lo: int, hi: int | None) -> bool:
        """seq[i:j] splits into lo..hi iterations of inner."""
        def compute() -> bool:
            if i == j:
                return lo <= 0 or nullable(inner)
            if hi is not None and hi <= 0:
                return False
            rest = None if hi is None else hi - 1
            return any(
                self.match(inner, i, k) and self._iters(inner, k, j, max(lo - 1, 0), rest)
                for k in range(i + 1, j + 1)
            )

        return self._cached(("iters", id(inner), i, j, lo, hi), compute)

    def _seq(self, parts: list, idx: int, i: int, j: int) -> bool:
        """seq[i:j] splits into chunks matching parts[idx:], NOTs respected.

        A chunk may be empty (a part that matches nothing); the parts on both
        sides of a middle NOT match events (the analyzer puts no optional part
        next to a NOT), and the NOT lies between their last and first event.
        """
        part = parts[idx][1]
        if idx == len(parts) - 1:
            return self.match(part, i, j)
        nots = parts[idx + 1][0]
        return any(
            self.match(part, i, k)
            and self._clear(nots, k)
            and self._seq(parts, idx + 1, k, j)
            for k in range(i + 1 if nots else i, j if nots else j + 1)
        )

    def _clear(self, nots: list[Not], k: int) -> bool:
        """No match of any of `nots` lies strictly between seq[k-1] and seq[k]."""
        if not self.nots or not nots:
            return True
        lo, hi = self.seq[k - 1][0].time, self.seq[k][0].time
        return not any(self.ctx.has_match(n, self.eq, lo, hi) for n in nots)

