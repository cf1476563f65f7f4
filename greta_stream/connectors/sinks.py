"""File and console sinks for micro-batches of JSON payloads (no Spark here).

Each micro-batch goes to one file named by its batch id, written to a
temporary name and renamed into place: a batch that the stream replays after
a crash overwrites its own file, so readers never see a row twice.
`read_jsonl_dir` reads such a folder back in batch order.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from greta_stream.connectors.jsonl import loads
from greta_stream.errors import ConfigError


class Sink:
    """Writes the payloads of one micro-batch."""

    def write(self, batch_id: int, payloads: list[str]) -> None:
        raise NotImplementedError


class JsonlSink(Sink):
    """`<path>/part-<batch id>.jsonl`, one JSON object per line."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def write(self, batch_id: int, payloads: list[str]) -> None:
        target = self.path / f"part-{batch_id:010d}.jsonl"
        if not payloads:
            if target.exists():  # a replayed batch that now emits nothing
                target.unlink()
            return
        tmp = self.path / f".part-{batch_id:010d}.jsonl.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write("\n".join(payloads) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)


class ParquetSink(Sink):
    """`<path>/part-<batch id>.parquet`; exact integers (counts, int sums) as decimal text."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def write(self, batch_id: int, payloads: list[str]) -> None:
        import pandas as pd

        if not payloads:
            return
        records = [_exact_ints_as_text(loads(p)) for p in payloads]
        tmp = self.path / f".part-{batch_id:010d}.parquet.tmp"
        pd.DataFrame(records).to_parquet(tmp, index=False)
        os.replace(tmp, self.path / f"part-{batch_id:010d}.parquet")


class ConsoleSink(Sink):
    """Prints each payload; for development."""

    def write(self, batch_id: int, payloads: list[str]) -> None:
        for p in payloads:
            sys.stdout.write(p + "\n")
        sys.stdout.flush()


def _exact_ints_as_text(rec: dict[str, Any]) -> dict[str, Any]:
    from greta_stream.connectors.jsonl import int_to_text

    return {k: int_to_text(v) if isinstance(v, int) and not isinstance(v, bool) and k not in ("window_start", "window_end")
            else v for k, v in rec.items()}


def make_sink(fmt: str, path: str | None) -> Sink:
    if fmt == "console":
        return ConsoleSink()
    if not path:
        raise ConfigError(f"a {fmt} sink needs a path")
    if fmt == "jsonl":
        return JsonlSink(path)
    if fmt == "parquet":
        return ParquetSink(path)
    raise ConfigError(f"unknown sink format {fmt!r}; use jsonl, parquet or console")


def read_jsonl_dir(path: str | Path) -> Iterator[Any]:
    """Every record of a JsonlSink folder, in batch order."""
    for f in sorted(Path(path).glob("part-*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield loads(line)
