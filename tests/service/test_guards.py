"""Hostile requests against a real server: queries that nest or window without
bound, sources and sinks that reach beyond path_roots or to other hosts, a
stop that would hang. Each is refused (422) with a clear message, or bounded.
The guards themselves (Kafka servers, paths near the service's own files) are
also tested as plain functions: no server, no Spark.

Assert the status first, then the body (STYLE.md).
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from service_helpers import Q1, Service, sample_events, write_file

from greta_service.guards import check_kafka_hosts, check_reach
from greta_service.registry import Registry, ServiceError
from greta_service.settings import Settings
from greta_service.store import SQLiteStore
from greta_stream.errors import ConfigError

pytestmark = pytest.mark.service

DEEP = "RETURN COUNT(*)\nPATTERN " + "SEQ(A, " * 300 + "B" + ")" * 300 + "\nWITHIN 10 s"  # within max_query_chars
WIDE = "RETURN COUNT(*)\nPATTERN A+\nWITHIN 1 day SLIDE 1 ms"


def body(service: Service, name: str, **over: object) -> dict:
    src = service.root / f"in-{name}"
    src.mkdir(exist_ok=True)
    spec = {"name": name, "text": Q1, "source": {"format": "jsonl", "path": str(src)},
            "sinks": [{"format": "jsonl", "path": str(service.root / f"out-{name}")}], "options": {"shards": 2}}
    return {**spec, **over}


@pytest.mark.parametrize(("text", "words", "line"), [
    (DEEP, "nests too deeply", 2), (WIDE, "max_windows_per_event = 1,000", 3),
])
def test_unbounded_queries_answer_422_with_a_position(api: httpx.Client, service: Service, text: str, words: str,
                                                       line: int) -> None:
    for r in (api.post("/queries/validate", json={"text": text}), api.post("/queries", json=body(service, "deep",
                                                                                                text=text))):
        assert r.status_code == 422, r.text
        (err,) = r.json()["errors"]
        assert words in err["msg"] and err["line"] == line and err["column"] >= 1


def test_sources_and_sinks_cannot_escape_the_roots_or_reach_other_hosts(api: httpx.Client, service: Service) -> None:
    root = str(service.root)
    elsewhere = str(service.root.parent)  # outside path_roots
    src = {"format": "jsonl", "path": root}
    cases = [
        ({"source": {"format": "jsonl", "path": None, "options": {"path": elsewhere}}}, "a jsonl source needs a path"),
        ({"source": {"format": "jsonl", "path": None}}, "needs a path"),
        ({"source": {**src, "options": {"path": elsewhere}}}, "option(s) path are not allowed"),
        ({"source": {**src, "options": {"PATH": elsewhere}}}, "option(s) PATH are not allowed"),
        ({"source": {**src, "options": {"cleanSource": "archive", "sourceArchiveDir": elsewhere}}},
         "cleanSource, sourceArchiveDir are not allowed"),
        ({"source": {**src, "options": {"cleanSource": "delete"}}}, "cleanSource are not allowed"),
        ({"source": {"format": "parquet"}}, "needs a path"),
        ({"sinks": [{"format": "jsonl"}]}, "needs a path"),
        ({"sinks": [{"format": "jsonl", "path": root + "/o", "options": {"path": elsewhere}}]}, "not allowed"),
        ({"dead_letter": {"format": "parquet", "path": elsewhere}}, "path_roots"),
        ({"source": {"format": "kafka", "topic": "t", "bootstrap_servers": "evil.example.com:9092"}},
         "Kafka host 'evil.example.com' is not allowed"),
        ({"source": {"format": "kafka", "topic": "t", "bootstrap_servers": "127.0.0.1:9092,10.0.0.1:9092"}},
         "Kafka host '10.0.0.1' is not allowed"),
        ({"source": {"format": "kafka", "topic": "t", "bootstrap_servers": "127.0.0.1:1",
                     "options": {"kafka.bootstrap.servers": "evil.example.com:9092"}}}, "not allowed"),
        ({"sinks": [{"format": "kafka", "topic": "t", "bootstrap_servers": "[::1]:1",
                     "options": {"kafka.ssl.truststore.location": "/etc/passwd"}}]}, "not allowed"),
        ({"source": {"format": "text", "path": root}}, "'jsonl', 'parquet', 'delta' or 'kafka'"),
    ]
    for i, (over, words) in enumerate(cases):
        r = api.post("/queries", json=body(service, f"escape{i}", **over))
        assert r.status_code == 422, (i, r.text)
        assert words in r.text, (i, r.text)
    assert not [q for q in api.get("/queries").json()["queries"] if q["name"].startswith("escape")]


def test_stop_is_bounded_when_a_sink_hangs(api: httpx.Client, service: Service) -> None:
    """A Kafka sink at a port where nothing listens blocks its micro-batch; stop
    still answers within the stop_timeout_s setting (4 s here), twice over."""
    with socket.socket() as s:  # a loopback port with no broker
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    spec = body(service, "hang", sinks=[{"format": "kafka", "topic": "t", "bootstrap_servers": f"127.0.0.1:{dead}",
                                          "options": {"kafka.max.block.ms": "120000"}}])
    write_file(service.root / "in-hang", "events.jsonl", sample_events()[:200])
    r = api.post("/queries", json=spec)
    assert r.status_code == 201, r.text
    qid = r.json()["id"]
    time.sleep(8)  # the stream starts and its first micro-batch blocks in the sink
    started = time.monotonic()
    r = api.post(f"/queries/{qid}/stop", timeout=60)
    took = time.monotonic() - started
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "stopped"
    assert took < 2 * 4.0 + 5, took
    assert api.delete(f"/queries/{qid}").status_code == 204


# ------------------------------------------------- guards as plain functions


def kafka(servers: str, hosts: tuple[str, ...] = ()) -> None:
    check_kafka_hosts({"format": "kafka", "topic": "t", "bootstrap_servers": servers}, "source", hosts)


@pytest.mark.parametrize("server", [
    "[::1]evil.example:9092",        # the Kafka client reads host evil.example: was allowed as ::1
    "[127.0.0.1]evil.example:9092",  # ... and as 127.0.0.1
    ":9092", "localhost", "localhost:", "localhost:99999", "localhost:0", "localhost:+1", "localhost:9092:1",
    "a:b:c", "::1:9092", "[::1]", "[127.0.0.1]:9092", "[fe80::1%eth0]:9092", "evil/127.0.0.1:9092",
    "user@localhost:9092", "127.1:9092", "0177.0.0.1:9092", "-localhost:9092", "local..host:9092",
    "localhost.:9092", "LOCALHOST :9092", "", "l\u0131calhost:9092",  # "": a comma too many; a dotless i
])
def test_kafka_servers_must_be_strictly_host_colon_port(server: str) -> None:
    with pytest.raises(ConfigError) as exc:
        kafka(f"localhost:9092, {server}", ("evil.example",) if "evil" not in server else ())
    msg = str(exc.value)
    assert msg.startswith("source Kafka server ") and "is not host:port" in msg, msg
    assert repr(server.strip()) in msg, msg


@pytest.mark.parametrize(("servers", "hosts"), [
    ("[::1]:9092", ()), ("localhost:9092", ()), ("127.0.0.1:9092", ()), ("127.8.9.10:1", ()),
    (" LOCALHOST:9092 ,[0:0::1]:65535 ", ()),
    ("broker-1.example.com:9092,Broker-2.Example.COM:9093", ("BROKER-1.example.com", "broker-2.example.com")),
    ("10.0.0.5:9092,[FD00::1]:9092", ("10.0.0.5", "[fd00:0::1]")),
])
def test_kafka_servers_that_are_loopback_or_listed_are_allowed(servers: str, hosts: tuple[str, ...]) -> None:
    kafka(servers, hosts)


@pytest.mark.parametrize(("servers", "host"), [
    ("evil.example:9092", "evil.example"), ("localhost:9092,10.0.0.1:9092", "10.0.0.1"), ("[::2]:9092", "::2"),
    ("localhost.evil.example:9092", "localhost.evil.example"), ("[::ffff:127.0.0.1]:9092", "::ffff:127.0.0.1"),
])
def test_kafka_hosts_beyond_the_allow_list_are_refused(servers: str, host: str) -> None:
    with pytest.raises(ConfigError, match=f"source Kafka host {host!r} is not allowed"):
        kafka(servers, ("broker.example",))


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    """A registry on a data folder that holds a source folder, the checkpoints and the store (no Spark)."""
    settings = Settings(data_dir=tmp_path / "data")
    (settings.data_dir / "in").mkdir(parents=True)
    (settings.data_dir / "in" / "events.jsonl").write_text("")
    settings.checkpoint_dir.mkdir()
    store = SQLiteStore(settings.resolved_store_url.removeprefix("sqlite:///"))
    store.close()
    return Registry(settings, store)


ABOVE, INSIDE, GLOB = "is a folder above the service's own", "is inside the service's own", "which its glob would reach"


@pytest.mark.parametrize(("path", "words"), [
    (".", ABOVE), ("in/..", ABOVE), ("..", ABOVE), ("{data}", ABOVE), ("{data}/", ABOVE),
    ("checkpoints", INSIDE), ("checkpoints/0123/state", INSIDE), ("in/../checkpoints/x", INSIDE),
    ("greta.sqlite", INSIDE), ("greta.sqlite-wal", INSIDE), ("greta.sqlite-shm", INSIDE),
    ("*", GLOB), ("*/state", GLOB), ("greta.sql*", GLOB), ("[cg]*", GLOB), ("in/../{in,checkpoints}", GLOB),
    ("{data}/*.jsonl", GLOB), ("in/*/../../checkpoints", INSIDE),
    ("in/{/.,x}./checkpoints", "has a '/' inside braces"),  # Hadoop expands it to in//../checkpoints
    ("in/.\\./checkpoints", "has a backslash"),           # Hadoop unescapes it to in/../checkpoints
])
def test_sources_and_sinks_cannot_reach_the_services_own_files(registry: Registry, path: str, words: str) -> None:
    path = path.replace("{data}", str(registry.settings.data_dir))
    source = {"format": "jsonl", "path": path, "options": {"recursiveFileLookup": "true"}}
    for what, spec, must_exist in (("source", source, True), ("sink", {"format": "parquet", "path": path}, False),
                                   ("dead_letter", {"format": "jsonl", "path": path}, False)):
        with pytest.raises(ServiceError) as exc:
            registry._paths(spec, what, must_exist=must_exist)
        assert exc.value.status == 422
        assert exc.value.detail.startswith(f"{what} path {path!r} ") and words in exc.value.detail, exc.value.detail


def test_a_store_outside_the_data_folder_is_guarded_too(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", store_url=f"sqlite:///{tmp_path}/db/results.sqlite")
    (tmp_path / "db").mkdir()
    for path, words in ((str(tmp_path / "db"), "above the service's own 'results.sqlite'"),
                        (str(tmp_path / "db" / "results.sqlite-wal"), "inside the service's own 'results.sqlite-wal'"),
                        (str(tmp_path), "above the service's own 'checkpoints'")):
        with pytest.raises(ServiceError, match=words):
            Registry(settings, SQLiteStore(tmp_path / "unused.sqlite"))._paths({"format": "jsonl", "path": path},
                                                                            "sink")
    assert settings.protected_paths[1:] == tuple(tmp_path / "db" / f"results.sqlite{s}" for s in (
        "", "-wal", "-shm", "-journal", ".queries.json", ".queries.json.tmp"))


def test_folders_beside_the_services_own_files_are_allowed(registry: Registry) -> None:
    data = registry.settings.data_dir.resolve()
    assert registry._paths({"format": "jsonl", "path": "in"}, "source", must_exist=True)["path"] == str(data / "in")
    assert registry._paths({"format": "jsonl", "path": "out/../out2"}, "sink")["path"] == str(data / "out2")
    # a glob source exists when the folder it matches under does
    assert registry._paths({"format": "jsonl", "path": "in/*.jsonl"}, "source", must_exist=True)["path"] == \
        str(data / "in" / "*.jsonl")
    with pytest.raises(ServiceError, match="does not exist"):
        registry._paths({"format": "jsonl", "path": "nowhere/*.jsonl"}, "source", must_exist=True)
    assert registry._paths({"format": "jsonl", "path": "greta.sqlite.old"}, "sink")["path"] == str(data / "greta.sqlite.old")
    for glob in ("in/*.jsonl", "in/{a,b}/day=*/", "in/[0-9]*", "in/{..,x}"):  # Hadoop matches {..,x} against listings
        check_reach(glob, data / glob, "source", registry.settings.protected_paths)


def test_links_that_would_lead_a_recursive_listing_astray_are_refused(registry: Registry, tmp_path: Path) -> None:
    """A source may not hold a link to its own folder or above it (a loop Spark lists level after
    level, recursiveFileLookup or not: Spark lists every folder) nor to the data folder; read with
    recursiveFileLookup, nor a link out of it. A link to a folder inside it is fine. A path that is
    itself a link loop is a 422. (tests/service/test_hostile_paths.py has the rest.)"""
    data = registry.settings.data_dir
    (data / "in" / "sub").mkdir()
    (data / "in" / "sub-again").symlink_to(data / "in" / "sub")
    recursive = {"format": "jsonl", "path": "in", "options": {"recursiveFileLookup": "true"}}
    assert registry._paths(recursive, "source", must_exist=True)["path"] == str(data.resolve() / "in")
    (tmp_path / "elsewhere").mkdir()
    for name, target, words, plain in (("loop", data / "in", "a loop", True), ("up", data, "data folder", True),
                                       ("out", tmp_path / "elsewhere", "out of it", False)):
        (data / "in" / "sub" / name).symlink_to(target)
        with pytest.raises(ServiceError, match=f"holds sub/{name}, a link to .*{words}"):
            registry._paths(recursive, "source", must_exist=True)
        if plain:  # listed by Spark all the same
            with pytest.raises(ServiceError, match=f"holds sub/{name}, a link to .*{words}"):
                registry._paths({**recursive, "options": {}}, "source", must_exist=True)
        else:  # its files are outside_source dead letters
            assert registry._paths({**recursive, "options": {}}, "source", must_exist=True)
        (data / "in" / "sub" / name).unlink()
    (data / "knot").symlink_to(data / "knot")
    with pytest.raises(ServiceError, match="source path 'knot/x' cannot be followed"):
        registry._paths({"format": "jsonl", "path": "knot/x"}, "source", must_exist=True)


def test_a_stream_start_that_hangs_holds_up_no_other_stream(registry: Registry, monkeypatch) -> None:  # noqa: ANN001
    """While one stream's start is inside Spark (a listing that takes minutes, say), a change to a
    query of another stream goes through: the registry holds no lock across Spark calls but that
    stream's own. Spark is replaced here by a start that waits on the other change and then fails,
    the one hang this test can make on purpose."""
    from greta_service import registry as registry_module
    from greta_service.schemas import QueryCreate

    data = registry.settings.data_dir
    (data / "other").mkdir()

    def query(name: str, folder: str) -> QueryCreate:
        return QueryCreate.model_validate({"name": name, "text": Q1, "source": {"format": "jsonl", "path": folder},
                                           "sinks": [{"format": "jsonl", "path": f"out-{name}"}]})

    b, _ = registry.create(query("b", "other"))  # while the service starts: kept, started with Spark
    registry.ready.set()
    seen: dict[str, object] = {}

    def hanging_start(*args: object, **kwargs: object) -> None:
        other = threading.Thread(target=lambda: seen.update(stopped=registry.stop("b").status))
        other.start()
        other.join(20)  # the change to b's stream, while this stream's start is still inside "Spark"
        seen["during"] = not other.is_alive()
        raise RuntimeError("the listing never ended")

    monkeypatch.setattr(registry_module, "start_stream", hanging_start)
    with pytest.raises(ServiceError, match="could not start: .*the listing never ended"):
        registry.create(query("a", "in"))
    assert seen == {"stopped": "stopped", "during": True}
    assert [q.name for q in registry.store.list_queries()] == ["b"]  # a's registration left nothing
