"""A shard's records of one call, from the rows Spark hands the operator (pandas, no JVM needed): dicts
parsed from JSON text or typed columns, their event times as the watermark column reads them, the
end of input's flag, and the rows of files outside a confined source folder (`outside_source` dead
letters).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pandas as pd

from greta_stream.engine import DeadLetter
from greta_stream.pipeline.model import glob_base
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark.keying import BAD_UTF8_COLUMN, FILE_COLUMN, FLUSH_COLUMN, SECONDS_COLUMN
from greta_stream.spark.outputs import dead_output, parse_json_records


def joined_frames(pdfs: Iterator[pd.DataFrame]) -> pd.DataFrame | None:
    frames = list(pdfs)
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True) if frames else None


def named_columns(frame: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame | None:
    """`frame` with the input's column names: pyspark (4.1 on) rebuilds the rows it hands
    transformWithStateInPandas with `DataFrame.itertuples`, which renames every column that
    starts with an underscore (all of the operator's own) to `_<position>`."""
    if frame is not None and len(frame.columns) == len(columns) and list(frame.columns) != columns:
        frame.columns = columns
    return frame


def shard_records(frame: pd.DataFrame | None, json_input: bool, drop: list[str],
                  keyed_by: tuple[str, ...], confine: str | None = None) -> tuple[Any, np.ndarray, bool, list[DeadLetter]]:
    """A shard's records of one micro-batch (dicts from JSON text, or typed columns as one
    DataFrame), their event times as the watermark column reads them, whether
    --flush-at-end's event is among them, and the `outside_source` dead letters of typed
    rows (`_confined`: a typed frame holds no dead letter; JSON records carry theirs in
    place). JSON objects that give one of the fields Spark read (`keyed_by`: time, shard
    attributes) twice are dead letters."""
    if frame is None or frame.empty:  # a timeout: no input
        return [], np.empty(0), False, []
    times_s = frame[SECONDS_COLUMN].to_numpy(dtype=float, na_value=np.nan)
    flush = bool(frame[FLUSH_COLUMN].any())
    keep, outside = (None, {}) if confine is None or FILE_COLUMN not in frame.columns else \
        _confined(frame[FILE_COLUMN], confine)
    if not json_input:
        if keep is not None and not keep.all():  # typed rows: those from files out of the folder go as dead letters
            frame, times_s = frame[keep], times_s[keep]
        frame = frame.drop(columns=[c for c in drop if c in frame.columns]).reset_index(drop=True)
        return frame, times_s, flush, list(outside.values())
    records = parse_json_records(frame["value"], keyed_by)
    bad = frame[BAD_UTF8_COLUMN].to_numpy(dtype=bool, na_value=False)
    if bad.any():
        for i in np.flatnonzero(bad):
            records[i] = DeadLetter("malformed", frame["value"].iat[i], "the line is not valid UTF-8 text")
    for at, dead in outside.items():  # JSON records carry their dead letter in place
        records[at] = dead
    if keep is not None:
        keep[np.fromiter(outside, dtype=np.intp, count=len(outside))] = True
        if not keep.all():
            records = [r for r, k in zip(records, keep, strict=True) if k]
            times_s = times_s[keep]
    return records, times_s, flush, []


def _confined(files: pd.Series, confine: str) -> tuple[np.ndarray, dict[int, DeadLetter]]:
    """For the rows of a file source confined to `confine` (`_judged`): which to keep (False: read from a
    file out of the folder, or once more through a link to a folder inside it) and, by row position, the
    `outside_source` dead letter of each row of a file out of the folder (its content unread)."""
    codes, uris = pd.factorize(files)  # a few files per batch: each judged once
    keep = np.ones(len(files), dtype=bool)
    outside: dict[int, DeadLetter] = {}
    for code, uri in enumerate(uris):
        judged = _judged(str(uri), confine)
        if judged is None:
            continue
        at = np.flatnonzero(codes == code)
        keep[at] = False
        if judged[0] == "outside":
            dead = DeadLetter("outside_source", judged[1], f"{Path(judged[1]).name} is a link to a file outside "
                              f"the source folder {confine}: not read")
            outside.update((int(i), dead) for i in at)
    return keep, outside


def outside_outputs(queries: QuerySet, dead: list[DeadLetter]) -> list[dict[str, Any]]:
    """The `outside_source` dead letters of a shard's typed rows, for each of its queries (as the runner
    gives each query a JSON record's dead letter)."""
    return [dead_output(name, d) for d in dead for name, _ in queries.specs]


@lru_cache(maxsize=4096)
def _judged(uri: str, confine: str) -> tuple[str, str] | None:
    """What to make of the file at `uri` (a file source's) for a source confined to `confine` (a
    folder, or a glob: the folder before its first wildcard, `glob_base`): None to read it;
    ("outside", its path) when, links followed, it is outside the folder; ("again", its path) when
    Spark reached it through a link to a folder inside the folder (a loop, or a second way to a
    folder that recursive listing reads anyway): it is read where it is, and only there. Paths
    that are not local (an object store's) have no links to follow."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        return None
    path = Path(unquote(parsed.path))
    base = glob_base(Path(confine)).absolute()  # as Spark qualifies a relative path: links kept
    try:
        inside = path.resolve().is_relative_to(base.resolve())
    except (OSError, RuntimeError):  # a link loop on the way: nowhere to read it from
        inside = False
    if not inside:
        return "outside", str(path)
    if path.is_relative_to(base):  # the folders between the source folder and the file, as Spark listed them
        folder = base
        for part in path.relative_to(base).parts[:-1]:
            folder = folder / part
            if folder.is_symlink():
                return "again", str(path)
    return None
