"""Indexes of predecessor aggregates for edge predicates.

GRETA (section 4) combines the aggregates of every earlier vertex that an
edge predicate admits, a scan that is O(n) per event. For a predicate
`key(x) op probe(y)` with op in `< <= > >= =` the admitted predecessors are a
prefix or suffix of the predecessors ordered by key, or one key's bucket, so
their combined aggregate is one query:

- `FenwickIndex` (order ops): a Fenwick tree over the ranks of the sorted
  distinct keys; each node holds the packed sum (lanes.py) of the vertices in
  its range. A prefix is O(log n) adds; a suffix is the total minus a prefix.
- `HashIndex` (`=`): key -> packed sum.
- `BucketIndex` (any op, when the edge has more predicates than the indexed
  one): candidates by key, each checked with the rest of the predicates.

One index per (run, transition) serves every window: a value holds all the
windows of its vertex as lanes, aligned at the index's `base` window, so a
query returns every window's aggregate at once and the new vertex keeps the
lanes of the windows it falls in (those before its first window shift out).
Closed windows' lanes are shifted out the same way, and the index is rebuilt
from the live vertices when its base falls too far behind. Middle negation
drops a predecessor once x.time < M_N(y.time); M_N only grows with time, so
removal is permanent: `evict_before` subtracts those vertices in time order.

Keys that are not safe to compare (strings against numbers, errors) go to a
side list checked with the full predicate, so results and the
`predicate_errors` metric equal the scan's. Indexes are derived state: not
pickled, rebuilt on first use after a restore.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

from greta_stream.engine.plan import UNSAFE, IndexSpec


def aligned(x: int, kmin: int, base: int, lw: int) -> int:
    """A packed value whose lane 0 is window kmin, realigned to lane 0 = base."""
    return x << ((kmin - base) * lw) if kmin >= base else x >> ((base - kmin) * lw)


class Index:
    """Common part: base window, side list, eviction order."""

    def __init__(self, spec: IndexSpec, base: int, lw: int) -> None:
        self.spec, self.base, self.lw = spec, base, lw
        self.side: list[Any] = []  # vertices whose key is not safe
        self.order: list[tuple[Any, Any]] = []  # (vertex, key) in time order, for eviction
        self.evicted = 0
        self.threshold: Any = None

    def insert(self, u: Any) -> bool:
        """Add a vertex; False if its key is outside a Fenwick domain (rebuild)."""
        key = self.spec.key(u.attrs)
        if key is UNSAFE:
            self.side.append(u)
            return True
        if key is None:
            return True  # NaN: no comparison holds
        if not self._add(key, u, 1):
            return False
        self.order.append((u, key))
        return True

    def evict_before(self, threshold: Any) -> None:
        """Drop vertices older than a middle-negation threshold (never coming back)."""
        self.threshold = threshold
        order, i = self.order, self.evicted
        while i < len(order) and order[i][0].time < threshold:
            u, key = order[i]
            self._add(key, u, -1)
            i += 1
        self.evicted = i
        if i > 64 and i * 2 > len(order):
            del order[:i]
            self.evicted = 0

    def _add(self, key: Any, u: Any, sign: int) -> bool:
        raise NotImplementedError


class FenwickIndex(Index):
    def __init__(self, spec: IndexSpec, base: int, lw: int, keys: list[Any]) -> None:
        super().__init__(spec, base, lw)
        self.keys = keys
        self.tree = [0] * (len(keys) + 1)
        self.total = 0

    def _add(self, key: Any, u: Any, sign: int) -> bool:
        keys = self.keys
        r = bisect_left(keys, key)
        if r == len(keys) or keys[r] != key:
            return False
        x = aligned(u.agg, u.kmin, self.base, self.lw)
        if sign < 0:
            x = -x
        tree = self.tree
        n = len(tree)
        i = r + 1
        while i < n:
            tree[i] += x
            i += i & -i
        self.total += x
        return True

    def _prefix(self, r: int) -> int:
        tree = self.tree
        s = 0
        while r:
            s += tree[r]
            r &= r - 1
        return s

    def query(self, probe: Any) -> int:
        """Packed sum of the vertices whose key `op` probe holds."""
        op = self.spec.op
        if op == "<":
            return self._prefix(bisect_left(self.keys, probe))
        if op == "<=":
            return self._prefix(bisect_right(self.keys, probe))
        if op == ">":
            return self.total - self._prefix(bisect_right(self.keys, probe))
        return self.total - self._prefix(bisect_left(self.keys, probe))


class HashIndex(Index):
    def __init__(self, spec: IndexSpec, base: int, lw: int) -> None:
        super().__init__(spec, base, lw)
        self.sums: dict[Any, int] = {}

    def _add(self, key: Any, u: Any, sign: int) -> bool:
        x = aligned(u.agg, u.kmin, self.base, self.lw)
        self.sums[key] = self.sums.get(key, 0) + (x if sign > 0 else -x)
        return True

    def query(self, probe: Any) -> int:
        return self.sums.get(probe, 0)


class BucketIndex(Index):
    """Candidates by key (sorted for order ops), for edges with a residual."""

    def __init__(self, spec: IndexSpec, base: int, lw: int) -> None:
        super().__init__(spec, base, lw)
        self.buckets: dict[Any, list[Any]] = {}
        self.keys: list[Any] = []  # sorted distinct keys (order ops)

    def _add(self, key: Any, u: Any, sign: int) -> bool:
        if sign < 0:
            return True  # candidates are filtered by time at query time
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = []
            if self.spec.op != "=":
                keys = self.keys
                keys.insert(bisect_left(keys, key), key)
        bucket.append(u)
        return True

    def candidates(self, probe: Any) -> list[Any]:
        op = self.spec.op
        if op == "=":
            return self.buckets.get(probe, [])
        keys = self.keys
        if op == "<":
            sel = keys[: bisect_left(keys, probe)]
        elif op == "<=":
            sel = keys[: bisect_right(keys, probe)]
        elif op == ">":
            sel = keys[bisect_right(keys, probe):]
        else:
            sel = keys[bisect_left(keys, probe):]
        return [u for k in sel for u in self.buckets[k]]


def build(spec: IndexSpec, base: int, lw: int, verts: list[Any], extra_keys: list[Any]) -> Index:
    """An index of `verts` (time order); `extra_keys` widen a Fenwick domain."""
    if spec.residual is not None:
        idx: Index = BucketIndex(spec, base, lw)
    elif spec.op == "=":
        idx = HashIndex(spec, base, lw)
    else:
        domain = {k for k in (spec.key(u.attrs) for u in verts) if k is not None and k is not UNSAFE}
        domain.update(k for k in extra_keys if k is not None and k is not UNSAFE)
        idx = FenwickIndex(spec, base, lw, sorted(domain))
    for u in verts:
        idx.insert(u)
    return idx
