"""File and console sinks for micro-batches of JSON payloads (no Spark here): the
`greta_stream.spark.sinks.Sink`s of the formats jsonl, parquet and console.

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


class FileSink:
    """A sink of files under a folder: one file per micro-batch, named by its id
    (`greta_stream.spark.sinks.Sink`; `place` is a `SinkPlace`, `batch` a `SinkBatch`)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    @classmethod
    def create(cls, place: Any) -> FileSink:
        if not place.cfg.path:
            raise ConfigError(f"a {place.cfg.format} sink needs a path")
        return cls(place.cfg.path)

    def write(self, spark: Any, batch: Any) -> None:
        self.write_payloads(batch.batch_id, batch.payloads)

    def write_payloads(self, batch_id: int, payloads: list[str]) -> None:
        raise NotImplementedError


class JsonlSink(FileSink):
    """`<path>/part-<batch id>.jsonl`, one JSON object per line."""

    def write_payloads(self, batch_id: int, payloads: list[str]) -> None:
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


class ParquetSink(FileSink):
    """`<path>/part-<batch id>.parquet`; exact integers (counts, int sums) as decimal text."""

    def write_payloads(self, batch_id: int, payloads: list[str]) -> None:
        import pandas as pd

        if not payloads:
            return
        records = [_exact_ints_as_text(loads(p)) for p in payloads]
        tmp = self.path / f".part-{batch_id:010d}.parquet.tmp"
        pd.DataFrame(records).to_parquet(tmp, index=False)
        os.replace(tmp, self.path / f"part-{batch_id:010d}.parquet")


class ConsoleSink:
    """Prints each payload; for development."""

    @classmethod
    def create(cls, place: Any) -> ConsoleSink:
        return cls()

    def write(self, spark: Any, batch: Any) -> None:
        for p in batch.payloads:
            sys.stdout.write(p + "\n")
        sys.stdout.flush()


def _exact_ints_as_text(rec: dict[str, Any]) -> dict[str, Any]:
    from greta_stream.connectors.jsonl import int_to_text

    return {k: int_to_text(v) if isinstance(v, int) and not isinstance(v, bool) and k not in ("window_start", "window_end")
            else v for k, v in rec.items()}


def read_jsonl_dir(path: str | Path) -> Iterator[Any]:
    """Every record of a JsonlSink folder, in batch order."""
    for f in sorted(Path(path).glob("part-*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield loads(line)
