"""Helpers for the CET tests: run the extractor, key its records like the oracle.

The random query and stream generators are those of
tests/engine/test_differential.py, loaded by path (tests are not a package).
"""

from __future__ import annotations

import importlib.util
import math
import random
import sys
from pathlib import Path
from typing import Any

from greta_stream import compile_query
from greta_stream.cet import CetConfig, TrendExtractor


def _load_differential() -> Any:
    name = "greta_engine_differential_generators"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parents[1] / "engine" / "test_differential.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


differential = _load_differential()
cases = differential.cases
SETTINGS = differential.SETTINGS


def extract(text: str, events: list[dict], **options: Any) -> list[dict]:
    """Batch CET: every record of `text` over `events`, with aliases."""
    options.setdefault("with_events", True)
    ex = TrendExtractor(text, config=CetConfig(**options))
    ex.add_many(events)
    out = ex.finish()
    assert not ex.metrics.get("total_mismatch"), ex.metrics
    return out


def keyed(text: str, records: list[dict]) -> dict[tuple, list[tuple]]:
    """Records as the oracle keys them: (start, end, group values) -> [((id, alias), ...)]."""
    cq = compile_query(text)
    out: dict[tuple, list[tuple]] = {}
    for r in records:
        key = (r["window_start"], r["window_end"], tuple(r[c] for c in cq.group_columns))
        out.setdefault(key, []).append(tuple(zip(r["trend"], r["aliases"], strict=True)))
    return out


def totals(text: str, records: list[dict]) -> dict[tuple, tuple[int, bool]]:
    cq = compile_query(text)
    out: dict[tuple, tuple[int, bool]] = {}
    for r in records:
        key = (r["window_start"], r["window_end"], tuple(r[c] for c in cq.group_columns))
        assert out.setdefault(key, (r["total"], r["truncated"])) == (r["total"], r["truncated"])
    return out


def stream(text: str, events: list[dict], seed: int, snapshot: bool = True, **options: Any) -> list[dict]:
    """Streaming CET: shuffled within micro-batches, watermark at random cuts,
    an optional snapshot + restore after every batch."""
    options.setdefault("with_events", True)
    cfg = CetConfig(**options)
    rnd = random.Random(seed)
    ordered = sorted(events, key=lambda e: e["time"])
    n = len(ordered)
    cuts = sorted(rnd.sample(range(1, n), min(n - 1, rnd.randrange(0, 4)))) if n > 1 else []
    batches = [ordered[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    ex = TrendExtractor(text, config=cfg)
    out: list[dict] = []
    for i, batch in enumerate(batches):
        rnd.shuffle(batch)
        ex.add_many(batch)
        later = [e["time"] for b in batches[i + 1:] for e in b]
        out += ex.advance(min(later, default=math.inf))  # nothing still to come is late
        if snapshot:
            ex = TrendExtractor.restore(text, ex.snapshot(), config=cfg)
    out += ex.finish()
    return out


def describe(text: str, events: list[dict], expected: Any, got: Any) -> str:
    lines = ["", "query:", text, "events:"]
    lines += [f"  {e!r}" for e in sorted(events, key=lambda e: (e["time"], e["id"]))]
    lines += ["expected:", f"  {expected!r}", "got:", f"  {got!r}"]
    return "\n".join(lines)
