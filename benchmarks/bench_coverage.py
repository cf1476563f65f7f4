"""Coverage benchmark: events/s of ``greta_stream.evaluate`` (engine "auto") per query shape.

How fast is a query that the columnar kernels do not cover (yet), next to the
Q1-like query they do? On the same stock events, for each shape below and at
2, 12 and 60 windows per event (``WITHIN 5 minutes SLIDE 150 / 25 / 5
seconds``), one table gives the seconds of one ``evaluate(query, frame)``
call, events/s, ``x ref`` (events/s / the reference's events/s at the same
windows per event: 1 is as fast as the reference, 0.05 twenty times slower),
the engine that ran (``rows.engine``), worker memory per event (the child's
peak RSS minus its RSS just before the timed call, divided by the events),
the result rows and the decimal digits of the largest ``COUNT(*)``.

Shapes, all ``WHERE [company, sector]``, ``GROUP-BY sector``, ``RETURN
sector, COUNT(*)`` and one aggregate:

1. ``ref``: ``PATTERN Stock S+ ... AND S.price > NEXT(S).price``, AVG(S.price);
2. ``two-edges``: ref ``AND S.volume >= NEXT(S).volume``;
3. ``trailing-not``: ``SEQ(Stock S+, NOT Stock N)`` with ``N.volume > 2000``
   (the top ~1% of volumes; the same type at a positive and a negative
   alias is allowed and meaningful with that local predicate, docs/QUERY_LANGUAGE.md
   section 3: a trend is dropped if such a trade of its company follows it
   in the window);
4. ``middle-not``: ``SEQ(Stock A, NOT Halt H, Stock S+)``;
5. ``seq-max``: ``SEQ(Stock A, Stock S+)`` with MAX(S.price);
6. ``seq-avg``: ``SEQ(Stock A, Stock S+)`` with AVG(S.price);
7. ``seq-cross``: ``SEQ(Stock A, Stock S+)`` with ``A.price < NEXT(S).price``
   (an edge predicate from A to the first S) besides S's own edge. The
   language has no plain ``A.price < S.price``: a predicate is local (one
   alias) or an edge (``X.a`` and ``NEXT(Y).b``), so the cross-alias
   comparison is written as an edge.

Events: ``generators.stock_frame(n, companies=20, sectors=4, rate=4)``: one
trade per company every 5 s on average, 60 per company and 1,200 in all per
5-minute window; a seeded 1% of the rows are relabelled ``Halt`` (same
company, sector, time), the negative events of shape 4. Every shape reads
the same DataFrame.

Every measurement runs in a fresh child (this script with the hidden
``--one`` flag), one after another: it warms up on events of the same
kind (seed + 1; 4,000 with ``engine="columnar"`` when the kernels cover the
query, so numba's kernels are loaded even where trends need a rare Halt, then
400 with the measured engine), builds
the events, runs ``gc.collect()``, reports its RSS and says "ready"; the
parent then starts the ``--budget-s`` clock (past it the child is killed:
``> budget``) and the child times the one call. ``--repeat`` keeps the
fastest of that many children. With ``--events`` <= 2000 (``--quick``) the
child also runs ``engine="general"`` on the same events after the timing and
compares the rows (ints exact, floats to 1e-9 relative); a mismatch is printed
loudly and the exit status is 1.

Usage::

    python benchmarks/bench_coverage.py [--events 20000] [--wpe 2,12,60] [--budget-s 120]
        [--repeat 1] [--seed 0] [--json out.json] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import benchlib  # benchmarks/ is sys.path[0] when run as a script
from benchlib import Outcome, Table

ROOT = Path(__file__).resolve().parent.parent

WINDOW_S = 300  # WITHIN 5 minutes
STOCK = {"companies": 20, "sectors": 4, "rate": 4.0}
HALT_SHARE = 0.01
WARMUP_EVENTS = 400
# the kernels' warm-up: enough events that a shape whose trends need a rare type (a Halt) has some, so the
# kernels load before the clock (below that the kernels may see no vertex and load in the timed call)
KERNEL_WARMUP_EVENTS = 4000
COMPARE_MAX_EVENTS = 2000
HEAD = "RETURN sector, COUNT(*), {agg} PATTERN {pattern} WHERE [company, sector] AND {where} GROUP-BY sector "
EDGE = "S.price > NEXT(S).price"
SIX = ("C.price < NEXT(D).price AND C.volume > NEXT(D).volume AND C.price != NEXT(D).volume AND C.volume < "
       "NEXT(D).price * 100 AND C.price * 2 > NEXT(D).price AND C.volume * 2 > NEXT(D).volume")  # on a negated step
SHAPES: dict[str, tuple[str, str, str]] = {  # name: (aggregate, pattern, WHERE after [company, sector])
    "ref": ("AVG(S.price)", "Stock S+", EDGE),
    "two-edges": ("AVG(S.price)", "Stock S+", f"{EDGE} AND S.volume >= NEXT(S).volume"),
    "trailing-not": ("AVG(S.price)", "SEQ(Stock S+, NOT Stock N)", f"{EDGE} AND N.volume > 2000"),
    "middle-not": ("AVG(S.price)", "SEQ(Stock A, NOT Halt H, Stock S+)", EDGE),
    "seq-max": ("MAX(S.price)", "SEQ(Stock A, Stock S+)", EDGE),
    "seq-avg": ("AVG(S.price)", "SEQ(Stock A, Stock S+)", EDGE),
    "seq-cross": ("AVG(S.price)", "SEQ(Stock A, Stock S+)", f"{EDGE} AND A.price < NEXT(S).price"),
    "ne-edge": ("AVG(S.price)", "Stock S+", f"{EDGE} AND S.volume != NEXT(S).volume"),
    "or-edge": ("AVG(S.price)", "Stock S+", f"({EDGE} OR S.volume > NEXT(S).volume)"),
    "nested-kleene": ("AVG(A.price)", "(SEQ(Stock A+, Stock B))+", "A.price > NEXT(A).price"),
    "not-seq": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E)", EDGE),
    "ms-window": ("AVG(S.price)", "Stock S+", EDGE),  # WITHIN 300000 ms SLIDE <5 minutes / wpe + 500> ms
    "us-window": ("AVG(S.price)", "Stock S+", EDGE),  # SLIDE <5 minutes / wpe>.001 ms, WITHIN wpe of it: microseconds
    "ns-window": ("AVG(S.price)", "Stock S+", EDGE),  # SLIDE <5 minutes / wpe>.0000005 ms, WITHIN wpe of it: 1/2 ns
    # Selection strategies and bounded repetition (docs/QUERY_LANGUAGE.md section 11).
    "next-match": ("AVG(S.price)", "Stock S+ SEMANTICS skip-till-next-match", EDGE),
    "contiguous": ("AVG(S.price)", "Stock S+ SEMANTICS contiguous", EDGE),
    "repeat-3": ("AVG(S.price)", "Stock S{3}", EDGE),
    "repeat-2-5": ("AVG(S.price)", "Stock S{2,5}", EDGE),
    "repeat-2-open": ("AVG(S.price)", "Stock S{2,}", EDGE),
    "optional": ("AVG(S.price)", "SEQ(Stock A, Halt H?, Stock S+)", EDGE),
    "lead-not-seq": ("AVG(S.price)", "SEQ(NOT SEQ(Halt C, Halt D), Stock S+)", EDGE),
    "trail-not-seq": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D))", EDGE),
    "nested-not": ("AVG(A.price)", "(SEQ(Stock A+, NOT Halt H, Stock B))+", "A.price > NEXT(A).price"),
    "seq-repeat": ("AVG(S.price)", "SEQ(Stock A, Stock S{2,4}, Stock B)", f"{EDGE} AND A.price < NEXT(S).price"),
    "seq-upto": ("AVG(S.price)", "SEQ(Stock A, Halt H{0,3}, Stock S+)", EDGE),
    "group-repeat": ("AVG(A.price)", "(SEQ(Stock A+, Stock B)){2,3}", "A.price > NEXT(A).price"),
    "diff-edge": ("AVG(S.price)", "Stock S+", "S.price - NEXT(S).price > 0.05"),
    "scaled-edge": ("AVG(S.price)", "Stock S+", "S.price * 1.01 > NEXT(S).price"),  # arithmetic across aliases
    "seq-loop": ("AVG(A.price)", "SEQ(Stock X, (SEQ(Stock A+, Stock B))+, Stock Y)", "A.price > NEXT(A).price"),
    "seq-group": ("AVG(A.price)", "SEQ(Stock X, (SEQ(Stock A+, Stock B)){2,3}, Stock Y)", "A.price > NEXT(A).price"),
    "loop-optional": ("AVG(A.price)", "(SEQ(Stock A+, Halt H?))+", "A.price > NEXT(A).price"),
    "seq-optgroup": ("AVG(A.price)", "SEQ(Stock X, (SEQ(Stock A+, Stock B))?, Stock Y)", "A.price > NEXT(A).price"),
    "two-loops": ("AVG(A.price)", "SEQ((SEQ(Stock A+, Stock B))+, (SEQ(Stock C, Stock D))+)",
                  "A.price > NEXT(A).price"),
    "loop-step-edge": ("AVG(A.price)", "(SEQ(Stock A+, Stock B))+",
                       "A.price > NEXT(A).price AND B.price < NEXT(A).price"),
    "group-optional-in": ("AVG(A.price)", "(SEQ(Stock A, Halt H?)){2,3}", "A.price > NEXT(A).price"),
    # a product or quotient of the two events' values: a pair program in a scanned store
    "product-edge": ("AVG(S.price)", "Stock S+", "S.price * NEXT(S).volume > S.volume * 100"),
    "ratio-edge": ("AVG(S.price)", "Stock S+", "NEXT(S).price / S.price < 0.999"),
    "not-seq-edge": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E)",
                     f"{EDGE} AND C.price < NEXT(D).price"),
    "not-seq-nested": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, NOT Stock X, Halt D), Stock E)", EDGE),
    "mod-edge": ("AVG(S.price)", "Stock S+", f"{EDGE} AND S.volume % 7 < NEXT(S).volume % 7"),
    # two comparisons AND-ed on a negated SEQ's step: `negseqs.dominance_max2`
    "not-seq-and": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E)",
                    f"{EDGE} AND C.price < NEXT(D).price AND C.volume > NEXT(D).volume"),
    # three to five comparisons AND-ed on a negated SEQ's step: `negseqs.dominance_maxk`
    "not-seq-three": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E)",
                      f"{EDGE} AND C.price < NEXT(D).price AND C.volume > NEXT(D).volume AND C.price != NEXT(D).volume"),
    "not-seq-five": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E)",
                     f"{EDGE} AND C.price < NEXT(D).price AND C.volume > NEXT(D).volume AND C.price != NEXT(D).volume "
                     "AND C.volume < NEXT(D).price * 100 AND C.price * 2 > NEXT(D).price"),
    # the same with four on trades: every Stock a part of the negated SEQ (about 1,000 a company)
    "not-seq-four-dense": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Stock C, Stock D), Stock E)",
                           f"{EDGE} AND C.price < NEXT(D).price AND C.volume > NEXT(D).volume "
                           "AND C.price != NEXT(D).volume AND C.volume < NEXT(D).price * 100"),
    # six: the pairs within a window's length scanned (`dominance.window_scan`), on halts and on trades
    "not-seq-six": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E)", f"{EDGE} AND {SIX}"),
    "not-seq-six-dense": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Stock C, Stock D), Stock E)", f"{EDGE} AND {SIX}"),
    "not-seq-across-three": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, NOT Stock X, Halt D), Stock E)",
                             f"{EDGE} AND C.price < NEXT(D).price AND C.volume > NEXT(D).volume "
                             "AND C.price != NEXT(D).volume"),
    # a predicate across a NOT inside a negated SEQ: the NOT's range of times is one more rank (`Matches._since`)
    "not-seq-across-not": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, NOT Stock X, Halt D), Stock E)",
                           f"{EDGE} AND C.price < NEXT(D).price"),
    # a Kleene plus over a SEQ inside a negated SEQ: one iteration stands for any (`parts.one_iteration`)
    "not-seq-group": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, (SEQ(Halt G, Halt H))+, Halt D), Stock E)", EDGE),
    # an optional group inside a counted group: an iteration ends past it too (`parts.loop_steps`)
    "optgroup-in-group": ("AVG(A.price)", "(SEQ(Stock A, (SEQ(Halt H, Stock B))?)){2,3}", "A.price > NEXT(A).price"),
    # the same inside a Kleene plus over a SEQ that is a part of a SEQ: the optional group joins the SEQ's skips
    "optgroup-in-seq-loop": ("AVG(A.price)", "SEQ(Stock X, (SEQ(Stock A, (SEQ(Halt H, Stock B))?))+)",
                             "A.price > NEXT(A).price"),
    # two counted groups: each in the lanes, lane 0 between them (`KernelPlan.counted_groups`)
    "two-counted": ("AVG(A.price)", "SEQ((SEQ(Stock A, Stock B)){2}, (SEQ(Stock C, Stock D)){2})", "A.price > NEXT(B).price"),
    # a counted event beside a counted group: a counted group of one event; and counted groups beside a looped one
    "counted-beside-event": ("AVG(A.price)", "SEQ((SEQ(Stock A, Stock B)){2}, Stock C{2})", "A.price > NEXT(B).price"),
    "counted-beside-loop": ("AVG(A.price)", "SEQ(Stock X{2}, (SEQ(Stock A, Stock B)){2}, (SEQ(Stock C, Stock D))+)",
                            "A.price > NEXT(B).price"),
    # a divisor of both events' values: checked pair by pair for 0 (`pairs.judge`)
    "mixed-divisor": ("AVG(S.price)", "Stock S+", f"{EDGE} AND S.volume / (S.price - NEXT(S).price + 1000) > 1"),
    # equivalence attributes of aliases apart: a run per value (`valueruns.py`), its cost the values near a free event
    "equiv-apart": ("AVG(A.price)", "SEQ(NOT Halt C, Stock A, Stock B, Halt D)", "[A.volume, D.volume]"),
    # the same with no rare type among the aliases: every Stock of the company within the window of a free B
    # brings a run (its volume), so B's vertices are copied into about as many runs as volumes near it
    "equiv-apart-dense": ("AVG(A.price)", "SEQ(Stock A, Stock B+, Stock D)", "[A.volume, D.volume]"),
    # the same on prices: about 680 a company, so a run holds few A's and D's, yet many runs lie near each B
    "equiv-apart-price": ("AVG(A.price)", "SEQ(Stock A, Stock B+, Stock D)", "[A.price, D.price]"),
    # a NOT keyed by an equivalence attribute of some positive aliases only: it bounds its value's run only
    "run-not": ("AVG(A.price)", "SEQ(NOT Halt C, Stock A, Stock B, Halt D)", "[A.volume, C.volume, D.volume]"),
    # a NOT keyed by an equivalence attribute of every positive alias (H), beside one that is not (C)
    "keyed-not": ("AVG(S.price)", "SEQ(NOT Halt C, Stock S+, NOT Halt H)", f"{EDGE} AND [S.volume, H.volume]"),
    # a part of a negated SEQ keyed by an equivalence attribute of some aliases: a run per volume, the E's
    # in every run near them, each D copied to the volumes of the C's near it (`negkeys.py`)
    "keyed-not-seq": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E)",
                      f"{EDGE} AND [S.volume, C.volume]"),
    # the same keyed by an attribute of every positive alias: a partition attribute, no runs
    "keyed-not-seq-every": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E)",
                            f"{EDGE} AND [S.volume, E.volume, C.volume]"),
    # a counted repetition that may match nothing beside a counted group: an optional counted group of one event
    "optional-counted-beside": ("AVG(A.price)", "SEQ((SEQ(Stock A, Stock B)){2}, Stock C{0,2})",
                                "A.price > NEXT(B).price"),
    # two attributes keying parts of one negated SEQ: a C at its volume and each price of a D near it, a D at
    # its price and each volume of a C near it; runs of volumes (S) and prices (E)
    "two-keys-not-seq": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E)",
                         f"{EDGE} AND [S.volume, C.volume] AND [E.price, D.price]"),
    # a group in a negated SEQ constrained where it starts and where it ends: its first and last iterations
    # stand for a match, the group walked twice (`parts.bound_groups`)
    "not-seq-group-bound": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, (SEQ(Halt G, Halt H))+, Halt D), Stock E)",
                            f"{EDGE} AND C.price < NEXT(G).price AND H.price < NEXT(D).price"),
    # the same with an edge predicate on the loop's step: walked until no start rises, one iteration more a walk
    "not-seq-group-loop": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, (SEQ(Halt G, Halt H))+, Halt D), Stock E)",
                           f"{EDGE} AND C.price < NEXT(G).price AND H.price < NEXT(D).price AND H.price < NEXT(G).price"),
    # on trades: chains of rising iterations as long as a window's prices allow, each a walk more
    "not-seq-group-loop-dense": ("AVG(S.price)",
                                 "SEQ(Stock S+, NOT SEQ(Stock C, (SEQ(Stock G, Stock H))+, Stock D), Stock E)",
                                 f"{EDGE} AND C.volume < NEXT(G).volume AND H.volume < NEXT(D).volume "
                                 "AND H.price < NEXT(G).price"),
    # eight `!=` and two order comparisons on the negated step: scanned pair by pair, each `!=` checked as it is
    "not-seq-unequal": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E)",
                        f"{EDGE} AND " + " AND ".join(f"C.volume != NEXT(D).volume + {n}" for n in range(8))
                        + " AND C.price < NEXT(D).price + 5 AND C.price > NEXT(D).price - 5"),
    # an optional event in a negated SEQ: a match with or without it (the step into G from D or from C)
    "not-seq-optional": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D?, Halt G), Stock E)",
                         f"{EDGE} AND C.price < NEXT(D).price AND C.volume < NEXT(G).volume"),
    # groups inside groups (`parts.positions`): an optional group that loops inside a Kleene plus over a SEQ
    "optgroup-loop": ("AVG(A.price)", "SEQ(Stock X, (SEQ(Stock A, (SEQ(Halt H, Stock B))*))+)",
                      "A.price > NEXT(A).price"),
    # a counted repetition inside a Kleene plus over a SEQ (a counted group of one event, in its lanes)
    "counted-in-loop": ("AVG(A.price)", "(SEQ(Stock A, Stock B{2}))+", "A.price > NEXT(B).price"),
    # a Kleene plus over a SEQ inside another
    "loop-in-loop": ("AVG(A.price)", "(SEQ(Stock A, (SEQ(Halt H, Stock B))+))+", "B.price > NEXT(A).price"),
    # a counted group ending with a looped group (the count is the group's whose first state holds it)
    "counted-loop-end": ("AVG(A.price)", "SEQ(Stock X, (SEQ(Stock A, (SEQ(Halt H, Stock B))+)){2})",
                         "B.price > NEXT(A).price"),
    # a counted group holding a counted repetition: written out into copies of B, the group's lanes its own
    "count-in-count": ("AVG(A.price)", "SEQ(Stock X, (SEQ(Stock A, Stock B{2})){2})", "A.price > NEXT(B).price"),
    "group-in-count": ("AVG(A.price)", "(SEQ(Stock A, (SEQ(Stock B, Stock C)){2})){2}", "A.price > NEXT(B).price"),
    # a NOT over a SEQ with a part that may match nothing and loops (`D*`): a match without D, or with a chain of
    # D's whose first C admits and whose last G does (walked until no start rises: an edge predicate on its loop)
    "not-seq-star": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D*, Halt G), Stock E)",
                     f"{EDGE} AND C.price < NEXT(D).price AND D.volume > NEXT(G).volume "
                     "AND D.price < NEXT(D).price"),
    # an optional part beside a group in a negated SEQ: the group walked twice
    "not-seq-opt-group": ("AVG(S.price)",
                          "SEQ(Stock S+, NOT SEQ(Halt C, Halt D?, (SEQ(Halt G, Halt H))+, Halt K), Stock E)",
                          f"{EDGE} AND C.price < NEXT(G).price"),
    # a Kleene event inside a group of a negated SEQ, constrained where it starts and where it ends: a chain of
    # D's (`negseqs.Matches._chained`)
    "not-seq-bound-kleene": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ((SEQ(Halt C, Halt D+))+, Halt G), Stock E)",
                             f"{EDGE} AND C.price < NEXT(D).price AND D.volume > NEXT(G).volume"),
    # inside a group of a negated SEQ, a part that may match nothing and loops (between the group's ends), and a
    # counted event
    "not-seq-group-star": ("AVG(S.price)",
                           "SEQ(Stock S+, NOT SEQ(Halt C, (SEQ(Halt G, Halt D*, Halt H))+, Halt K), Stock E)",
                           f"{EDGE} AND G.price < NEXT(D).price AND D.price < NEXT(H).price"),
    # ... at its end: an iteration ends at G or at H, the loop's steps from both (`parts.loop_ends`)
    "not-seq-group-opt-end": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, (SEQ(Halt G, Halt H?))+, Halt K), Stock E)",
                              f"{EDGE} AND C.price < NEXT(G).price AND H.price < NEXT(G).price"),
    # a group inside a group of a negated SEQ, constrained at both ends: both walked twice
    "not-seq-nested-group": ("AVG(S.price)",
                             "SEQ(Stock S+, NOT SEQ(Halt C, (SEQ(Halt G, (SEQ(Halt H, Halt K))+))+, Halt L), Stock E)",
                             f"{EDGE} AND C.price < NEXT(G).price AND K.price < NEXT(L).price"),
    "not-seq-nested-counted": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, (SEQ(Halt G, (SEQ(Halt H, Halt K)){2}))+, "
                               "Halt L), Stock E)", f"{EDGE} AND C.price < NEXT(G).price AND K.price < NEXT(L).price"),
    "not-seq-nested-optional": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, (SEQ(Halt G, (SEQ(Halt H, Halt K))*, "
                                "Halt M))+, Halt L), Stock E)", f"{EDGE} AND C.price < NEXT(G).price AND "
                                "M.price < NEXT(L).price"),
    # a counted group beginning a group of a negated SEQ: its count and the outer group's on one part
    "not-seq-nested-first": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, (SEQ((SEQ(Halt H, Halt K)){2}, Halt G))+, "
                             "Halt L), Stock E)", f"{EDGE} AND C.price < NEXT(H).price AND G.price < NEXT(L).price"),
    "not-seq-group-counted": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, (SEQ(Halt G, Halt H{2}))+, Halt K), Stock E)",
                              f"{EDGE} AND C.price < NEXT(G).price AND H.price < NEXT(K).price"),
    # more than 16 order comparisons AND-ed on one step of a negated SEQ (columnar: a scan of the pairs)
    "not-seq-17": ("AVG(S.price)", "SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E)",
                   " AND ".join([EDGE, *(f"C.price < NEXT(D).price + {k}" for k in range(17))])),
    # a NOT over a counted SEQ: a chain of two iterations, walked twice (`Matches._iterations`)
    "not-seq-counted": ("AVG(S.price)", "SEQ(Stock S+, NOT (SEQ(Halt C, Halt D)){2}, Stock E)", EDGE),
}


def query_text(shape: str, wpe: int) -> str:
    """The query of ``shape`` with 5-minute windows, ``wpe`` windows per event."""
    agg, pattern, where = SHAPES[shape]
    window = f"WITHIN 5 minutes SLIDE {WINDOW_S // wpe} seconds"
    if shape == "ms-window":
        window = f"WITHIN {WINDOW_S * 1000} ms SLIDE {WINDOW_S * 1000 // wpe + 500} ms"
    elif shape == "us-window":
        slide_us = WINDOW_S * 10**6 // wpe + 1
        window = f"WITHIN {slide_us * wpe / 1000:.3f} ms SLIDE {slide_us / 1000:.3f} ms"
    elif shape == "ns-window":  # half nanoseconds: 2 * 10**9 units a second
        slide = Fraction(WINDOW_S, wpe) * 1000 + Fraction(1, 2 * 10**6)  # ms
        window = f"WITHIN {_decimal_ms(slide * wpe)} ms SLIDE {_decimal_ms(slide)} ms"
    return HEAD.format(agg=agg, pattern=pattern, where=where) + window


def _decimal_ms(ms: Fraction) -> str:
    """A whole number of half nanoseconds, in milliseconds, as the exact decimal."""
    whole, part = divmod(ms * 2 * 10**6, 2 * 10**6)
    assert part.denominator == 1, ms
    return f"{whole}.{int(part) * 5:07d}"


def make_events(n: int, seed: int) -> Any:
    """The stock DataFrame with a seeded ``HALT_SHARE`` of its rows relabelled ``Halt``."""
    import numpy as np

    frame = benchlib.load_generators().stock_frame(n, seed=seed, **STOCK)
    halt = np.random.default_rng(seed + 1000).random(n) < HALT_SHARE
    frame.loc[halt, "type"] = "Halt"
    return frame


# ------------------------------------------------------------ child process


def run_one(spec: dict[str, Any], result_file: Path) -> None:
    """Child: warm up, build the events, say "ready", time one `evaluate` call, write the result."""
    import greta_stream
    from greta_stream.errors import GretaError

    text, n = spec["query"], spec["n"]
    warm = make_events(WARMUP_EVENTS, spec["seed"] + 1)
    if greta_stream.RunSpec.create(text).columnar is not None:
        with contextlib.suppress(GretaError):  # the input is not for the kernels; "auto" will say so
            greta_stream.evaluate(text, make_events(KERNEL_WARMUP_EVENTS, spec["seed"] + 1), engine="columnar")
    greta_stream.evaluate(text, warm, engine=spec["engine"])
    del warm
    events = make_events(n, spec["seed"])
    gc.collect()
    rss_before = benchlib.current_rss_bytes()
    print("ready", flush=True)
    cpu_start, start = time.process_time(), time.perf_counter()
    rows = greta_stream.evaluate(text, events, engine=spec["engine"])
    wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
    peak = max(benchlib.peak_rss_bytes(), benchlib.current_rss_bytes())
    counts = [row["count"] for row in rows]
    result: dict[str, Any] = {
        "wall_s": wall_s, "cpu_s": cpu_s, "rows": len(rows), "engine_ran": rows.engine,
        "dead_letters": len(rows.dead_letters), "peak_rss_bytes": peak, "rss_before_bytes": rss_before,
        "max_count_digits": len(str(max(counts))) if counts else 0,
    }
    if spec["compare"]:
        general = greta_stream.evaluate(text, events, engine="general")
        difference = same_rows(list(rows), list(general))
        result["check"] = "equal" if difference is None else "MISMATCH"
        result["difference"] = difference
    result_file.write_text(json.dumps(result), encoding="utf-8")


def same_rows(auto: list[dict[str, Any]], general: list[dict[str, Any]]) -> str | None:
    """None if the rows agree (ints exact, floats to 1e-9 relative), else the first difference."""
    if len(auto) != len(general):
        return f"{len(auto)} auto rows vs {len(general)} general rows"
    for index, (want, have) in enumerate(zip(general, auto, strict=True)):
        if list(want) != list(have) or not all(benchlib.same_value(want[k], have[k]) for k in want):
            return f"row {index}: auto {have!r} vs general {want!r}"
    return None


# ------------------------------------------------------------ parent


def measure(spec: dict[str, Any], budget_s: float) -> Outcome:
    """One fresh child; killed ``budget_s`` after it is ready."""
    with tempfile.TemporaryDirectory(prefix="bench_coverage_") as tmp:
        result_file, err_file = Path(tmp) / "result.json", Path(tmp) / "stderr.txt"
        command = [sys.executable, str(Path(__file__).resolve()), "--one", json.dumps(spec),
                   "--result-file", str(result_file)]
        with open(err_file, "w", encoding="utf-8") as err:
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
            try:
                if proc.stdout is not None and proc.stdout.readline().strip() == "ready":
                    try:
                        proc.wait(timeout=budget_s)
                    except subprocess.TimeoutExpired:
                        return Outcome("budget")
                proc.wait()
            finally:
                benchlib.stop(proc)
        if proc.returncode != 0 or not result_file.exists():
            tail = err_file.read_text(encoding="utf-8").strip().splitlines()[-1:] or ["no output"]
            return Outcome("error", message=f"exit {proc.returncode}: {tail[0]}")
        return Outcome("ok", json.loads(result_file.read_text(encoding="utf-8")))


def best_of(spec: dict[str, Any], budget_s: float, repeat: int) -> Outcome:
    """The fastest of ``repeat`` children, with the first one's row check (a failure ends the series)."""
    runs: list[Outcome] = []
    for attempt in range(repeat):
        outcome = measure({**spec, "compare": spec["compare"] and attempt == 0}, budget_s)
        if outcome.status != "ok":
            return outcome
        runs.append(outcome)
    best = min(runs, key=lambda run: run.data["wall_s"])
    checked: dict[str, Any] = {key: runs[0].data[key] for key in ("check", "difference") if key in runs[0].data}
    return Outcome("ok", {**best.data, **checked, "wall_s_runs": [run.data["wall_s"] for run in runs]})


def check_queries(wpes: list[int]) -> None:
    """Every query text must parse and run on 10 events; else exit 2 naming it."""
    import greta_stream

    events = make_events(10, 0)
    for shape in SHAPES:
        for wpe in wpes:
            try:
                greta_stream.evaluate(query_text(shape, wpe), events)
            except Exception as exc:  # noqa: BLE001 - any failure here means a broken query text
                raise SystemExit(f"{shape} at {wpe} windows per event does not run: {exc}") from None


def refusals() -> dict[str, str]:
    """Per shape, why the columnar kernels do not take it ("" when they do)."""
    import greta_stream

    return {shape: greta_stream.RunSpec.create(query_text(shape, 2)).columnar_refusal for shape in SHAPES}


def cells(n: int, outcome: Outcome, ref: Outcome | None, budget_s: float) -> list[str]:
    """engine, wall s, CPU s, events/s, x ref, B/event, rows, count digits."""
    if outcome.status != "ok":
        first = {"budget": "> budget"}.get(outcome.status, outcome.status)
        return ["-", f"> {budget_s:g}" if outcome.status == "budget" else "-", "-", first] + ["-"] * 4
    d = outcome.data
    ratio = f"{ref.data['wall_s'] / d['wall_s']:.3f}" if ref is not None and ref.status == "ok" else "-"
    per_event = (d["peak_rss_bytes"] - d["rss_before_bytes"]) / n
    return [d["engine_ran"], benchlib.seconds(d["wall_s"]), benchlib.seconds(d["cpu_s"]), f"{n / d['wall_s']:,.0f}",
            ratio, f"{per_event:,.0f}", f"{d['rows']:,}", str(d["max_count_digits"])]


def print_header(args: argparse.Namespace, command: str) -> dict[str, Any]:
    import numba

    import greta_stream

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    info = {"cpu": benchlib.cpu_model(), "cores": os.cpu_count(), "usable_cores": usable,
            "memory_gib": benchlib.memory_gib(), "os": platform.platform(), "python": platform.python_version(),
            "greta_stream": greta_stream.__version__, "module": str(Path(greta_stream.__file__).parent),
            "numba": numba.__version__, "git": benchlib.git_state()}
    print("# greta-stream coverage benchmark: evaluate(engine='auto') per query shape" + (" (--quick)" * args.quick))
    print(f"command : {command}")
    print(f"machine : {info['cpu']}, {info['cores']} cores ({usable} usable), {info['memory_gib']} GiB RAM, {info['os']}")
    print(f"python  : {info['python']} ({sys.executable}); numba {info['numba']}")
    print(f"code    : greta_stream {info['greta_stream']} imported from {info['module']}; git of {ROOT}: {info['git']}")
    print(f"data    : generators.stock_frame({args.events:,}, companies=20, sectors=4, rate=4/s, seed={args.seed}), "
          f"{HALT_SHARE:.0%} of rows relabelled Halt: per 5-minute window 1,200 events, 60 per company")
    print(f"measure : one fresh child per run, one after another; {WARMUP_EVENTS}-event warm-up "
          f"({KERNEL_WARMUP_EVENTS} for the kernels) and generation not timed; budget {args.budget_s:g} s; "
          f"best of {args.repeat}; events/s = events / wall s; x ref = events/s / "
          f"ref events/s; B/event = (child peak RSS - its RSS after warm-up and generation) / events", flush=True)
    return info


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--events", type=int, default=20_000, help="events per measurement")
    parser.add_argument("--wpe", default="2,12,60", help="windows per event (divisors of 300: SLIDE = 300 s / wpe)")
    parser.add_argument("--budget-s", type=float, default=120.0, help="seconds a child may take before it is killed")
    parser.add_argument("--repeat", type=int, default=1, help="children per measurement, the fastest kept")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--shapes", default=",".join(SHAPES),
                        help="shapes to measure, comma-separated (ref always runs first: x ref needs it)")
    parser.add_argument("--json", type=Path, help="also write every result to this JSON file")
    parser.add_argument("--quick", action="store_true", help=f"{COMPARE_MAX_EVENTS:,} events: a smoke run")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # child: JSON spec
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.events = COMPARE_MAX_EVENTS
    try:
        args.wpes = [int(w) for w in args.wpe.split(",")]
    except ValueError:
        parser.error(f"--wpe: expected integers separated by commas, got {args.wpe!r}")
    if any(w < 1 or WINDOW_S % w for w in args.wpes):
        parser.error("--wpe: each value must divide 300 (whole-second slides)")
    args.shape_list = ["ref", *(x for x in args.shapes.split(",") if x and x != "ref")]
    unknown = [x for x in args.shape_list if x not in SHAPES]
    if unknown:
        parser.error(f"--shapes: unknown {', '.join(unknown)}; the shapes are {', '.join(SHAPES)}")
    if args.repeat < 1 or args.events < 1:
        parser.error("--repeat and --events must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.one:
        run_one(json.loads(args.one), args.result_file)
        return 0
    command = shlex.join([sys.executable, *sys.argv])
    info = print_header(args, command)
    check_queries(args.wpes)
    compare = args.events <= COMPARE_MAX_EVENTS
    why = refusals()
    print("\nshapes (columnar refusal at this code version; '-' = the kernels take it):")
    for shape in args.shape_list:
        print(f"  {shape:<12}  {query_text(shape, 12).split(' WITHIN')[0]}\n  {'':<12}  -> {why[shape] or '-'}")
    columns = [("wpe", 3), ("slide", 5), ("shape", 12), ("engine", 8), ("wall s", 7), ("CPU s", 7), ("events/s", 10),
               ("x ref", 6), ("B/event", 8), ("rows", 6), ("digits", 6)] + ([("check", 8)] if compare else [])
    print(f"\n## {args.events:,} events, engine auto" + (" (check: rows vs engine='general')" if compare else ""),
          flush=True)
    table = Table(columns)
    table.header()
    records: list[dict[str, Any]] = []
    mismatches: list[str] = []
    started = time.perf_counter()
    for wpe in args.wpes:
        ref: Outcome | None = None
        for shape in args.shape_list:
            spec = {"query": query_text(shape, wpe), "engine": "auto", "n": args.events, "seed": args.seed,
                    "compare": compare}
            outcome = best_of(spec, args.budget_s, args.repeat)
            ref = outcome if shape == "ref" else ref
            verdict = outcome.data.get("check") or "n/a"
            row = [str(wpe), f"{WINDOW_S // wpe} s", shape, *cells(args.events, outcome, ref, args.budget_s)]
            table.row(row + ([verdict] if compare else []))
            if outcome.message:
                print(f"      {outcome.message}", flush=True)
            if verdict == "MISMATCH":
                print(f"      {outcome.data['difference']}", flush=True)
                mismatches.append(f"{shape} at {wpe} windows per event: {outcome.data['difference']}")
            records.append({"shape": shape, "wpe": wpe, "query": spec["query"], "status": outcome.status,
                            "message": outcome.message, **outcome.data})
    print(f"\ntotal {time.perf_counter() - started:,.0f} s", flush=True)
    for mismatch in mismatches:
        banner = f"!!! MISMATCH: engine auto and engine general disagree on {mismatch}"
        print(banner, flush=True)
        print(banner, file=sys.stderr, flush=True)
    if args.json:
        doc = {"command": command, "machine": info, "config": {k: v for k, v in vars(args).items() if k != "one"},
               "refusals": why, "records": records}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")
        print(f"results written to {args.json}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
