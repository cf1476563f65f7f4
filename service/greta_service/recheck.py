"""The registration's guards, run again on registered queries: at each start, and when a query is started.

A registry written by an older version, or edited, can hold a query that the checks of today
(`guards`: allowed options and Kafka hosts, paths under `path_roots` and away from the service's
own files, source trees without links back into the data folder or round in a loop, no folder
written where another query reads or writes) refuse. `recheck` runs them on every registered query
in registration order, each against the queries before it that passed (so of two queries in
conflict, the later one, the one a registration would have refused, fails); a query that fails is
marked failed with the guard's message, logged, and not started, while the others run.
`refusal` is the same check of one query against the others that are not failed, before
`Registry.start` starts it again (so the query that failed stays the one refused); `source_refusal`
that of a stream's source alone, before a stream of stopped and failed queries only goes on reading
it (`Registry._restart`): a source the guards refuse is read by no stream.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from greta_service.guards import check_places, places
from greta_service.roster import Folders, delta_of
from greta_service.store import QueryRecord
from greta_stream import ConfigError
from greta_stream.client import ServiceError
from greta_stream.pipeline.model import delta_tables_shared

if TYPE_CHECKING:
    from greta_service.registry import Registry

log = logging.getLogger("greta_service")


def recheck(registry: Registry) -> dict[str, str]:
    """Fail every registered query the guards refuse now (module docstring); their errors by id. A source
    is checked once for the queries that share it (its tree walked once)."""
    passed = Folders()
    sources: dict[str, str | None] = {}
    failed: dict[str, str] = {}
    for rec in registry.store.list_queries():  # in registration order
        key = json.dumps(rec.source, sort_keys=True, default=str)
        if key not in sources:
            sources[key] = source_refusal(registry, rec)
        problem = sources[key] or _problem(registry, rec, passed)
        if problem is None:
            passed.add(rec, registry.settings.data_dir)
            continue
        failed[rec.id] = problem
        log.error("query %s (%s) is not started: the registration's checks refuse it now: %s", rec.name, rec.id,
                  problem)
        if (rec.status, rec.error) != ("failed", problem):
            rec.status, rec.error = "failed", problem
            registry.store.save_query(rec)
    return failed


def refusal(registry: Registry, rec: QueryRecord) -> str | None:
    """Why the guards refuse `rec` now, against every other registered query but the failed ones (of two in
    conflict, the one that runs or stands stopped keeps its folders); None: they do not."""
    others = Folders()
    for other in registry.store.list_queries():
        if other.id != rec.id and other.status != "failed":
            others.add(other, registry.settings.data_dir)
    return source_refusal(registry, rec) or _problem(registry, rec, others)


def refuse_start(registry: Registry, rec: QueryRecord) -> None:
    """`Registry.start`: a 409 (and the query failed with the guard's message) when the guards refuse it now."""
    problem = refusal(registry, rec)
    if problem is not None:
        rec.status, rec.error = "failed", problem
        registry.store.save_query(rec)
        raise ServiceError(409, f"the query could not start: {problem}")


def source_refusal(registry: Registry, rec: QueryRecord) -> str | None:
    """Why the guards refuse the source of `rec` (and of every query of its stream) now; None: they do not."""
    try:
        registry._paths(registry._guarded(dict(rec.source), "source"), "source", must_exist=True)
    except ServiceError as exc:
        return exc.detail
    except Exception as exc:  # noqa: BLE001 - a record no check can read (an edited registry): not started
        return f"the query's source cannot be checked: {type(exc).__name__}: {exc}"
    return None


def _problem(registry: Registry, rec: QueryRecord, others: Folders) -> str | None:
    """Why the guards refuse the sinks and dead letters of `rec`, or its folders against `others`."""
    try:
        for what, spec in (*(("sink", s) for s in rec.sinks), ("dead_letter", rec.dead_letter)):
            if spec:
                registry._paths(registry._guarded(dict(spec), what), what)
        mine = places(rec.name, rec.source, rec.sinks, rec.dead_letter, registry.settings.data_dir)
        check_places(mine, others.near(mine))
        shared = delta_tables_shared([*others.delta, *delta_of(rec)])
        if shared:
            return str(shared)
    except ServiceError as exc:
        return exc.detail
    except ConfigError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - a record no check can read (an edited registry): not started
        return f"the query's registration cannot be checked: {type(exc).__name__}: {exc}"
    return None
