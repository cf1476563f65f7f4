"""The outputs of a shard's call, one dict per row of every kind (`OUTPUT_COLUMNS`): result
rows and deferred CET windows, dead letters, each query's state size and what its events were,
a query's failure; and the records of JSON text (`parse_json_records`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import pandas as pd

from greta_stream.cet.distributed import DEFERRED, to_text
from greta_stream.connectors.jsonl import dumps_payload, dumps_row, loads_many
from greta_stream.engine import DeadLetter
from greta_stream.runtime import RunSpec
from greta_stream.runtime.multi import MultiRunner
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark.eventtime import FLUSH_TYPE
from greta_stream.spark.shard_state import Shard

# One output per row of every kind, each column meaning one thing:
# - "row": a result row; `window_start`/`window_end` (seconds), `grp` (its GROUP-BY
#   values as a JSON list), `payload` (the row as JSON);
# - "deferred": a CET window whose rows the batch writer extracts (spark/cet_distributed.py);
#   the same columns, `payload` the window's graph;
# - "dead": a dead letter; `reason`, and `payload` (reason, detail, event as JSON);
# - "state": what a query's state takes in one shard; `payload` is JSON: bytes, the
#   shard's index and the query's time kind (null: not known yet);
# - "error": a query failed in this shard (the other queries go on): its one-line
#   reason in `payload`.
# Columns a kind does not use are null.
OUTPUT_COLUMNS = ("query", "kind", "window_start", "window_end", "grp", "payload", "reason")


def row_output(spec: RunSpec, name: str, row: dict[str, Any]) -> dict[str, Any]:
    deferred = row.get(DEFERRED)
    if deferred is not None:  # a CET window that the batch writer extracts as a Spark job (cet_distributed.py)
        return {"query": name, "kind": "deferred", "window_start": _seconds(row["window_start"]),
                "window_end": _seconds(row["window_end"]), "grp": dumps_row([row[c] for c in spec.group_columns]),
                "payload": to_text(deferred), "reason": None}
    return {
        "query": name,
        "kind": "row",
        "window_start": _seconds(row["window_start"]),
        "window_end": _seconds(row["window_end"]),
        "grp": dumps_row([row[c] for c in spec.group_columns]),
        "payload": dumps_payload(row),
        "reason": None,
    }


def state_outputs(queries: QuerySet, multi: MultiRunner, shard: Shard, records: Any,
                  sizes: dict[str, int] | None) -> list[dict[str, Any]]:
    """Each query's state output of the batch (both operators): its state bytes (`sizes`; None: the
    shard keeps nothing, every query 0), its time kind and the types its events had."""
    kinds, seen, engines = multi.time_kinds(), types_seen(queries, records), multi.engines()
    sizes = dict.fromkeys(queries.names, 0) if sizes is None else sizes
    return [_state_output(name, shard, size, kinds.get(name), seen.get(name), engines.get(name))
            for name, size in sizes.items()]


def _state_output(name: str, shard: Shard, size: int, time_kind: str | None,
                  seen: tuple[dict[str, int], dict[str, int]] | None = None,
                  engine: tuple[str, str | None] | None = None) -> dict[str, Any]:
    """How many bytes (uncompressed) a query's state takes in this shard now, the
    query's time kind as its runner knows it ("": not known yet), what this
    batch's records were to it (`types_seen`) and the engine it ran on (with why,
    for the general engine: `MultiRunner.engines`)."""
    return {"query": name, "kind": "state", "window_start": None, "window_end": None, "grp": None,
            "payload": state_payload(size, shard.index, time_kind, seen, engine), "reason": None}


def state_payload(size: int, shard: int, time_kind: str | None,
                  seen: tuple[dict[str, int], dict[str, int]] | None = None,
                  engine: tuple[str, str | None] | None = None) -> str:
    doc: dict[str, Any] = {"bytes": size, "shard": shard, "time_kind": time_kind or None}
    if seen is not None and (any(seen[0].values()) or seen[1]):
        doc["typed"], doc["other_types"] = seen
    if engine is not None:
        doc["engine"] = list(engine)
    return dumps_row(doc)


OTHER_TYPES_SAID = 8  # the other types a shard reports per batch (the most frequent)


def types_seen(queries: QuerySet, records: Any) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    """Per running query: how many of the batch's records are of each of its
    types, and the other types by count (some): what tells a query whose
    types match no event (a misspelled or miscased type) from a quiet one."""
    field = queries.fields.type
    if isinstance(records, pd.DataFrame):
        counts = records[field].value_counts() if field in records.columns and len(records) else {}
        by_type = {str(t): int(n) for t, n in counts.items()}
    else:
        tally: Counter[str] = Counter(t for t in (r.get(field) for r in records if isinstance(r, dict))
                                      if isinstance(t, str))
        by_type = dict(tally)
    by_type.pop(FLUSH_TYPE, None)  # the end of input's event is no one's
    if not by_type:
        return {}
    out: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
    for name, spec in queries:
        mine = spec.query.by_type
        others = Counter({t: n for t, n in by_type.items() if t not in mine})
        out[name] = ({t: by_type[t] for t in mine if t in by_type}, dict(others.most_common(OTHER_TYPES_SAID)))
    return out


def error_output(name: str, reason: str) -> dict[str, Any]:
    """A query failed in this shard (the others go on): its one-line reason."""
    return {"query": name, "kind": "error", "window_start": None, "window_end": None, "grp": None, "payload": reason,
            "reason": None}


def dead_output(name: str, d: DeadLetter) -> dict[str, Any]:
    # compact JSON, as result rows are (orjson: fast when a replay makes every event late)
    return {"query": name, "kind": "dead", "window_start": None, "window_end": None, "grp": None,
            "payload": dumps_payload(d.to_dict()), "reason": d.reason}


def _seconds(x: Any) -> float:
    """A window bound as float seconds since the epoch (for sorting and filters)."""
    if hasattr(x, "timestamp"):
        return float(x.timestamp())
    return float(x)


def parse_json_records(values: Iterable[str | None], unique: tuple[str, ...] = ()) -> list[Any]:
    """Records from JSON text; text that is not JSON, nests too deeply or gives a
    key of `unique` twice becomes a `malformed` dead letter (`jsonl.checked`)."""
    lines = values.tolist() if hasattr(values, "tolist") else list(values)
    return loads_many([v if isinstance(v, str) else None for v in lines], unique)
