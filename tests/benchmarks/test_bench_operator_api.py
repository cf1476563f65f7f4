"""`bench_operator_api.py` runs end to end at a tiny size: both stateful APIs report a time and their state."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_bench_operator_api_smoke(bench: Callable[..., str]) -> None:
    out = bench("bench_operator_api.py", "--rows", "300", "--batches", "2", "--warm-rows", "0",
                "--variants", "apply-floor,tws-delta", "--state-kb", "6", "--budget-s", "300")
    lines = out.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("variant"))
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[header + 1:header + 3]}
    # variant s/batch rows/s first-s state memoryUsedB commitMs ckpt-B/batch
    assert float(rows["apply-floor"][0]) > 0 and int(rows["apply-floor"][3]) >= 1, out
    tws = rows["tws-delta"]
    if tws[0] == "unavailable:":  # no protobuf in this environment: said so, the rest ran
        assert " ".join(tws) == "unavailable: needs protobuf", out
    else:  # 100 bytes appended per shard and batch
        assert float(tws[0]) > 0 and int(tws[3]) >= 1 and int(tws[6].replace(",", "")) > 0, out
