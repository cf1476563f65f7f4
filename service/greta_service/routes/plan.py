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
    and, for a query alone, why."""
    names = {r.id: r.name for r in registry.store.list_queries()}
    streams = []
    with registry.lock:
        handles = list(registry.streams.values())
    for handle in handles:
        plan = plan_units(handle.queries)
        out = plan.to_dict()
        out["stream"] = handle.key
        out["text"] = plan.explain()
        out["query_names"] = {q: names.get(q, q) for q in handle.query_ids}
        streams.append(out)
    return {"streams": streams}
