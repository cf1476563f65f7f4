"""`PATCH /queries/{id}` is a JSON Merge Patch (RFC 7396) of the query's registration.

Each case registers a query with a value other than the default for every
option, patches one thing, and reads the query back: what the patch named
changed, everything else is as it was, and the query's stream runs it with
the values kept (its lateness in `/plan`). The cases come from the request
schema: an option added to it is a case here at once, and fails until it is
given a value below. A backfill query keeps its lateness through patches, and
its stream drops late events by that lateness.

The merge itself is checked first on the RFC's own examples (no server).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_helpers import Q1, Service, wait_for, write_file

from greta_service.patch import merge_patch
from greta_service.schemas import QueryOptions, QueryUpdate
from greta_service.settings import Settings
from greta_stream.pipeline.validation import model_in

WIDE = Q1.replace("WITHIN 10 minutes", "WITHIN 20 minutes")
FIELDS = {"type": "kind", "time": "ts", "id": "uid"}
STREAM = {"shards": 3, "operator": "transformWithStateInPandas", "fields": FIELDS}  # fixed by the stream's first run
OPTIONS = {"lateness_s": 10, "engine": "general", "trends": "all", "max_trends": 5, "with_events": True,
           "distribute_over": 3, "max_spool_mb": 100, "trigger_interval_s": 2.0, "backfill": False, **STREAM}
ABSENT = object()  # the key is not in the query's record

# RFC 7396, appendix A: (target, patch, result)
RFC_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC_EXAMPLES)
def test_the_merge_is_rfc_7396s(target: Any, patch: Any, result: Any) -> None:
    before = repr(target)
    assert merge_patch(target, patch) == result
    assert repr(target) == before  # the query's record is not changed in place


def option_paths(model: Any = QueryOptions, at: tuple[str, ...] = ("options",)) -> list[tuple[str, ...]]:
    """Every option of a query, and each key of an option that is an object (`fields`), from the schema."""
    paths: list[tuple[str, ...]] = []
    for name, info in model.model_fields.items():
        inner = model_in(info.annotation)
        paths += option_paths(inner, (*at, name)) if inner is not None else [(*at, name)]
    return paths


@dataclass
class Case:
    """A patch, and what it changes in the query's record (`expect`: path -> value), or the refusal it gets."""

    patch: dict[str, Any]
    expect: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    refused: str | None = None


def nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    return {path[0]: value} if len(path) == 1 else {path[0]: nested(path[1:], value)}


def change(path: tuple[str, ...], value: Any) -> Case:
    return Case(nested(path, value), {path: value})


def refusal(path: tuple[str, ...], value: Any, words: str) -> Case:
    return Case(nested(path, value), refused=words)


def cases(root: Path) -> dict[tuple[str, ...], Case]:
    """One patch per field of the request (`root`: the service's folder): a value other than the registered one."""
    o = ("options",)
    reset_cet = {"trends": None, "max_trends": None, "with_events": None, "distribute_over": None}
    return {
        ("text",): change(("text",), WIDE),  # the mode chosen at registration (cet: Q1 implies aggregate) stays
        ("mode",): Case({"mode": "aggregate", "options": reset_cet},
                        {("mode",): "aggregate", (*o, "trends"): "complete", (*o, "with_events"): False,
                         (*o, "max_trends"): ABSENT, (*o, "distribute_over"): ABSENT}),
        ("sinks",): Case({"sinks": [{"format": "parquet", "path": str(root / "out-patched")}]},
                         {("sinks", 0, "format"): "parquet", ("sinks", 0, "path"): str(root / "out-patched")}),
        ("dead_letter",): Case({"dead_letter": {"path": str(root / "dead-patched")}},  # its format stays
                               {("dead_letter", "path"): str(root / "dead-patched")}),
        (*o, "lateness_s"): change((*o, "lateness_s"), 20),
        (*o, "engine"): change((*o, "engine"), "auto"),
        (*o, "trends"): change((*o, "trends"), "complete"),
        (*o, "max_trends"): change((*o, "max_trends"), 7),
        (*o, "with_events"): change((*o, "with_events"), False),
        (*o, "distribute_over"): change((*o, "distribute_over"), 5),
        (*o, "max_spool_mb"): change((*o, "max_spool_mb"), 200),
        (*o, "trigger_interval_s"): change((*o, "trigger_interval_s"), 1.5),
        (*o, "fields", "type"): change((*o, "fields", "type"), "kind2"),  # to the stream that reads kind2
        (*o, "fields", "time"): change((*o, "fields", "time"), "ts2"),
        (*o, "fields", "id"): change((*o, "fields", "id"), "uid2"),
        (*o, "shards"): refusal((*o, "shards"), 4, "shards = 4, but the stream this query joins"),
        (*o, "operator"): refusal((*o, "operator"), "applyInPandasWithState",
                                  "operator = applyInPandasWithState, but the stream this query joins"),
        (*o, "backfill"): refusal((*o, "backfill"), True, "backfill cannot change"),
    }


def default(path: tuple[str, ...]) -> Any:
    """What a null at `path` (an option) leaves in the record: the option's default."""
    if path == ("options", "max_trends"):  # the service's cap, for a CET query
        return Settings.model_fields["max_cet_trends"].default
    model: Any = QueryOptions
    for part in path[1:-1]:
        model = model_in(model.model_fields[part].annotation)
    value = model.model_fields[path[-1]].default
    return ABSENT if value is None else value


def flat(doc: Any, at: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], Any]:
    """A document's values by path (list items by index)."""
    if isinstance(doc, dict) and doc:
        return {k: v for key, value in doc.items() for k, v in flat(value, (*at, key)).items()}
    if isinstance(doc, list) and doc:
        return {k: v for i, value in enumerate(doc) for k, v in flat(value, (*at, i)).items()}
    return {at: doc}


def record(info: dict[str, Any]) -> dict[tuple[Any, ...], Any]:
    """What the query's registration holds, as `GET /queries/{id}` shows it."""
    return flat({k: info[k] for k in ("id", "name", "text", "mode", "source", "sinks", "dead_letter", "options")})


def expected(before: dict[tuple[Any, ...], Any], expect: dict[tuple[Any, ...], Any]) -> dict[tuple[Any, ...], Any]:
    """`before` with each path of `expect` holding its value (ABSENT: gone)."""
    out = dict(before)
    for path, value in expect.items():
        out = {k: v for k, v in out.items() if k[:len(path)] != path}
        if value is not ABSENT:
            out.update(flat(value, path))
    return out


@pytest.fixture(scope="module")
def source(service: Service) -> Iterator[str]:
    """The source of the cases, its stream kept up by a query of its own (so that each case joins it)."""
    src = service.root / "in-patch"
    src.mkdir()
    with service.client() as api:
        r = api.post("/queries", json={"name": "patch-anchor", "text": Q1, "source": {"format": "jsonl", "path": str(src)},
                                       "options": STREAM})
        assert r.status_code == 201, r.text
        yield str(src)
        assert api.delete("/queries/patch-anchor").status_code == 204


def register(api: httpx.Client, service: Service, source: str, name: str) -> dict[str, Any]:
    body = {"name": name, "text": Q1, "mode": "cet", "source": {"format": "jsonl", "path": source},
            "sinks": [{"format": "jsonl", "path": str(service.root / f"out-{name}")}],
            "dead_letter": {"format": "parquet", "path": str(service.root / f"dead-{name}")}, "options": OPTIONS}
    r = api.post("/queries", json=body)
    assert r.status_code == 201, r.text
    info = api.get(f"/queries/{r.json()['id']}").json()
    assert info["options"] == OPTIONS  # every option as given
    return info


def check_patch(api: httpx.Client, service: Service, source: str, name: str, case: Case) -> None:
    """Register, patch, read back: the record as it was but for `case.expect`, and the stream running the query
    with the lateness the record says."""
    before = register(api, service, source, name)
    query_id = before["id"]
    try:
        r = api.patch(f"/queries/{query_id}", json=case.patch)
        after = api.get(f"/queries/{query_id}").json()
        if case.refused is not None:
            assert r.status_code == 422, r.text
            assert case.refused in r.json()["detail"]
            assert record(after) == record(before)  # a refused patch changes nothing
        else:
            assert r.status_code == 200, r.text
            assert record(after) == expected(record(before), case.expect)
            assert record(r.json()) == record(after)
        assert after["status"] == "running"
        (stream,) = [s for s in api.get("/plan").json()["streams"] if s["stream"] == after["progress"]["stream"]]
        assert query_id in stream["queries"]
        assert stream["lateness_s"][query_id] == after["options"].get("lateness_s", 0)  # what the stream runs
    finally:
        assert api.delete(f"/queries/{query_id}").status_code == 204


PATHS = [(name,) for name in QueryUpdate.model_fields if name != "options"] + option_paths()


def test_every_field_of_the_request_has_a_case() -> None:
    assert set(cases(Path("/data"))) == set(PATHS)


@pytest.mark.service
@pytest.mark.parametrize("path", PATHS, ids=".".join)
def test_a_patch_changes_what_it_names_and_keeps_the_rest(service: Service, source: str, path: tuple[str, ...]) -> None:
    case = cases(service.root).get(path)
    if case is None:
        pytest.fail(f"{'.'.join(path)} is new in the request schema: give it a case in cases()")
    with service.client() as api:
        check_patch(api, service, source, f"patch-{'-'.join(path)}", case)


@pytest.mark.service
@pytest.mark.parametrize("path", option_paths(), ids=".".join)
def test_a_null_resets_an_option_to_its_default_and_keeps_the_rest(service: Service, source: str,
                                                                   path: tuple[str, ...]) -> None:
    with service.client() as api:
        check_patch(api, service, source, f"null-{'-'.join(path)}", Case(nested(path, None), {path: default(path)}))


@pytest.mark.service
def test_a_backfill_query_keeps_its_lateness_through_patches(service: Service) -> None:
    """Patching a backfill query's lateness is no change of its backfill; patching its engine keeps its
    lateness, and its stream runs by it: an event 8 s behind the latest is late at lateness 5 or 0, not 10."""
    src, base = service.root / "in-patch-late", time.time() - 3600
    src.mkdir()
    with service.client() as api:
        ids = {}
        for name, lateness in (("patch-late", 5), ("patch-late-0", 0)):
            r = api.post("/queries", json={"name": name, "text": Q1,
                                           "source": {"format": "jsonl", "path": str(src), "max_files_per_trigger": 1},
                                           "options": {"backfill": True, "lateness_s": lateness}})
            assert r.status_code == 201, r.text
            ids[name] = r.json()["id"]
        r = api.patch("/queries/patch-late", json={"options": {"lateness_s": 10}})
        assert r.status_code == 200, r.text
        assert r.json()["options"]["backfill"] is True and r.json()["options"]["lateness_s"] == 10
        r = api.patch("/queries/patch-late", json={"options": {"engine": "general"}})
        assert r.status_code == 200, r.text
        assert r.json()["options"]["lateness_s"] == 10 and r.json()["options"]["engine"] == "general"

        stock = {"type": "Stock", "company": 1, "sector": 1, "price": 10.0, "volume": 100}
        write_file(src, "events-0.jsonl", [{**stock, "id": 0, "time": 1000.0}], stamp=base)
        write_file(src, "events-1.jsonl", [{**stock, "id": 1, "time": 992.0}, "{not json"], stamp=base + 1)

        def second_batch(name: str) -> Any:  # the malformed line comes with the late event
            p = api.get(f"/queries/{ids[name]}").json()["progress"]
            return p["dead_letters_by_reason"].get("malformed") and p

        assert wait_for(lambda: second_batch("patch-late-0"), "the second file at lateness 0", service)["late"] == 1
        kept = wait_for(lambda: second_batch("patch-late"), "the second file at lateness 10", service)
        assert kept["late"] == 0
        plan = {s["stream"]: s for s in api.get("/plan").json()["streams"]}
        assert plan[kept["stream"]]["lateness_s"][ids["patch-late"]] == 10
        for query_id in ids.values():
            assert api.delete(f"/queries/{query_id}").status_code == 204
