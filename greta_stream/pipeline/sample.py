"""What a source already holds, read as a sample before a run: the names a query's input does not carry.

A query registered on a folder that is complete gets no new input, so its stream never tells a
misspelled type or attribute from a quiet source. `sample_census` reads the records already there
(the first `SAMPLE_RECORDS` records of a JSON-lines or Parquet folder, its files in name order;
other sources: none) once for every query on that source, and `Census.problems` names each
mistake of a query as a run would (`runtime.dead_letters.name_problems`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from greta_stream.connectors.jsonl import read_events
from greta_stream.engine.ingest import DeadLetter
from greta_stream.pipeline.model import SourceConfig, glob_base
from greta_stream.runtime.dead_letters import Census

SAMPLE_RECORDS = 5_000  # records read from a source before a run
_SAMPLE_FILES = 50  # files looked at


def sample_census(source: SourceConfig, type_field: str, limit: int = SAMPLE_RECORDS) -> Census:
    """The types and attribute names of the first `limit` records already in `source` (an empty
    census for a source that is no folder of files)."""
    return Census.of(itertools.islice(_records(source), limit), type_field)


def _records(source: SourceConfig) -> Iterator[Any]:
    if source.format not in ("jsonl", "parquet") or not source.path:
        return
    for path in itertools.islice(_files(Path(source.path)), _SAMPLE_FILES):
        try:
            if source.format == "jsonl":
                yield from (r for r in read_events(path) if not isinstance(r, DeadLetter))
            else:
                import pyarrow.parquet as pq

                yield from pq.read_table(path).slice(0, SAMPLE_RECORDS).to_pylist()
        except (OSError, ValueError):  # a file being written, or one the stream will dead-letter
            continue


def _files(path: Path) -> Iterator[Path]:
    """The data files of a source folder (or glob), in name order, hidden and temporary ones aside
    (Spark's file sources skip the names starting with . or _ as well), and those a link leads to
    out of the folder (a stream dead-letters their records as `outside_source`)."""
    base = glob_base(path)
    pattern = path.relative_to(base).as_posix() if base != path else "*"
    real = base.resolve()
    for p in sorted(base.glob(pattern)):
        if (p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(base).parts)
                and p.resolve().is_relative_to(real)):  # a link out of the folder is no input (`outside_source`)
            yield p
