"""`/plan`: how the running queries share work, stream by stream.

The planner knows a stream's queries by id; a reader knows them by name. So
wherever the plan lists query ids (`queries`) it lists their names beside them
(`names`, in the same order), `by_query` gives each query's entry with both,
and the text names each query as `name [id]`.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter

from greta_service.routes.deps import RegistryDep
from greta_stream import plan_units

router = APIRouter(tags=["plan"])


@router.get("/plan")
def plan(registry: RegistryDep) -> dict[str, Any]:
    """Per stream (one per source): its queries (`queries` their ids, `names` their names, `by_query` each
    query's name, shard attributes, lateness and unit), and the planner's units: queries evaluated together
    (one preparation of the events, a kernel pass per window spec) or alone, with the cost estimate and, for a
    query alone, why; and the version of the query set it runs."""
    names = {r.id: r.name for r in registry.store.list_queries()}
    streams = []
    with registry.lock:
        handles = list(registry.streams.values())
    for handle in handles:
        if handle.queries.names:
            plan = plan_units(handle.queries)
            out, text = plan.to_dict(), plan.explain()
        else:  # every query of the stream stopped: it holds them (the keys of a plan, none running)
            out, text = {"queries": [], "shard_attributes": {}, "lateness_s": {}, "units": []}, "holds stopped queries only"
        live = handle.writer.live
        out.update(stream=handle.key, text=text, query_names={q: names.get(q, q) for q in handle.query_ids},
                   # the query set it runs (taken at its next micro-batch when it changes) and how many
                   # changes it took without a restart (None: a stream that restarts for each change)
                   query_set_version=live.version if live is not None else None,
                   changes_without_restart=handle.changes if live is not None else None)
        streams.append(named(out, names))
    return {"streams": streams}


def named(stream: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """A stream's plan with its queries' names beside their ids (see the module's docstring)."""
    out = _with_names(stream, names)
    units = out.get("units", [])
    out["by_query"] = [{"id": q, "name": names.get(q, q), "shard_attributes": out["shard_attributes"].get(q),
                        "lateness_s": out["lateness_s"].get(q),
                        "unit": next((i for i, u in enumerate(units) if q in u["queries"]), None)}
                       for q in out.get("queries", [])]
    if out["by_query"]:
        ids = re.compile(r"\b(" + "|".join(re.escape(q["id"]) for q in out["by_query"]) + r")\b")
        out["text"] = ids.sub(lambda m: f"{names.get(m.group(1), m.group(1))} [{m.group(1)}]", out["text"])
    return out


def _with_names(value: Any, names: dict[str, str]) -> Any:
    """`value` with `names` beside each list of query ids (`queries`), at any depth (units, passes, states)."""
    if isinstance(value, list):
        return [_with_names(v, names) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _with_names(v, names) for k, v in value.items()}
    if isinstance(out.get("queries"), list):
        out["names"] = [names.get(q, q) for q in out["queries"]]
    return out
