"""Test helpers for streaming: spread events over JSON lines files (micro-batches)."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any


def write_batches(folder: Path, events: list[dict[str, Any]], n_files: int, seed: int = 0,
                  extra_last: list[Any] | None = None) -> list[Path]:
    """Time-ordered chunks of `events`, each shuffled, one file per chunk.

    `extra_last` lines (strings as they are, other values as JSON) end the last file.
    Modification times increase with the file index, one second apart: Spark's
    file source takes files in modification-time order, and files written
    within one millisecond would otherwise come in any order.
    """
    folder.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(seed)
    ordered = sorted(events, key=lambda e: e["time"])
    size = -(-len(ordered) // n_files)
    paths = []
    base = time.time() - 3600
    for i in range(n_files):
        chunk = ordered[i * size:(i + 1) * size]
        rnd.shuffle(chunk)
        lines = [json.dumps(e) for e in chunk]
        if i == n_files - 1 and extra_last:
            lines += [x if isinstance(x, str) else json.dumps(x) for x in extra_last]
        path = folder / f"events-{i:04d}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        stamp = base + i
        os.utime(path, (stamp, stamp))
        paths.append(path)
    return paths
