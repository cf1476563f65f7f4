"""The pieces under the service that need no server: the SQLite store's exactly-once batches, settings sources.

No Spark, no uvicorn: these run in milliseconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greta_service.settings import Settings
from greta_service.store import QueryRecord, ResultRow, SQLiteStore
from greta_stream.errors import ConfigError


def row(ws: float, grp: str, n: int) -> ResultRow:
    return ResultRow(ws, ws + 10, grp, f'{{"window_start": {ws}, "g": {grp}, "count": {n}}}')


def test_a_replayed_batch_replaces_its_rows(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    store.write_batch("q", 0, [row(0, "[1]", 1), row(0, "[2]", 2)], {})
    store.write_batch("q", 1, [row(10, "[1]", 3)], {"late": 1})
    store.write_batch("q", 1, [row(10, "[1]", 3)], {"late": 1})  # Spark replays batch 1 after a crash
    store.write_batch("other", 1, [row(10, "[1]", 9)], {})
    total, payloads = store.page("q")
    assert total == 3
    assert [p.split('"count": ')[1] for p in payloads] == ["1}", "2}", "3}"]
    counts = store.counts("q")
    assert (counts.rows, counts.batches, counts.last_batch_id, counts.dead_by_reason) == (3, 2, 1, {"late": 1})
    assert store.page("q", grp="[1]", start_min=5)[0] == 1
    assert store.page("q", start_max=5, limit=1, offset=1)[1] == [row(0, "[2]", 2).payload]
    assert [p for _, p in store.after("q", store.last_seq("q") - 1)] == [row(10, "[1]", 3).payload]
    store.close()


def test_the_registry_survives_reopening_and_delete_forgets_results(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    store.save_query(QueryRecord(id="a1", name="q", text="RETURN COUNT(*) PATTERN A WITHIN 1 s", desired="stopped"))
    store.write_batch("a1", 0, [row(0, "[]", 1)], {})
    store.close()
    again = SQLiteStore(tmp_path / "s.sqlite")
    rec = again.get_query("a1")
    assert rec is not None
    assert (rec.name, rec.desired) == ("q", "stopped")
    again.delete_query("a1")
    assert again.get_query("a1") is None
    assert again.page("a1") == (0, [])
    assert again.counts("a1").batches == 0


def test_settings_come_from_file_then_environment_then_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "service.toml"
    cfg.write_text('[service]\nport = 9000\nmax_shards = 4\ndata_dir = "from-file"\n')
    env = {"GRETA_PORT": "9100", "GRETA_API_KEY": "k", "GRETA_PATH_ROOTS": "/a:/b"}
    s = Settings.load(cfg, environ=env, data_dir=Path("from-flag"), host=None)
    assert (s.port, s.max_shards, s.api_key, s.data_dir, s.host) == (9000 + 100, 4, "k", Path("from-flag"), "127.0.0.1")
    assert s.path_roots == (Path("/a"), Path("/b"))
    yaml = tmp_path / "service.yaml"
    yaml.write_text("state_budget_bytes: 3000\n")
    assert Settings.load(yaml, environ={}).state_budget_bytes == 3000
    with pytest.raises(ConfigError, match="max_shards"):
        Settings.load(None, environ={"GRETA_MAX_SHARDS": "0"})


def test_binding_beyond_loopback_needs_an_api_key() -> None:
    assert Settings(host="127.0.0.1").check().loopback
    assert Settings(host="::1").check().loopback
    assert Settings(host="0.0.0.0", api_key="k").check().allowed_roots == (Path("greta-data"),)
    assert Settings(host="127.0.0.1").allowed_roots == ()
    with pytest.raises(ConfigError, match="API key"):
        Settings(host="0.0.0.0").check()


def test_run_spec_carries_the_engine_and_old_records_default_to_auto() -> None:
    from greta_service.runner import run_spec
    from greta_service.schemas import QueryOptions

    text = "RETURN COUNT(*) PATTERN A+ WITHIN 5 s"
    source = {"format": "jsonl", "path": "in"}
    new = QueryRecord("q1", "q", text, source=source, options=QueryOptions(engine="general").model_dump())
    # registered before the engine option, with lateness under its old name
    old = QueryRecord("q2", "q", text, source=source, options={"watermark_delay_s": 1.0})
    settings = Settings()
    assert run_spec(new, settings).engine == "general"
    with pytest.warns(FutureWarning, match="watermark_delay_s is deprecated: use lateness_s"):
        assert run_spec(old, settings).engine == "auto"
        assert run_spec(old, settings).lateness_s == 1.0
        assert run_spec(old, settings).max_future_s == 30 * 86_400
        assert run_spec(old, Settings(max_future_s=60)).max_future_s == 60
    with pytest.raises(ValueError, match="max_windows_per_event = 4"):
        run_spec(QueryRecord("q3", "q", "RETURN COUNT(*) PATTERN A+ WITHIN 5 s SLIDE 1 s", source=source),
                 Settings(max_windows_per_event=4))
    with pytest.raises(ValueError):
        QueryOptions(engine="columnar")


def test_progress_counts_the_streams_batches_beside_their_durations() -> None:
    """`batch_durations_ms` are the stream's last batches, no-data ones included: `stream_batches`
    counts the same batches (and starts again with a new run), `batches` the query's stored ones;
    `input_rows` adds up over the stream's runs (a restart does not set it back to 0)."""
    from greta_service.runner import StreamProgress, progress
    from greta_service.store import ResultCounts

    stream = StreamProgress()
    for i in range(25):
        stream.observe({"runId": "a", "batchId": i, "numInputRows": 1 if i % 3 == 0 else 0,
                        "durationMs": {"triggerExecution": 100 + i}})
    out = progress(stream, ResultCounts(rows=9, batches=4, last_batch_id=21))
    assert out["stream_batches"] == 25 and out["batch_durations_ms"] == list(range(105, 125))
    assert out["batches"] == 4 and out["input_rows"] == 9
    stream.observe({"runId": "b", "batchId": 25, "numInputRows": 2, "durationMs": {"triggerExecution": 7}})
    again = progress(stream, ResultCounts())
    assert again["stream_batches"] == 1 and again["batch_durations_ms"] == [7] and again["input_rows"] == 11


def _registered(data: Path) -> SQLiteStore:
    """A data folder as a service leaves it: two queries, a stream's checkpoint."""
    store = SQLiteStore(data / "greta.sqlite")
    for i in range(2):
        store.save_query(QueryRecord(id=f"id{i}", name=f"q{i}", text="RETURN COUNT(*) PATTERN A WITHIN 1 s"))
    (data / "checkpoints" / "source-1").mkdir(parents=True)
    return store


def test_a_registry_emptied_while_checkpoints_exist_stops_the_start_and_its_backup_restores_it(
        tmp_path: Path) -> None:
    from greta_service.app import prepare_registry

    settings = Settings(data_dir=tmp_path)
    _registered(tmp_path).close()
    backup = tmp_path / "greta.sqlite.queries.json"
    assert [q["name"] for q in json.loads(backup.read_text())["queries"]] == ["q0", "q1"]
    assert prepare_registry(settings) == 0  # as it was: starts
    for p in tmp_path.glob("greta.sqlite*"):  # truncated to 0 bytes while the service was stopped (WAL too)
        if p != backup:
            p.write_bytes(b"")
    with pytest.raises(ConfigError) as err:
        prepare_registry(settings)
    assert "holds no query" in str(err.value) and "--restore-registry" in str(err.value)
    assert "2 queries" in str(err.value)
    assert prepare_registry(settings, restore=True) == 2
    store = SQLiteStore(tmp_path / "greta.sqlite")
    assert [q.name for q in store.list_queries()] == ["q0", "q1"]
    store.close()
    with pytest.raises(ConfigError, match="restores only an empty one"):
        prepare_registry(settings, restore=True)


def test_an_unreadable_registry_stops_the_start_and_is_moved_aside_on_restore(tmp_path: Path) -> None:
    from greta_service.app import prepare_registry

    settings = Settings(data_dir=tmp_path)
    _registered(tmp_path).close()
    for p in tmp_path.glob("greta.sqlite-*"):
        p.unlink()
    (tmp_path / "greta.sqlite").write_bytes(b"this is not a database, not at all" * 100)
    with pytest.raises(ConfigError, match="cannot be read .*--restore-registry"):
        prepare_registry(settings)
    assert prepare_registry(settings, restore=True) == 2
    assert len(list(tmp_path.glob("greta.sqlite.unreadable-*"))) == 1


def test_deleting_every_query_leaves_nothing_to_refuse(tmp_path: Path) -> None:
    from greta_service.app import prepare_registry

    store = SQLiteStore(tmp_path / "greta.sqlite")
    store.save_query(QueryRecord(id="a", name="q", text="RETURN COUNT(*) PATTERN A WITHIN 1 s"))
    store.delete_query("a")
    store.close()
    assert json.loads((tmp_path / "greta.sqlite.queries.json").read_text())["queries"] == []
    assert prepare_registry(Settings(data_dir=tmp_path)) == 0  # no checkpoints: an empty service


def test_reads_need_the_key_unless_public_reads(tmp_path: Path) -> None:
    """No Spark: the key checks run before any handler (the app's lifespan is not entered)."""
    from fastapi.testclient import TestClient

    from greta_service import create_app

    closed = TestClient(create_app(Settings(data_dir=tmp_path, api_key="k")))
    assert closed.get("/openapi.json").status_code == 401
    assert closed.get("/openapi.json", headers={"X-API-Key": "k"}).status_code == 200
    assert closed.get("/healthz").status_code == 200
    public = TestClient(create_app(Settings(data_dir=tmp_path, api_key="k", public_reads=True)))
    assert public.get("/openapi.json").status_code == 200
    assert public.post("/queries/some/stop").status_code == 401  # changes still need it


def test_a_registration_may_not_write_another_querys_delta_table(tmp_path: Path) -> None:
    """Checked before anything is registered (no Spark): two queries' rows would mix in one table."""
    from greta_service.registry import Registry, ServiceError
    from greta_service.schemas import QueryCreate

    (tmp_path / "in").mkdir()
    store = SQLiteStore(tmp_path / "greta.sqlite")
    registry = Registry(Settings(data_dir=tmp_path), store)

    def request(name: str, sink: dict[str, str]) -> QueryCreate:
        return QueryCreate.model_validate({"name": name, "text": "RETURN COUNT(*) PATTERN A+ WITHIN 1 s",
                                           "source": {"format": "jsonl", "path": "in"}, "sinks": [sink]})

    first, _ = registry.prepare(request("a", {"format": "delta", "path": "tables/t"}))
    store.save_query(first)
    with pytest.raises(ServiceError, match="the Delta table .*tables/t is the sink of 'a' and of 'b'") as err:
        registry.prepare(request("b", {"format": "delta", "path": "tables/t"}))
    assert err.value.status == 409
    registry.prepare(request("b", {"format": "delta", "path": "tables/u"}))  # its own table: fine
    registry.prepare(request("a", {"format": "delta", "path": "tables/t"}), replacing=first.id)  # a PATCH of a
    store.close()


def test_the_spark_heap_is_a_setting_the_session_takes() -> None:
    """`spark_driver_memory` goes to the session as `spark.driver.memory` (with many streams the default 1g
    JVM heap runs out); left out, Spark's default stands; a size that is not one is refused."""
    from greta_service.app import spark_conf

    assert spark_conf(Settings(spark_driver_memory="4g"))["spark.driver.memory"] == "4g"
    assert "spark.driver.memory" not in spark_conf(Settings())
    with pytest.raises(ValueError, match="spark_driver_memory"):
        Settings(spark_driver_memory="lots")
