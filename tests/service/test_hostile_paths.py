"""Hostile paths: folders and files that would turn the service on itself. Each is refused
with a 422 that names the path and why, on POST and PATCH alike, or (a Parquet file linked
from out of its source folder) read as an `outside_source` dead letter; a damaged registry
stops the start with one line of advice and is set aside by `--restore-registry`.

- a source whose folder tree loops, or reaches the service's data folder, through a link
  (Spark lists every folder of a source, links followed, recursiveFileLookup or not);
- a sink or dead-letter folder at one of the service's own files (the registry's backup,
  its temporary file, a registry set aside, SQLite's journals);
- a folder written by two writers, or nested in one another;
- a folder written inside a source folder, or a source inside a written folder.

The rules are checked as plain functions first (a registry with no Spark), then through a
real server. Assert the status first, then the body (STYLE.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from service_helpers import FLUSH, Q1, Service, all_results, free_port, sample_events, wait_for

from greta_service import guards
from greta_service.app import prepare_registry
from greta_service.registry import Registry, ServiceError
from greta_service.schemas import QueryCreate
from greta_service.settings import Settings
from greta_service.store import QueryRecord, ResultRow, SQLiteStore
from greta_stream import evaluate
from greta_stream.connectors.sinks import read_jsonl_dir
from greta_stream.errors import ConfigError

pytestmark = pytest.mark.service

TEXT = "RETURN COUNT(*) PATTERN A+ WITHIN 1 s"


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    """A registry on a data folder holding a source folder `in` (one file), the checkpoints and the store
    (no Spark)."""
    settings = Settings(data_dir=tmp_path / "data")
    (settings.data_dir / "in").mkdir(parents=True)
    (settings.data_dir / "in" / "events.jsonl").write_text("")
    settings.checkpoint_dir.mkdir()
    store = SQLiteStore(settings.resolved_store_url.removeprefix("sqlite:///"))
    store.save_query(QueryRecord(id="seed", name="seed", text=TEXT))
    store.delete_query("seed")  # the registry's backup is written
    return Registry(settings, store)


def source(registry: Registry, path: str, fmt: str = "jsonl", **options: str) -> dict[str, Any]:
    return registry._paths({"format": fmt, "path": path, "options": options}, "source", must_exist=True)


def refused(registry: Registry, path: str, fmt: str = "jsonl", **options: str) -> str:
    with pytest.raises(ServiceError) as exc:
        source(registry, path, fmt, **options)
    assert exc.value.status == 422
    return exc.value.detail


# ------------------------------------------------- 1. source trees: links that loop or reach the data folder


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "delta"])
@pytest.mark.parametrize(("link", "target", "words"), [
    ("up", ".", "a link to the service's data folder"),            # the data folder (it holds `in` too)
    ("top", "..", "a link to the service's data folder"),           # above it
    ("self", "in", "a link to its own folder or one above it (a loop)"),
    ("sub/back", "in/sub", "a link to its own folder or one above it (a loop)"),  # a loop a level down
    ("state", "checkpoints", "a link to the service's own 'checkpoints'"),
    ("registry.jsonl", "greta.sqlite", "a link to the service's own 'greta.sqlite'"),  # a file
    ("backup.jsonl", "greta.sqlite.queries.json", "a link to the service's own 'greta.sqlite.queries.json'"),
])
def test_a_source_tree_that_loops_or_reaches_the_data_folder_is_refused_without_recursive_lookup(
        registry: Registry, fmt: str, link: str, target: str, words: str) -> None:
    """Spark lists a source's folders, links followed, whether or not it reads their files: before,
    only recursiveFileLookup sources were checked, and a link to the data folder made a registration
    that never answered while Spark's heap filled with the listing."""
    data = registry.settings.data_dir
    (data / "in" / "sub").mkdir()
    (data / "in" / link).symlink_to((data / target).resolve())
    detail = refused(registry, "in", fmt)
    assert detail.startswith(f"source path 'in' holds {link}, {words}"), detail
    assert detail.endswith(". Remove the link"), detail
    if fmt == "jsonl":  # a glob: the folder it matches under
        assert refused(registry, "in/*.jsonl").startswith(f"source path 'in/*.jsonl' holds {link}, {words}")


def test_links_that_cross_into_a_loop_are_refused(registry: Registry) -> None:
    data = registry.settings.data_dir
    (data / "in" / "a").mkdir()
    (data / "in" / "b").mkdir()
    (data / "in" / "a" / "to-b").symlink_to(data / "in" / "b")
    assert source(registry, "in")  # a second way to b: no loop
    (data / "in" / "b" / "to-a").symlink_to(data / "in" / "a")
    assert re.search(r"holds (a/to-b/to-a|b/to-a/to-b), a link to its own folder or one above it \(a loop\)",
                     refused(registry, "in"))


def test_links_inside_the_folder_and_out_of_it_are_kept_apart(registry: Registry, tmp_path: Path) -> None:
    """A link to a folder inside is read once where it is; a link out of the folder is followed by a
    plain listing (its files are `outside_source` dead letters) and refused with recursiveFileLookup;
    a broken link and a link that loops on itself are skipped, as Spark skips them."""
    data = registry.settings.data_dir
    (data / "in" / "sub").mkdir()
    (data / "in" / "sub-again").symlink_to(data / "in" / "sub")
    (tmp_path / "elsewhere").mkdir()
    (data / "in" / "sub" / "out").symlink_to(tmp_path / "elsewhere")
    (data / "in" / "gone").symlink_to(tmp_path / "nothing")
    (data / "in" / "knot").symlink_to(data / "in" / "knot")
    (data / "other").mkdir()
    (data / "in" / "beside").symlink_to(data / "other")  # a folder of the data folder, not the service's own
    assert source(registry, "in")["path"] == str(data.resolve() / "in")
    for fmt in ("jsonl", "parquet"):
        assert re.search(r"holds (sub/out|beside), a link to a folder out of it: with recursiveFileLookup",
                         refused(registry, "in", fmt, recursiveFileLookup="true"))


def test_a_tree_too_big_to_list_is_refused_quickly(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two links per level to the next level: Spark would list the last one 2**24 times. The check
    counts what Spark would list and stops at its bounds, so it answers at once."""
    data = registry.settings.data_dir
    levels = [data / "in" / f"l{i}" for i in range(24)]
    for here, below in zip(levels, levels[1:], strict=False):
        here.mkdir()
        for name in ("x", "y"):
            (here / name).symlink_to(below)
    levels[-1].mkdir()
    started = time.monotonic()
    assert "holds more than 1,000,000 files and folders or 100,000 folders" in refused(registry, "in")
    took = time.monotonic() - started
    assert took < 30, took
    print(f"\nthe check refused 2**23 listings of one folder after {took:.2f} s")
    shutil.rmtree(data / "in")
    deep = data / "in" / "/".join(["d"] * 70)
    deep.mkdir(parents=True)
    assert "deeper than 64 levels" in refused(registry, "in")


def test_a_big_plain_tree_is_checked_in_about_a_second(registry: Registry) -> None:
    data = registry.settings.data_dir
    for d in range(20):
        (data / "in" / f"day={d}").mkdir()
        for i in range(5_000):
            (data / "in" / f"day={d}" / f"part-{i}.jsonl").touch()
    started = time.monotonic()
    assert source(registry, "in")
    took = time.monotonic() - started
    print(f"\n100,000 files checked in {took:.2f} s")
    assert took < 20, took


# ------------------------------------------------- 2. the service's own files as sinks


OWN_FILES = ["greta.sqlite.queries.json.tmp", "greta.sqlite.queries.json", "greta.sqlite-journal",
             "greta.sqlite.unreadable-1700000000", "checkpoints/stream-1/control"]


@pytest.mark.parametrize("path", OWN_FILES)
def test_sinks_and_dead_letters_at_the_services_own_files_are_refused(registry: Registry, path: str) -> None:
    """Before, a sink at the backup's temporary file was accepted, and from then on every change to
    the registry answered 500 (its backup could not be written over the sink's folder)."""
    (registry.settings.data_dir / "greta.sqlite.unreadable-1700000000").write_bytes(b"old")
    for what, fmt in (("sink", "jsonl"), ("sink", "parquet"), ("sink", "delta"), ("dead_letter", "jsonl")):
        with pytest.raises(ServiceError) as exc:
            registry._paths({"format": fmt, "path": path}, what)
        assert exc.value.status == 422
        assert exc.value.detail.startswith(f"{what} path {path!r} is inside the service's own"), exc.value.detail


def test_the_protected_files_follow_the_store() -> None:
    settings = Settings(data_dir=Path("/d"), store_url="sqlite:////db/r.sqlite")
    names = [p.name for p in settings.protected_paths]
    assert names == ["checkpoints", "r.sqlite", "r.sqlite-wal", "r.sqlite-shm", "r.sqlite-journal",
                     "r.sqlite.queries.json", "r.sqlite.queries.json.tmp"]


# ------------------------------------------------- 3 and 4. folders written twice, or where a source reads


def create(name: str, src: str = "in", sinks: list[dict[str, Any]] | None = None,
           dead: dict[str, Any] | None = None) -> QueryCreate:
    return QueryCreate.model_validate({"name": name, "text": TEXT, "source": {"format": "jsonl", "path": src},
                                       "sinks": sinks or [], "dead_letter": dead})


def jsonl(path: str, fmt: str = "jsonl") -> dict[str, Any]:
    return {"format": fmt, "path": path}


def registered(registry: Registry, req: QueryCreate) -> QueryRecord:
    rec, _ = registry.prepare(req)
    registry.store.save_query(rec)
    return rec


@pytest.mark.parametrize(("src", "sinks", "dead", "words"), [
    ("in", [jsonl("out/a")], None, "sink path '{data}/out/a' is the sink folder of query 'a': two writers"),
    ("in", [jsonl("out/a", "parquet")], None, "sink path '{data}/out/a' is the sink folder of query 'a'"),
    ("in", [jsonl("out/a/b")], None, "sink path '{data}/out/a/b' is inside the sink folder '{data}/out/a' of query "
                                     "'a'"),
    ("in", [jsonl("out")], None, "sink path '{data}/out' holds the sink folder '{data}/out/a' of query 'a'"),
    ("in", [jsonl("out/a/t", "delta")], None, "is inside the sink folder '{data}/out/a' of query 'a'"),
    ("in", [], jsonl("dead/a"), "dead_letter path '{data}/dead/a' is the dead-letter folder of query 'a'"),
    ("in", [jsonl("dead/a")], None, "sink path '{data}/dead/a' is the dead-letter folder of query 'a'"),
    ("in2", [jsonl("in/results")], None, "sink path '{data}/in/results' is inside the source folder '{data}/in' of "
                                         "query 'a': what is written there would be read back as input"),
    ("in2", [], jsonl("in2/dead"), "dead_letter path '{data}/in2/dead' is inside the source folder '{data}/in2' "
                                   "of this query: what is written there would be read back as input"),
    ("in2", [jsonl("in2")], None, "sink path '{data}/in2' is the source folder of this query"),
    ("in2", [jsonl("b"), jsonl("b/x")], None, "sink path '{data}/b' holds the sink folder '{data}/b/x' of this "
                                              "query"),
    ("in2", [jsonl("b")], jsonl("b"), "sink path '{data}/b' is the dead-letter folder of this query"),
])
def test_a_folder_written_where_another_is_read_or_written_is_refused(
        registry: Registry, src: str, sinks: list[Any], dead: Any, words: str) -> None:
    """Before, two JSON-lines sinks in one folder overwrote each other's part-<batch>.jsonl files, and
    dead letters written into the query's own source folder were read back as input, forever. Checked
    for a new query (POST) and for query a itself (PATCH: its own registration is no conflict)."""
    data = registry.settings.data_dir
    (data / "in2").mkdir()
    first = registered(registry, create("a", sinks=[jsonl("out/a")], dead=jsonl("dead/a")))
    words = words.format(data=data.resolve())
    for name, replacing in (("b", None), ("a", first.id)):
        if replacing is not None and "of query 'a'" in words:
            continue  # a's own folders: a PATCH of a keeps them
        with pytest.raises(ServiceError) as exc:
            registry.prepare(create(name, src, sinks=sinks, dead=dead), replacing=replacing)
        assert exc.value.status == 422
        assert words in exc.value.detail, exc.value.detail
        assert exc.value.detail.endswith("Name a folder apart from every source, sink and dead-letter folder of "
                                         "the service's queries")


def test_a_source_inside_a_written_folder_is_refused(registry: Registry) -> None:
    data = registry.settings.data_dir
    registered(registry, create("a", sinks=[jsonl("out/a")]))
    (data / "out" / "a" / "day").mkdir(parents=True)
    for path, how in (("out/a/day", "is inside"), ("out/a", "is"), ("out", "holds")):
        with pytest.raises(ServiceError) as exc:
            registry.prepare(create("b", path))
        assert exc.value.status == 422
        assert exc.value.detail.startswith(f"source path '{(data / path).resolve()}' {how} the sink folder"), \
            exc.value.detail
        assert "the query would read what is written there as its input" in exc.value.detail


def test_folders_apart_are_allowed(registry: Registry) -> None:
    """Sources may share a folder; folders whose names share a prefix are apart; a query's PATCH does
    not collide with its own registration."""
    first = registered(registry, create("a", sinks=[jsonl("out/a")], dead=jsonl("dead/a")))
    registry.prepare(create("b", sinks=[jsonl("out/a-2"), jsonl("out/b", "parquet")], dead=jsonl("dead/b")))
    registry.prepare(create("a", sinks=[jsonl("out/a")], dead=jsonl("dead/a")), replacing=first.id)
    places = guards.places("q", {"format": "kafka", "topic": "t"}, [{"format": "console"}], None, Path("/d"))
    assert places == []


# ------------------------------------------------- 5. a registry with damaged pages


def damaged(data: Path, table: str) -> Path:
    """A data folder as a service leaves it (two queries, a stream's checkpoint, results), then the first
    page of `table` overwritten (the file is no longer in use)."""
    db = data / "greta.sqlite"
    store = SQLiteStore(db)
    for i in range(2):
        store.save_query(QueryRecord(id=f"id{i}", name=f"q{i}", text=TEXT))
    store.write_batch("id0", 0, [ResultRow(0, 1, "[]", json.dumps({"n": i})) for i in range(100)], {})
    store.close()
    (data / "checkpoints" / "stream-1").mkdir(parents=True)
    conn = sqlite3.connect(db)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    conn.close()
    with db.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xa5" * page_size)
    return db


@pytest.mark.usefixtures("subprocesses")
def test_serve_gives_one_line_of_advice_for_a_registry_with_damaged_pages(tmp_path: Path) -> None:
    """Before, `serve` ended with a traceback ('database disk image is malformed') where a registry
    found empty gets advice."""
    damaged(tmp_path / "data", "queries")
    cmd = [sys.executable, "-m", "greta_stream", "serve", "--data-dir", str(tmp_path / "data"),
           "--port", str(free_port())]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("error: the registry (sqlite:///") and "database disk image is malformed" in lines[0]
    assert "`greta-stream serve --restore-registry` (the unreadable file is moved aside)" in lines[0]


@pytest.mark.parametrize("table", ["queries", "results"])
def test_restore_registry_sets_a_damaged_registry_aside_and_rebuilds_it(tmp_path: Path, table: str) -> None:
    """Damage where the registry lives stops a start; damage anywhere else is found by the restore,
    which reads every page. Either way the file and its journals go aside, and the backup's queries
    come back into a new file, in one transaction."""
    data = tmp_path / "data"
    db = damaged(data, table)
    settings = Settings(data_dir=data)
    if table == "queries":
        with pytest.raises(ConfigError, match="database disk image is malformed"):
            prepare_registry(settings)
    else:
        assert prepare_registry(settings) == 0  # the registry reads: the start goes on
    assert prepare_registry(settings, restore=True) == 2
    (aside,) = data.glob("greta.sqlite.unreadable-*[0-9]")
    assert aside.read_bytes()[:16] == b"SQLite format 3\x00"
    assert {p.name for p in data.glob("greta.sqlite*")} - {p.name for p in data.glob(f"{aside.name}*")} == \
        {"greta.sqlite", "greta.sqlite.queries.json"}  # no journal of the damaged file beside the new one
    store = SQLiteStore(db)
    store.check(whole=True)
    assert [q.name for q in store.list_queries()] == ["q0", "q1"]
    store.close()
    assert [q["name"] for q in json.loads((data / "greta.sqlite.queries.json").read_text())["queries"]] == \
        ["q0", "q1"]
    assert prepare_registry(settings) == 0  # starts as it is now


# ------------------------------------------------- through a real server


def body(service: Service, name: str, **over: Any) -> dict[str, Any]:
    src = service.root / f"in-{name}"
    src.mkdir(exist_ok=True)
    spec = {"name": name, "text": Q1, "source": {"format": "jsonl", "path": str(src)},
            "sinks": [{"format": "jsonl", "path": str(service.root / f"out-{name}")}], "options": {"shards": 2}}
    return {**spec, **over}


def test_a_link_to_the_data_folder_is_a_422_at_once_and_on_patch(service: Service) -> None:
    """The registration answers (before: never, and Spark later ran out of heap listing the loop)."""
    with service.client() as api:
        fine = api.post("/queries", json=body(service, "paths-fine"))
        assert fine.status_code == 201, fine.text
        try:
            linked = service.root / "in-paths-linked"
            linked.mkdir()
            (linked / "data").symlink_to(service.data)
            r = api.post("/queries", json=body(service, "paths-linked"), timeout=60)
            assert r.status_code == 422, r.text
            assert r.json()["detail"].startswith(f"source path {str(linked)!r} holds data, a link to the service's "
                                                 "data folder"), r.text
            (service.root / "in-paths-fine" / "loop").symlink_to(service.root / "in-paths-fine")  # its source
            r = api.patch("/queries/paths-fine", json={"options": {"lateness_s": 3}}, timeout=60)
            assert r.status_code == 422, r.text
            assert "holds loop, a link to its own folder or one above it (a loop)" in r.json()["detail"]
            assert api.get("/queries/paths-fine").json()["options"].get("lateness_s") is None  # unchanged
        finally:
            (service.root / "in-paths-fine" / "loop").unlink(missing_ok=True)
            assert api.delete("/queries/paths-fine").status_code == 204


def test_the_services_own_files_and_shared_folders_are_422_on_post_and_patch(service: Service) -> None:
    """Each refused with its path and why; the registry answers every change afterwards (before: a sink at
    the backup's temporary file was a 201, and every later POST, stop and DELETE a 500)."""
    tmp = str(service.data / "greta.sqlite.queries.json.tmp")
    with service.client() as api:
        r = api.post("/queries", json=body(service, "paths-a", dead_letter={"format": "jsonl",
                                                                          "path": str(service.root / "dead-paths-a")}))
        assert r.status_code == 201, r.text
        try:
            out_a, in_a = str(service.root / "out-paths-a"), str(service.root / "in-paths-a")
            cases: list[tuple[dict[str, Any], str]] = [
                ({"sinks": [{"format": "jsonl", "path": tmp}]}, f"sink path {tmp!r} is inside the service's own "
                                                                f"'greta.sqlite.queries.json.tmp'"),
                ({"dead_letter": {"format": "jsonl", "path": tmp}}, "dead_letter path"),
                ({"sinks": [{"format": "jsonl", "path": out_a}]}, f"sink path {out_a!r} is the sink folder of query "
                                                                  "'paths-a'"),
                ({"sinks": [{"format": "parquet", "path": out_a + "/x"}]}, "is inside the sink folder"),
                ({"dead_letter": {"format": "jsonl", "path": in_a + "/dead"}}, f"is inside the source folder "
                                                                              f"{in_a!r} of query 'paths-a'"),
            ]
            for over, words in cases:
                r = api.post("/queries", json=body(service, "paths-b", **over))
                assert r.status_code == 422, (over, r.text)
                assert words in r.json()["detail"], (over, r.text)
            r = api.post("/queries", json=body(service, "paths-b"))
            assert r.status_code == 201, r.text
            for over, words in cases:
                r = api.patch("/queries/paths-b", json=over)
                assert r.status_code == 422, (over, r.text)
                assert words in r.json()["detail"], (over, r.text)
            r = api.patch("/queries/paths-a", json={"dead_letter": {"path": in_a + "/dead"}})  # into its own source
            assert r.status_code == 422, r.text
            assert f"is inside the source folder {in_a!r} of this query" in r.json()["detail"]
            assert not Path(tmp).is_dir()
            assert api.post("/queries/paths-b/stop").status_code == 200
            assert api.delete("/queries/paths-a").status_code == 204  # its folders are free again at once
            r = api.post("/queries", json=body(service, "paths-c", sinks=[{"format": "jsonl", "path": out_a}]))
            assert r.status_code == 201, r.text
        finally:
            for name in ("paths-a", "paths-b", "paths-c"):
                api.delete(f"/queries/{name}")


# ------------------------------------------------- 6. a Parquet file linked from out of its source folder


SCHEMA = pa.schema([("type", pa.string()), ("time", pa.float64()), ("company", pa.int64()), ("sector", pa.int64()),
                    ("price", pa.float64()), ("volume", pa.int64())])


def write_parquet(path: Path, records: list[dict[str, Any]], stamp: float) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(pa.Table.from_pylist(records, schema=SCHEMA), tmp)
    os.utime(tmp, (stamp, stamp))
    tmp.replace(path)


def test_a_parquet_file_linked_from_out_of_its_folder_is_not_read(service: Service) -> None:
    """As a JSON-lines source's: every row of a file whose real path is out of the source folder is an
    `outside_source` dead letter naming the link, never an event; its content shows nowhere (before,
    a Parquet source read it as its own)."""
    events = [{k: e[k] for k in ("type", "time", "company", "sector", "price", "volume")}
              for e in sample_events()[:600]]
    flush = {"type": FLUSH["type"], "time": float(FLUSH["time"]), "company": 0, "sector": 0, "price": 0.0,
             "volume": 0}  # no nulls: a column with one reads as floats
    secret = [{**e, "sector": 99, "company": 999, "price": 1000.0 - i} for i, e in enumerate(events[:40])]
    src, elsewhere = service.root / "in-paths-parquet", service.root / "elsewhere-parquet"
    src.mkdir()
    elsewhere.mkdir()
    base = time.time() - 600
    write_parquet(elsewhere / "secret.parquet", secret, base)
    write_parquet(src / "events.parquet", events, base + 1)
    (src / "leak.parquet").symlink_to(elsewhere / "secret.parquet")
    dead = service.root / "dead-paths-parquet"
    expected = evaluate(Q1, events)
    with service.client() as api:
        r = api.post("/queries", json=body(service, "paths-parquet", source={"format": "parquet", "path": str(src)},
                                           dead_letter={"format": "jsonl", "path": str(dead)}))
        assert r.status_code == 201, r.text
        query_id = r.json()["id"]
        try:
            write_parquet(src / "flush.parquet", [flush], time.time())
            info = wait_for(lambda: (p := api.get(f"/queries/{query_id}").json())["progress"]["result_rows"]
                            >= len(expected) and p, "the Parquet query's rows", service)
            def ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:  # sector 0.0 equals 0: the service's
                return sorted(rows, key=lambda r: (r["window_start"], r["sector"]))  # stream reads it as a float

            assert ordered(all_results(api, query_id)) == ordered(expected)
            assert info["progress"]["dead_letters_by_reason"] == {"outside_source": len(secret)}
            letters = list(read_jsonl_dir(dead))
            assert {d["reason"] for d in letters} == {"outside_source"} and len(letters) == len(secret)
            assert all(d["event"] == str(src / "leak.parquet") and "leak.parquet is a link to a file outside"
                       in d["detail"] for d in letters)
            assert "999" not in json.dumps(letters)
        finally:
            assert api.delete(f"/queries/{query_id}").status_code == 204
