"""`bench_cet.py --scale` runs end to end; the range-edge graph and the edge graph agree."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytestmark = pytest.mark.slow


def test_bench_cet_scale_smoke(bench: Callable[..., str]) -> None:
    out = bench("bench_cet.py", "--scale", "--sizes", "400", "--caps", "7", "--threads", "1,2",
                "--graphs", "indexed,edges", "--workloads", "kiting", "--budget-s", "120")
    rows = [ln.split() for ln in out.splitlines()[2:] if ln.strip()]
    # workload graph mode threads cap events seconds cpu records total peak
    got = {(r[1], r[2], r[3]): (r[8], r[9]) for r in rows}
    runs = (("complete", "1"), ("complete", "2"), ("all", "1"), ("all", "2"))
    assert set(got) == {(g, m, t) for g in ("indexed", "edges") for m, t in (("graph", "1"), *runs)}, out
    for mode, threads in runs:
        records, total = got[("indexed", mode, threads)]
        assert (records, total) == got[("edges", mode, threads)], out
        assert records == "7" and int(total) > 7, out
