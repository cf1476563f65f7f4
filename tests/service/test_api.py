"""The HTTP API against a real server: register, read results equal to `evaluate`, errors, auth, limits.

Assert the status first, then the body (STYLE.md).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from service_helpers import (
    API_KEY,
    FLUSH,
    Q1,
    Service,
    all_results,
    normalized,
    query_progress,
    sample_events,
    settled,
    wait_for,
    write_file,
)

from greta_stream import evaluate
from greta_stream.compiler.compiled import compile_query
from greta_stream.connectors.jsonl import dumps, loads
from greta_stream.connectors.sinks import read_jsonl_dir
from greta_stream.errors import QueryError

pytestmark = pytest.mark.service

BAD_QUERY = "RETURN COUNT(*)\nPATTERN (NOT A)+\nWHERE A.x > NEXT(B).y\nWITHIN 1 s"


def body(service: Service, name: str, **over: object) -> dict:
    src = service.root / f"in-{name}"
    src.mkdir(exist_ok=True)
    spec = {"name": name, "text": Q1, "source": {"format": "jsonl", "path": str(src)},
            "sinks": [{"format": "jsonl", "path": str(service.root / f"out-{name}")}],
            "dead_letter": {"format": "jsonl", "path": str(service.root / f"dead-{name}")},
            "options": {"shards": 2}}
    return {**spec, **over}


@pytest.fixture(scope="module")
def q1(service: Service) -> Iterator[dict]:
    """Q1 registered over the bundled stock events, run until every window closed."""
    events = sample_events()
    expected = evaluate(Q1, events)
    with service.client() as api:
        spec = body(service, "q1-api")
        write_file(service.root / "in-q1-api", "events.jsonl", [*events, "{not json"])
        r = api.post("/queries", json=spec)
        assert r.status_code == 201, r.text
        created = r.json()
        write_file(service.root / "in-q1-api", "flush.jsonl", [FLUSH], stamp=None)
        info = wait_for(settled(api, created["id"], len(expected)), "Q1 results", service)
    yield {"created": created, "expected": expected, "info": info, "spec": spec}
    with service.client() as api:  # a stopped query costs the other modules nothing
        assert api.post(f"/queries/{created['id']}/stop").status_code == 200


def test_register_answers_201_with_id_and_explain(q1: dict) -> None:
    created = q1["created"]
    assert created["status"] == "running"
    assert created["explain"] == compile_query(Q1).explain()
    assert created["columns"] == ["window_start", "window_end", "sector", "count", "avg_S_price"]


def test_results_equal_evaluate_in_store_and_sinks(api: httpx.Client, q1: dict, service: Service) -> None:
    query_id, expected = q1["created"]["id"], q1["expected"]
    got = all_results(api, query_id)
    assert normalized(got) == normalized(expected)
    assert q1["info"]["progress"]["engine"] == "columnar"  # what its micro-batches ran on, as the shards said
    assert len(got) == len(expected)  # no duplicates
    assert got == sorted(got, key=lambda r: (r["window_start"], dumps([r["sector"]])))
    assert normalized(list(read_jsonl_dir(service.root / "out-q1-api"))) == normalized(expected)
    info = api.get(f"/queries/{query_id}").json()
    assert info["progress"]["result_rows"] == len(expected)
    assert info["progress"]["dead_letters_by_reason"] == {"malformed": 1}
    # Spark moves its watermark at the end of the batch that read the flush event (its rows are already
    # stored then): the report with the new watermark comes with the next micro-batch
    wait_for(lambda: query_progress(api, query_id)["watermark_s"] == FLUSH["time"], "the flushed watermark", service)


def test_queries_are_addressed_by_name_as_well_as_id(api: httpx.Client, q1: dict) -> None:
    query_id = q1["created"]["id"]
    assert api.get("/queries/q1-api").json()["id"] == query_id
    by_name = api.get("/queries/q1-api/results", params={"limit": 5}).json()
    assert by_name == api.get(f"/queries/{query_id}/results", params={"limit": 5}).json()
    assert api.get("/queries/q1-api/latest").status_code == 200
    r = api.get("/queries/no-such-query/results")
    assert r.status_code == 404 and "no-such-query" in r.json()["detail"]


def test_results_filter_by_window_and_group_and_page(api: httpx.Client, q1: dict) -> None:
    query_id, expected = q1["created"]["id"], q1["expected"]
    want = [r for r in expected if r["sector"] == 2 and -100 <= r["window_start"] <= 50]
    for group in ("2", "[2]"):
        got = all_results(api, query_id, group=group, **{"from": -100, "to": 50})
        assert normalized(got) == normalized(want)
    r = api.get(f"/queries/{query_id}/results", params={"limit": 7, "offset": 3})
    assert r.status_code == 200
    page = r.json()
    assert (page["total"], page["offset"], page["limit"], page["next_offset"]) == (len(expected), 3, 7, 10)
    assert len(page["rows"]) == 7
    r = api.get(f"/queries/{query_id}/results", params={"from": "yesterday"})
    assert r.status_code == 422
    assert "from" in r.json()["detail"]


def test_results_stream_pushes_rows_as_server_sent_events(api: httpx.Client, q1: dict) -> None:
    query_id = q1["created"]["id"]
    stored = api.get(f"/queries/{query_id}/results", params={"limit": 1})
    last = stored.json()["last_seq"]
    events = []
    with api.stream("GET", f"/queries/{query_id}/results/stream", params={"after": last - 3}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(loads(line[len("data: "):]))
                if len(events) == 3:
                    break
    assert all(e in q1["expected"] for e in events)


def test_bad_query_answers_422_with_positions_and_registers_nothing(api: httpx.Client, service: Service) -> None:
    before = api.get("/queries").json()["queries"]
    checkpoints = set((service.data / "checkpoints").iterdir())
    r = api.post("/queries", json=body(service, "bad", text=BAD_QUERY))
    assert r.status_code == 422
    with pytest.raises(QueryError) as exc:
        compile_query(BAD_QUERY)
    want = [{"msg": p.msg, "line": p.line, "column": p.column} for p in exc.value.problems]
    assert len(want) >= 2
    assert [{k: e[k] for k in ("msg", "line", "column")} for e in r.json()["errors"]] == want
    assert [q["id"] for q in api.get("/queries").json()["queries"]] == [q["id"] for q in before]
    assert set((service.data / "checkpoints").iterdir()) == checkpoints
    r = api.post("/queries/validate", json={"text": BAD_QUERY})
    assert r.status_code == 422
    assert [e["line"] for e in r.json()["errors"]] == [w["line"] for w in want]
    r = api.post("/queries/validate", json={"text": Q1})
    assert r.status_code == 200
    assert r.json()["explain"] == compile_query(Q1).explain()


def test_the_list_of_queries_comes_in_pages(api: httpx.Client, q1: dict) -> None:
    """`GET /queries?limit=&offset=` gives a page of the whole list, in its order, with the total and the
    next page's offset; a bad page is a 422."""
    whole = api.get("/queries").json()
    assert whole["total"] == len(whole["queries"]) >= 1 and whole["next_offset"] is None
    ids, pages, offset = [q["id"] for q in whole["queries"]], [], 0
    while offset is not None:
        r = api.get("/queries", params={"limit": 1, "offset": offset})
        assert r.status_code == 200, r.text
        page = r.json()
        assert page["total"] == len(ids) and page["offset"] == offset and len(page["queries"]) == 1
        pages += [q["id"] for q in page["queries"]]
        offset = page["next_offset"]
    assert pages == ids
    past = api.get("/queries", params={"limit": 5, "offset": len(ids)})
    assert past.status_code == 200 and past.json()["queries"] == [] and past.json()["next_offset"] is None
    assert api.get("/queries", params={"limit": 0}).status_code == 422
    assert api.get("/queries", params={"offset": -1}).status_code == 422


def test_validate_takes_the_body_of_a_registration_and_tells_of_deprecated_names(api: httpx.Client,
                                                                                  service: Service) -> None:
    """The body of `POST /queries` as it is: checked as a registration would be, nothing registered; a
    renamed setting is answered with a warning and a `Deprecation` header."""
    before = api.get("/queries").json()["queries"]
    r = api.post("/queries/validate", json=body(service, "v"))
    assert r.status_code == 200, r.text
    assert r.json()["explain"] == compile_query(Q1).explain() and r.json()["warnings"] == []
    assert "Deprecation" not in r.headers
    old = body(service, "v", options={"shards": 2, "watermark_delay_s": 3})
    r = api.post("/queries/validate", json=old)
    assert r.status_code == 200, r.text
    assert r.json()["warnings"] == ["watermark_delay_s is deprecated: use lateness_s (same meaning)"]
    assert r.headers["Deprecation"] == "true"
    r = api.post("/queries/validate", json=body(service, "v", source={"format": "jsonl", "path": "/no/such/dir"}))
    assert r.status_code == 422  # what the registration would answer
    assert [q["id"] for q in api.get("/queries").json()["queries"]] == [q["id"] for q in before]


def test_every_endpoint_but_health_needs_the_api_key(service: Service, q1: dict) -> None:
    query_id = q1["created"]["id"]
    for key in (None, "wrong-key"):
        with service.client(key=key) as anon:
            for method, path in [("POST", "/queries"), ("POST", f"/queries/{query_id}/stop"),
                                 ("POST", f"/queries/{query_id}/start"), ("DELETE", f"/queries/{query_id}")]:
                r = anon.request(method, path, json=body(service, "anon") if path == "/queries" else None)
                assert r.status_code == 401, (method, path, r.text)
                assert "API key" in r.json()["detail"]
            for path in (f"/queries/{query_id}", f"/queries/{query_id}/results", "/queries", "/metrics", "/plan",
                         "/openapi.json", "/docs"):  # reads too, when a key is set
                r = anon.get(path)
                assert r.status_code == 401, (path, r.text)
            assert anon.post("/queries/validate", json={"text": Q1}).status_code == 401
            assert anon.get("/").status_code == 401 and "/?key=" in anon.get("/").text
            assert anon.get("/healthz").status_code == 200 and anon.get("/readyz").status_code == 200
    with service.client() as api:
        assert api.get(f"/queries/{query_id}").json()["status"] == "running"
        assert api.get("/metrics").status_code == 200 and api.get("/openapi.json").status_code == 200
    with service.client(key=None) as browser:  # the page takes the key once and keeps it in a cookie
        r = browser.get(f"/?key={API_KEY}", follow_redirects=True)
        assert r.status_code == 200 and r.url.path == "/" and "key=" not in str(r.url)
        assert browser.get(f"/queries/{query_id}").status_code == 200
        assert browser.get("/?key=wrong").status_code == 200  # the cookie still holds the right one
        assert browser.get("/queries").status_code == 200


def test_serve_refuses_to_bind_beyond_loopback_without_a_key(tmp_path) -> None:  # noqa: ANN001
    env = {k: v for k, v in __import__("os").environ.items() if k != "GRETA_API_KEY"}
    r = subprocess.run([sys.executable, "-m", "greta_stream", "serve", "--host", "0.0.0.0", "--data-dir",
                        str(tmp_path)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2
    assert "API key" in r.stderr


def test_limits_answer_clear_errors(api: httpx.Client, service: Service) -> None:
    cases = [
        (body(service, "long", text=Q1 + "-- " + "x" * 5000), 422, "max_query_chars"),
        (body(service, "shards", options={"shards": 9}), 422, "max_shards"),
        (body(service, "outside", source={"format": "jsonl", "path": "/etc"}), 422, "path_roots"),
        (body(service, "missing", source={"format": "jsonl", "path": str(service.root / "nope")}), 422,
         "does not exist"),
        (body(service, "field", source={"format": "jsonl", "path": str(service.root), "colour": "red"}), 422,
         '"colour"'),
        (body(service, "sinkfmt", sinks=[{"format": "xml", "path": str(service.root / "x")}]), 422,
         "'jsonl', 'parquet', 'delta', 'console' or 'kafka'"),
        ({**body(service, "big"), "padding": "x" * 20000}, 413, "max_request_bytes"),
    ]
    for spec, status, words in cases:
        r = api.post("/queries", json=spec)
        assert r.status_code == status, (spec["name"], r.text)
        assert words in r.text, (spec["name"], r.text)
    names = {q["name"] for q in api.get("/queries").json()["queries"]}
    assert not names & {"long", "shards", "outside", "missing", "field", "sinkfmt", "big"}


def test_cet_mode_is_passed_through_with_a_capped_trend_count(api: httpx.Client, service: Service) -> None:
    trends_query = "RETURN TRENDS PATTERN Stock S+ WHERE [company] AND S.price > NEXT(S).price WITHIN 1 min"
    r = api.post("/queries", json=body(service, "cet-big", mode="cet", options={"max_trends": 10**6}))
    assert r.status_code == 422
    assert "max_cet_trends" in r.json()["detail"]
    r = api.post("/queries", json=body(service, "cet-agg", text=trends_query, mode="aggregate"))
    assert r.status_code == 422
    assert "use mode cet" in r.json()["detail"]
    r = api.post("/queries/validate", json={"text": trends_query})
    assert r.status_code == 200
    assert (r.json()["mode"], r.json()["columns"]) == ("cet", ["window_start", "window_end", "trend", "total",
                                                              "truncated"])
    r = api.post("/queries", json=body(service, "cet", text=trends_query, sinks=[], options={"trends": "all"}))
    assert r.status_code == 201, r.text
    query_id = r.json()["id"]
    info = api.get(f"/queries/{query_id}").json()
    assert info["mode"] == "cet"
    assert info["options"]["max_trends"] == 10_000  # the service's max_cet_trends, as the default cap
    assert api.delete(f"/queries/{query_id}").status_code == 204


def test_duplicate_name_conflicts(api: httpx.Client, service: Service, q1: dict) -> None:
    r = api.post("/queries", json=q1["spec"])
    assert r.status_code == 409
    assert "already registered" in r.json()["detail"]


def test_stop_start_delete(api: httpx.Client, service: Service) -> None:
    spec = body(service, "lifecycle")
    write_file(service.root / "in-lifecycle", "events.jsonl", sample_events()[:200])
    r = api.post("/queries", json=spec)
    assert r.status_code == 201, r.text
    query_id = r.json()["id"]
    r = api.post(f"/queries/{query_id}/stop")
    assert r.status_code == 200
    assert r.json()["status"] == "stopped"
    r = api.post(f"/queries/{query_id}/start")
    assert r.status_code == 200
    assert r.json()["status"] == "running"
    stream = r.json()["progress"]["stream"]  # the stream of its source: its checkpoint holds the query's state
    assert stream and (service.data / "checkpoints" / stream).exists()
    r = api.delete(f"/queries/{query_id}")
    assert r.status_code == 204
    assert api.get(f"/queries/{query_id}").status_code == 404
    assert api.get(f"/queries/{query_id}/results").status_code == 404
    assert api.post(f"/queries/{query_id}/start").status_code == 404
    assert not (service.data / "checkpoints" / stream).exists()  # no query reads that source any more


def test_health_ready_and_metrics(api: httpx.Client, q1: dict) -> None:
    assert api.get("/healthz").json() == {"status": "ok", "detail": None}
    r = api.get("/readyz")
    assert r.status_code == 200
    r = api.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(r.text) for s in family.samples}
    query_id = q1["created"]["id"]
    stream = api.get(f"/queries/{query_id}").json()["progress"]["stream"]
    mine = (("id", query_id), ("query", "q1-api"), ("stream", stream))
    assert samples[("greta_query_result_rows_total", mine)] == len(q1["expected"])
    assert samples[("greta_query_dead_letters_total", (*mine[:2], ("reason", "malformed"), mine[2]))] == 1
    assert samples[("greta_ready", ())] == 1
    # every micro-batch of the query's stream, as Spark reported it: all its input (the events, the bad line
    # and the end of input; not the stream's control rows) and a duration each
    assert samples[("greta_stream_input_rows_total", (("stream", stream),))] == len(sample_events()) + 2
    batches = samples[("greta_stream_batches_total", (("stream", stream),))]
    assert batches >= 1
    assert samples[("greta_stream_batch_duration_seconds_count", (("stream", stream),))] == batches


def test_latest_rows_and_exports(api: httpx.Client, q1: dict) -> None:
    import csv
    import io

    import pyarrow.parquet as pq

    query_id, expected = q1["created"]["id"], q1["expected"]
    newest: dict[str, dict] = {}
    for row in expected:
        if row["sector"] not in newest or row["window_start"] > newest[row["sector"]]["window_start"]:
            newest[row["sector"]] = row
    latest = api.get(f"/queries/{query_id}/latest").json()
    assert normalized(latest["rows"]) == normalized(list(newest.values()))

    jsonl = api.get(f"/queries/{query_id}/results/export", params={"format": "jsonl"})
    assert normalized([loads(line) for line in jsonl.text.splitlines()]) == normalized(expected)
    csv_rows = list(csv.DictReader(io.StringIO(api.get(f"/queries/{query_id}/results/export",
                                                      params={"format": "csv"}).text)))
    assert len(csv_rows) == len(expected) and list(csv_rows[0]) == q1["created"]["columns"]
    parquet = api.get(f"/queries/{query_id}/results/export", params={"format": "parquet", "group": "3"})
    assert parquet.headers["content-disposition"] == 'attachment; filename="q1-api.parquet"'
    table = pq.read_table(io.BytesIO(parquet.content)).to_pylist()
    assert normalized(table) == normalized([r for r in expected if r["sector"] == 3])
    assert api.get(f"/queries/{query_id}/results/export", params={"format": "xlsx"}).status_code == 422


def test_logs_are_json_lines(service: Service, q1: dict) -> None:
    """With --log-json every line the service's Python logs is one JSON object (Spark's JVM lines are its own)."""
    import json

    lines = [json.loads(line) for line in service.log.read_text(errors="replace").splitlines() if line.startswith("{")]
    assert any(r["logger"] == "greta_service" and r["message"].startswith("service ready") for r in lines)
    assert any(r["logger"] == "uvicorn.access" for r in lines)  # requests, through the same handler
    # uvicorn's life cycle is routine, not an error: under `uvicorn`, `uvicorn.error` for warnings and worse
    assert any(r["logger"] == "uvicorn" and r["message"].startswith("Started server process") for r in lines)
    assert [r for r in lines if r["logger"] == "uvicorn.error" and r["level"] in ("DEBUG", "INFO")] == []
    assert all(set(r) >= {"time", "level", "logger", "message"} for r in lines)


def test_an_unknown_key_is_named_with_a_close_match(api: httpx.Client, service: Service) -> None:
    """As the pipeline config's checker says it: where, a close match, the keys known there."""
    spec = body(service, "unknown-key")
    spec["options"] = {"watermark_delay": 30}
    r = api.post("/queries", json=spec)
    assert r.status_code == 422
    assert r.json()["detail"].startswith("unknown key 'watermark_delay' in options (did you mean 'lateness_s'?")
    spec = body(service, "unknown-key")
    spec["sinks"][0]["pth"] = "x"
    r = api.post("/queries", json=spec)
    assert r.status_code == 422 and "unknown key 'pth' in sinks[0] (did you mean 'path'?" in r.json()["detail"]
    assert api.get("/queries/unknown-key").status_code == 404


def test_a_misspelled_attribute_shows_in_the_querys_progress(api: httpx.Client, service: Service) -> None:
    """Every event dead-lettered for one missing attribute and no rows: the progress says which
    attribute and what the events have, beside the dead letters' reasons."""
    spec = body(service, "prize", text=Q1.replace("AVG(S.price)", "AVG(S.prize)"))
    write_file(service.root / "in-prize", "events.jsonl", sample_events()[:300])
    r = api.post("/queries", json=spec)
    assert r.status_code == 201, r.text
    query_id = r.json()["id"]
    progress = wait_for(lambda: (p := query_progress(api, query_id))["dead_letters"] >= 300 and p,
                        "the dead letters", service)
    assert progress["result_rows"] == 0
    assert progress["dead_letter_summary"].startswith("300 dead letters: 300 missing_attribute")
    assert ("attribute 'prize' of S is on no Stock event (they have company, id, price, sector, time, type, volume); "
            "did you mean 'price'?") in progress["problem"]
    assert api.delete(f"/queries/{query_id}").status_code == 204


def test_a_misspelled_type_shows_in_the_querys_progress(api: httpx.Client, service: Service) -> None:
    """`stock` for `Stock`: no event is of the query's type, so no row and no dead letter either;
    the progress says so, with the types the events have and the close one."""
    spec = body(service, "lower", text=Q1.replace("PATTERN Stock S+", "PATTERN stock S+"))
    write_file(service.root / "in-lower", "events.jsonl", sample_events()[:300])
    r = api.post("/queries", json=spec)
    assert r.status_code == 201, r.text
    query_id = r.json()["id"]
    progress = wait_for(lambda: (p := query_progress(api, query_id))["problem"] and p, "the problem", service)
    assert progress["result_rows"] == progress["dead_letters"] == 0
    assert progress["problem"] == ("no event is of a type of the query (stock); the events' types are Stock (300); "
                                   "did you mean 'Stock' for 'stock'?")
    assert api.delete(f"/queries/{query_id}").status_code == 204


STRATEGY_QUERY = """RETURN sector, COUNT(*), AVG(H.price), MAX(S.price)
PATTERN SEQ(Stock A, Stock H?, Stock S{2,})
SEMANTICS skip-till-next-match
WHERE [company, sector] AND S.price > NEXT(S).price
GROUP-BY sector WITHIN 10 minutes SLIDE 5 minutes"""


def test_a_selection_strategy_and_repetitions_run_in_the_service(service: Service, api: httpx.Client) -> None:
    """SEMANTICS and bounded repetition through REST: the rows (nulls of an optional
    part's AVG included) equal `evaluate`, explain names the selection and the engine."""
    events = sample_events()
    expected = evaluate(STRATEGY_QUERY, events)
    assert expected
    spec = body(service, "strategy", text=STRATEGY_QUERY)
    write_file(service.root / "in-strategy", "events.jsonl", events)
    r = api.post("/queries", json=spec)
    assert r.status_code == 201, r.text
    created = r.json()
    assert "selection: skip-till-next-match" in created["explain"]
    write_file(service.root / "in-strategy", "flush.jsonl", [FLUSH], stamp=None)
    wait_for(settled(api, created["id"], len(expected)), "strategy results", service)
    assert normalized(all_results(api, created["id"])) == normalized(expected)
    assert api.post(f"/queries/{created['id']}/stop").status_code == 200
