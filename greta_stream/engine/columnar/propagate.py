"""What one event of the columnar kernel (`kernel.run`) reads and computes:
the nodes of its predecessors (`predecessors`, `scan`), its aggregates from
them (`vertex`: GRETA's propagation), its windows and lanes in a block
(`span`). Inlined into the kernel (`inline="always"`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from greta_stream.engine.columnar.limbs import MASK as _MASK
from greta_stream.engine.columnar.limbs import SHIFT as _SHIFT
from greta_stream.engine.columnar.limbs import normalize as _normalize
from greta_stream.engine.columnar.limbs import significant as _significant
from greta_stream.engine.columnar.limbs import take_node as _take_node
from greta_stream.engine.columnar.pairs import ERROR as _ERROR
from greta_stream.engine.columnar.pairs import TRUE as _TRUE
from greta_stream.engine.columnar.pairs import judge as _judge_pairs

ANY_MATCH, NEXT_MATCH, CONTIGUOUS = 0, 1, 2  # `kernel.Wiring.strategy` (SEMANTICS section 8)


@njit(cache=True, inline="always")
def predecessors(path, s, probe, reads, keyed, keys, point, m, gen, storegen, gread, scanned):  # noqa: ANN001, ANN202
    """Write to `path` the nodes an event of state s reads (the stores of its
    state's predecessors: a running total whole, a generation store when its
    vertices are of the event's generation `gread`, the keyed store by its
    probe); return how many. A scanned store is not read here (`scan`)."""
    npath = 0
    for js in range(reads.shape[1]):
        if not reads[s, js]:
            continue
        if scanned[js]:
            continue  # read vertex by vertex (`scan`)
        if js != keyed:
            if gen[js] and storegen[js] != gread:
                continue  # a negated event came since its vertices: none is a predecessor
            path[npath] = m + 1 + js
            npath += 1
        elif point:
            if probe >= 0:
                idx = np.searchsorted(keys, probe)
                if idx < m and keys[idx] == probe:
                    path[npath] = idx + 1
                    npath += 1
        else:
            i = np.searchsorted(keys, probe)  # local keys admitted: global rank < probe
            while i > 0:
                path[npath] = i
                npath += 1
                i -= i & (-i)
    return npath


@njit(cache=True, inline="always")
def scan(path, npath, v, e, prev, ev, wiring, js, vert_ev, lo, hi, taken, nxt, nv, judged, paired):  # noqa: ANN001, ANN202
    """Append to `path` the vertices (nodes lo..hi-1) of scanned store js that
    its edge predicates admit for event v (of time stamp e..), of v's
    generation when the store is across a middle NOT; return the new length.

    Under contiguous only the vertices at the partition's previous time stamp
    are read: from `ev.flo[v]` on, or from the task's time stamp before v's
    (its first event `prev`) when every event of the pattern's types is a vertex. Under skip-till-next-match a vertex is
    read until a time stamp takes it (`taken`: the first event of that time
    stamp, whose events all may read it); once time passes it, it leaves the
    store's waiting list for good (`nxt`, from `nv[js, 2]`), so the work per
    event follows the vertices still waiting for their next event.

    With pair comparisons (`paired`, which the kernel passes as a constant: a
    store without them keeps no trace of their code, which would slow its loop
    threefold) each is first judged for every vertex at once (`pairs.judge`);
    `judged` is an empty array the kernel passes otherwise."""
    first = 0
    n_pred = wiring.pointp.shape[0]
    while first < n_pred and wiring.pred_store[first] != js:
        first += 1
    # one order comparison (`S.price > NEXT(S).price`): its column alone, without the conjunct loops
    lone = (first < n_pred and wiring.pointp[first] == 0 and wiring.pred_conj[first] == 0
            and (first + 1 == n_pred or wiring.pred_store[first + 1] != js))
    probe = ev.gqs[v, first] if lone else 0
    gen = wiring.gen[js]
    gread = ev.gread[v]
    if wiring.strategy == CONTIGUOUS:
        f = ev.flo[v] if ev.flo[v] >= 0 else prev
        i = hi
        while i > lo and vert_ev[i - 1] >= f:
            i -= 1
        lo = i
    if paired:
        judged = _judge(v, ev.pv, wiring, js, first, n_pred, vert_ev, lo, hi)
    if wiring.strategy != NEXT_MATCH:
        for i in range(lo, hi):
            u = vert_ev[i]
            if gen and ev.gjoin[u] != gread:
                continue
            if ev.grs[u, first] < probe if lone else _admits(u, i - lo, v, ev, wiring, js, first, n_pred, judged, paired):
                path[npath] = i
                npath += 1
        return npath
    i = nv[js, 2]
    while i < lo:  # none of its windows is the event's: never again
        i = nxt[i]
    nv[js, 2] = i
    prev = -1
    while i < hi:
        nx = nxt[i]
        tk = taken[i]
        if tk >= 0 and tk != e:  # an earlier time stamp took it: it waits no more
            if prev < 0:
                nv[js, 2] = nx
            else:
                nxt[prev] = nx
        else:
            u = vert_ev[i]
            if not (gen and ev.gjoin[u] != gread) and (ev.grs[u, first] < probe if lone else
                                                        _admits(u, i - lo, v, ev, wiring, js, first, n_pred, judged, paired)):
                taken[i] = e
                path[npath] = i
                npath += 1
            prev = i
        i = nx
    return npath


@njit(cache=True, inline="always")
def _judge(v, values, wiring, js, first, n_pred, vert_ev, lo, hi):  # noqa: ANN001, ANN202
    """(predicates, hi - lo) int8: row q, for each pair comparison q of store js, whether it holds
    for the vertices lo..hi-1 as predecessors of event v (`pairs.judge`: TRUE, FALSE, or ERROR where
    a divisor is 0)."""
    judged = np.empty((n_pred, hi - lo), np.int8)
    q = first
    while q < n_pred and wiring.pred_store[q] == js:
        if wiring.pointp[q] == 3:
            _judge_pairs(judged[q], v, values, wiring.steps, wiring.steps_at[q], wiring.steps_at[q + 1], vert_ev[lo:hi])
        q += 1
    return judged


@njit(cache=True, inline="always")
def _admits(u, k, v, ev, wiring, js, first, n_pred, judged, paired):  # noqa: ANN001, ANN202
    """Whether the edge predicates of scanned store js (from its first, `first`) hold for (u, v). A
    predicate column compares ranks (`grs[u, p] < gqs[v, p]` for an order, `==` for an equality, `!=`
    for `!=`) or, a pair comparison, reads what `pairs.judge` found for u (the k-th vertex read;
    only where `paired`); the store's columns are
    contiguous, by conjunct and then clause (`pred_conj`, `pred_clause`): u is admitted when every
    conjunct has a clause whose columns all hold (an OR of ANDs per predicate, AND-ed)."""
    grs, gqs, pointp, pred_store = ev.grs, ev.gqs, wiring.pointp, wiring.pred_store
    conj, clause = wiring.pred_conj, wiring.pred_clause
    ok = True  # every conjunct so far had a clause that holds
    q = first
    while ok and q < n_pred and pred_store[q] == js:
        g = conj[q]
        if paired:  # Python evaluates this conjunct: a divisor of 0 in it raises (`pairs` docstring)
            r = q
            while r < n_pred and pred_store[r] == js and conj[r] == g:
                if pointp[r] == 3 and judged[r, k] == _ERROR:
                    raise ZeroDivisionError("division by zero in an edge predicate")
                r += 1
        held = False  # some clause of conjunct g holds
        while q < n_pred and pred_store[q] == js and conj[q] == g:
            c = clause[q]
            all_hold = not held  # a clause after one that held is skipped
            while q < n_pred and pred_store[q] == js and conj[q] == g and clause[q] == c:
                if all_hold:
                    if pointp[q] == 1:
                        all_hold = grs[u, q] == gqs[v, q]
                    elif pointp[q] == 2:
                        all_hold = grs[u, q] != gqs[v, q]
                    elif paired and pointp[q] == 3:
                        all_hold = judged[q, k] == _TRUE
                    else:
                        all_hold = grs[u, q] < gqs[v, q]
                q += 1
            if all_hold:
                held = True
        ok = held
    return ok


@njit(cache=True, inline="always")
def vertex(acc, nodes, used, path, npath, hi, sig, carry, j0, j1, limbs, ndig, own, starts, first_lane,  # noqa: ANN001, ANN202
            masked, per_q, lm, startq):
    """An event's aggregates in lanes j0..j1-1 of `acc` (GRETA's propagation):
    the sum of its predecessors' nodes, plus one trend it starts in every
    lane from `first_lane` on (if `starts`), plus count * its own multiplier
    `own` (in 32-bit digits) in cells 1..; carried, with sig[c] the
    significant limbs of cell c. True if some cell needs more than `limbs`.

    With query lanes (`masked`; lane = query * per_q + window), a lane the
    event is not a vertex of for its query (`lm` false) is zero, and the
    event starts a trend only in its queries' lanes that start at its state
    (`startq[query]`), in its windows from `first_lane` on (a union has no leading NOT: -1)."""
    ncell = acc.shape[0]
    # 1. how many limbs each cell's sum can need: fewer than 2**32 values of
    # `used` limbs carry into one more; cell c adds count * value (ndig digits)
    for c in range(ncell):
        hi[c] = 1
        for r in range(npath):
            if used[path[r], c] > hi[c]:
                hi[c] = used[path[r], c]
    top0 = min(limbs, hi[0] + 1)
    for c in range(ncell):
        hi[c] = min(limbs, (hi[c] if c == 0 else max(hi[c], top0 + ndig[c])) + 1)
        acc[c, : hi[c], j0:j1] = 0
    # 2. sum the predecessors, start a trend, carry the count
    for r in range(npath):
        _take_node(acc, nodes, used, path[r], j0, j1)
    if masked:
        for j in range(j0, j1):
            if not lm[j]:  # not this query's vertex here: it neither counts nor passes counts on
                for c in range(ncell):
                    for lb in range(hi[c]):
                        acc[c, lb, j] = 0
            elif startq[j // per_q] and j % per_q >= first_lane:  # after a leading NOT's latest match
                acc[0, 0, j] += 1
    elif starts:
        for j in range(max(j0, first_lane), j1):
            acc[0, 0, j] += 1  # the event starts a trend in each of its windows
    if _normalize(acc, 0, hi[0], j0, j1, carry):
        return True
    sig[0] = _significant(acc, 0, hi[0], j0, j1)
    # 3. the other cells: + count * the event's own multiplier, in 32-bit digits
    n = j1 - j0
    for c in range(1, ncell):
        for d in range(ndig[c]):
            k = own[c - 1, d]
            if k == 0:
                continue
            if sig[0] + d + (1 if k > 1 else 0) >= hi[c]:  # only when hi[c] is all the limbs
                return True
            if n == 1:
                for lb in range(sig[0]):
                    x = acc[0, lb, j0]
                    if k == 1:
                        acc[c, lb + d, j0] += x
                    else:
                        x = x * k
                        acc[c, lb + d, j0] += x & _MASK
                        acc[c, lb + d + 1, j0] += x >> _SHIFT
                continue
            for lb in range(sig[0]):
                dst = acc[c, lb + d, j0:j1]
                src = acc[0, lb, j0:j1]
                if k == 1:  # COUNT(X): the count itself
                    for j in range(n):
                        dst[j] += src[j]
                else:  # the product's halves: limbs never overflow before the one carry pass
                    up = acc[c, lb + d + 1, j0:j1]
                    for j in range(n):
                        x = src[j] * k
                        dst[j] += x & _MASK
                        up[j] += x >> _SHIFT
        if _normalize(acc, c, hi[c], j0, j1, carry):
            return True
        sig[c] = _significant(acc, c, hi[c], j0, j1)
    return False


@njit(cache=True, inline="always")
def span(kmin, kmax, k0, lanes, s, wiring):  # noqa: ANN001, ANN202
    """(w0, w1, j0, j1): a vertex's windows w0..w1-1 in the block of `lanes`
    windows from k0, and its lanes j0..j1-1 (with query lanes, from its
    state's first query's window w0 to its last query's window w1 - 1)."""
    w0 = max(kmin, k0) - k0
    w1 = min(kmax, k0 + lanes - 1) - k0 + 1
    if not wiring.masked:
        return w0, w1, w0, w1
    return w0, w1, wiring.qlo[s] * lanes + w0, (wiring.qhi[s] - 1) * lanes + w1


@njit(cache=True, inline="always")
def neutral_mm(acc_mm, lm, j0, j1, mmax):  # noqa: ANN001, ANN202
    """MIN/MAX lanes of queries the event is no vertex of: neutral (nothing to pass on)."""
    for q in range(mmax.shape[0]):
        for j in range(j0, j1):
            if not lm[j]:
                acc_mm[q, j] = -np.inf if mmax[q] else np.inf
