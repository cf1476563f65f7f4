"""Result rows as files: CSV, Parquet or JSON lines (`GET /queries/{id}/results/export`).

Rows come as the JSON text the operator wrote. JSON lines keep that text.
CSV and Parquet get one column per result column: a column of ints that fit
in 64 bits stays an integer column, floats stay floats; counts past 64 bits
(exact counts of trends grow fast) and lists (CET trends) are written as
their exact JSON text, so nothing is rounded.
"""

from __future__ import annotations

import csv
import io
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from greta_stream.connectors import dumps, loads

Format = Literal["csv", "parquet", "jsonl"]
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet",
               "jsonl": "application/x-ndjson"}
_INT64 = (-(2**63), 2**63 - 1)


def export(fmt: Format, columns: list[str], payloads: list[str]) -> bytes:
    """The rows (JSON payloads) as one file of `fmt`."""
    if fmt == "jsonl":
        return "".join(p + "\n" for p in payloads).encode()
    rows = [loads(p) for p in payloads]
    names = columns + [k for k in (rows[0] if rows else {}) if k not in columns]
    cols = {name: _column([r.get(name) for r in rows]) for name in names}
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        for i in range(len(rows)):
            writer.writerow(["" if cols[n][i] is None else cols[n][i] for n in names])
        return out.getvalue().encode()
    sink = io.BytesIO()
    pq.write_table(pa.table({n: pa.array(cols[n]) for n in names}), sink)
    return sink.getvalue()


def _column(values: list[Any]) -> list[Any]:
    """One typed column: ints in 64 bits, floats, text; anything else (big ints, lists) as exact JSON text."""
    present = [v for v in values if v is not None]
    if all(isinstance(v, int) and not isinstance(v, bool) and _INT64[0] <= v <= _INT64[1] for v in present):
        return values
    if all(isinstance(v, float) for v in present):
        return values
    if all(isinstance(v, str) for v in present):
        return values
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present) and all(
            not isinstance(v, int) or abs(v) < 2**53 for v in present):
        return [None if v is None else float(v) for v in values]  # ints and floats: exactly as floats
    return [None if v is None else v if isinstance(v, str) else dumps(v) for v in values]
