"""`bench_coverage.py --quick`: shapes the columnar engine took over, each child's rows checked against
`engine="general"` (the `check` column)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytestmark = pytest.mark.slow

SHAPES = {"ref": "columnar", "us-window": "columnar", "not-seq-five": "columnar", "counted-beside-event": "columnar",
          "optgroup-in-seq-loop": "columnar", "keyed-not-seq": "columnar", "two-keys-not-seq": "columnar",
          "not-seq-group-bound": "columnar", "loop-in-loop": "columnar", "counted-in-loop": "columnar",
          "counted-loop-end": "columnar", "count-in-count": "columnar"}


def test_bench_coverage_quick(bench: Callable[..., str]) -> None:
    out = bench("bench_coverage.py", "--quick", "--wpe", "2", "--shapes", ",".join(SHAPES))
    rows = {r[3]: r for r in (ln.split() for ln in out.splitlines()) if len(r) > 4 and r[0] == "2" and r[3] in SHAPES}
    assert {shape: row[4] for shape, row in rows.items()} == SHAPES, out
    assert all(row[-1] == "equal" for row in rows.values()), out
    assert "MISMATCH" not in out, out
