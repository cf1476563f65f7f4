"""`bench_real.py --quick` runs end to end: its table is printed and no query's rows differ between the engines."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytestmark = pytest.mark.slow

QUICK = ("stk-fall", "stk-ties", "wx-wet", "tmp-rise", "tmp-count")  # the queries marked quick


def test_bench_real_quick(bench: Callable[..., str]) -> None:
    out = bench("bench_real.py", "--quick", "--repeat", "1")  # exit status 1 (a mismatch) fails check=True
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("query ") and line.endswith("rows equal"))
    assert set(lines[head + 1]) == {"-", " "}, out
    table = [line.split() for line in lines[head + 2:]]
    table = table[:next(i for i, cells in enumerate(table) if not cells)]
    # query data events rows dead auto-ran general-ev/s columnar-ev/s rows-equal...
    assert [cells[0] for cells in table] == list(QUICK), out
    for cells in table:
        assert cells[8] in ("yes", "refused:"), out  # never "no"
        assert cells[5] in ("general", "columnar"), out
        assert int(cells[6].replace(",", "")) > 0, out
        assert cells[7] == "refused" if cells[8] == "refused:" else int(cells[7].replace(",", "")) > 0, out
    assert "stocks      615 events" in out and "55 nulls" in out, out  # GOOG before its listing: price null
    assert "MISMATCH" not in out, out
