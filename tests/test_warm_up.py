"""`greta-stream warm-up` (run by `make install` and the image build) leaves no kernel for a run to compile.

Into an empty numba cache (NUMBA_CACHE_DIR), `warm-up` compiles (started with
the suite, at a lower priority, by `conftest.WarmUp`: minutes of one core
spent while the other tests run); a second
process then runs every path that has kernels, on inputs of other sizes
and shapes than warm-up's: the columnar engine (batch and stream, one and
several threads, numeric and timestamp times), the incremental stream, CET
over range and order edges. numba counts a compilation as a cache miss of
the kernel's dispatcher: there must be none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import WarmUp

ROOT = Path(__file__).resolve().parents[1]

RUNS = r"""
import json, random, sys
from numba.core.registry import CPUDispatcher
import greta_stream
from greta_stream.compiler.compiled import compile_query
from greta_stream.engine.columnar.stream import ColumnarStream

sample = [json.loads(line) for line in open("samples/stock/events.jsonl")]
q1 = open("configs/q1_stock.greta").read()
greta_stream.evaluate(q1, sample, engine="columnar")
stamped = [dict(e, time=f"2026-01-01T00:{int(e['time']) // 60 % 60:02d}:{int(e['time']) % 60:02d}Z") for e in sample]
greta_stream.evaluate(q1, stamped, engine="columnar")
for incremental in (False, True):
    stream = ColumnarStream(compile_query(q1), incremental=incremental, threads=2)
    for i in range(0, len(sample), 500):
        stream.add_many(sample[i:i + 500])
        stream.advance(sample[min(i + 500, len(sample) - 1)]["time"])
    stream.finish()
rnd = random.Random(7)
checks = [{"type": "Check", "time": i, "src": rnd.randrange(30), "dest": rnd.randrange(30)} for i in range(3000)]
quotes = [{"type": "Stock", "time": i, "price": round(100 + rnd.gauss(0, 5), 2)} for i in range(3000)]
for pattern, where, evs in (("Check C+", "C.src = NEXT(C).dest", checks), ("Stock S+", "S.price < NEXT(S).price", quotes),
                            ("Stock S+", "S.price >= NEXT(S).price", quotes)):
    text = f"RETURN TRENDS PATTERN {pattern} WHERE {where} WITHIN 500 seconds SLIDE 250 seconds"
    for trends in ("complete", "all"):
        greta_stream.evaluate(text, evs, trends=trends, max_trends=200)
misses = {}
for name, mod in list(sys.modules.items()):
    if name.startswith("greta_stream"):
        for attr, fn in vars(mod).items():
            if isinstance(fn, CPUDispatcher):
                misses[f"{name}.{attr}"] = sum(fn.stats.cache_misses.values())
print(json.dumps(misses))
"""


@pytest.mark.slow
def test_after_warm_up_no_run_compiles_a_kernel(warm_up: WarmUp) -> None:
    returncode, err = warm_up.outcome(timeout=900)  # started with the suite (conftest.WarmUp)
    assert returncode == 0, err[-3000:]
    assert "kernels compiled in" in err
    env = dict(os.environ, NUMBA_CACHE_DIR=str(warm_up.cache))
    done = subprocess.run([sys.executable, "-c", RUNS], cwd=ROOT, env=env, text=True, capture_output=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    misses = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(misses) > 10, misses  # the kernel modules were loaded and seen
    assert {k: v for k, v in misses.items() if v} == {}
