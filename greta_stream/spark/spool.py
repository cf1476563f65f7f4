"""A micro-batch's operator outputs on the driver (`Output`, `collected`), and the `Spool` that keeps
the outputs of a query whose sinks failed until they can be delivered. Part of
`greta_stream.spark.pipeline`, which names them too."""

from __future__ import annotations

import json
from collections import namedtuple
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame

Output = namedtuple("Output", ["query", "kind", "window_start", "window_end", "grp", "payload", "reason"])


def _spooled(values: list[Any]) -> Output:
    """An output as a spool file keeps it; one spooled before the `reason` column had a dead letter's in `grp`."""
    if len(values) == len(Output._fields) - 1:
        values = [*values[:4], None, values[5], values[4]] if values[1] == "dead" else [*values, None]
    return Output(*values)


def collected(outputs: DataFrame) -> list[Output]:
    """A micro-batch's operator outputs on the driver, through Arrow (columns, not pickled Rows:
    several times faster once a batch carries many queries' rows)."""
    table = outputs.toArrow()
    return list(map(Output._make, zip(*(table.column(f).to_pylist() for f in Output._fields))))


class Spool:
    """The outputs of a query whose sinks failed, by batch id, kept until they can be delivered:
    one JSON-lines file per batch in `folder` (None: in memory)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._memory: dict[int, list[Any]] = {}

    def __len__(self) -> int:
        return len(self.batches())

    @staticmethod
    def encode(outputs: list[Any]) -> bytes:
        return "".join(json.dumps(list(o)) + "\n" for o in outputs).encode()

    def stats(self) -> tuple[int, int]:
        """(batches, bytes) kept."""
        if self.folder is None:
            return len(self._memory), sum(len(self.encode(o)) for o in self._memory.values())
        try:
            sizes = [p.stat().st_size for p in self.folder.glob("batch-*.jsonl")]
        except OSError:
            return 0, 0
        return len(sizes), sum(sizes)

    def put(self, batch_id: int, outputs: list[Any], data: bytes | None = None) -> None:
        if self.folder is None:
            self._memory[batch_id] = list(outputs)
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"batch-{batch_id}.jsonl").unlink(missing_ok=True)  # a replayed batch: counted once
        temp = self.folder / f".batch-{batch_id}.tmp"
        temp.write_bytes(data if data is not None else self.encode(outputs))
        temp.replace(self.folder / f"batch-{batch_id}.jsonl")  # a replayed batch replaces its own file

    def batches(self) -> list[tuple[int, list[Any]]]:
        if self.folder is None:
            return sorted(self._memory.items())
        if not self.folder.is_dir():
            return []
        found = sorted((int(p.stem.split("-")[1]), p) for p in self.folder.glob("batch-*.jsonl"))
        return [(batch_id, [_spooled(json.loads(line)) for line in p.read_text().splitlines()])
                for batch_id, p in found]

    def drop(self, batch_id: int) -> None:
        self._memory.pop(batch_id, None)
        if self.folder is not None:
            (self.folder / f"batch-{batch_id}.jsonl").unlink(missing_ok=True)
