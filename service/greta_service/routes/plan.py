"""`/plan`: how the running queries share work, stream by stream."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from greta_service.routes.deps import RegistryDep
from greta_stream import plan_units

router = APIRouter(tags=["plan"])


@router.get("/plan")
def plan(registry: RegistryDep) -> dict[str, Any]:
    """Per stream (one per source): its queries, the shard attributes, and the
    planner's units: queries evaluated together (one preparation of the
    events, a kernel pass per window spec) or alone, with the cost estimate
    and, for a query alone, why; and the version of the query set it runs."""
    names = {r.id: r.name for r in registry.store.list_queries()}
    streams = []
    with registry.lock:
        handles = list(registry.streams.values())
    for handle in handles:
        if handle.queries.names:
            plan = plan_units(handle.queries)
            out, text = plan.to_dict(), plan.explain()
        else:  # every query of the stream stopped: it holds them
            out, text = {}, "holds stopped queries only"
        live = handle.writer.live
        out.update(stream=handle.key, text=text, query_names={q: names.get(q, q) for q in handle.query_ids},
                   # the query set it runs (taken at its next micro-batch when it changes) and how many
                   # changes it took without a restart (None: a stream that restarts for each change)
                   query_set_version=live.version if live is not None else None,
                   changes_without_restart=handle.changes if live is not None else None)
        streams.append(out)
    return {"streams": streams}
