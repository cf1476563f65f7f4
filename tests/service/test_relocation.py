"""`greta_service.relocation` without Spark: a data folder's registry paths, stream names and Spark logs
rebased when it moved (tests/service/test_moved_data.py runs a moved folder on the service itself)."""

from __future__ import annotations

import json
import shutil
import struct
import zlib
from pathlib import Path

from greta_service.relocation import LOCATION_FILE, relocate
from greta_service.runner import stream_key
from greta_service.settings import Settings
from greta_service.store import QueryRecord, SQLiteStore


def crc_of(path: Path) -> bytes:
    """Hadoop's checksum file of a file, as Spark's local file system writes and checks it."""
    data = path.read_bytes()
    return b"crc\x00" + struct.pack(">i", 512) + b"".join(
        struct.pack(">I", zlib.crc32(data[i:i + 512])) for i in range(0, len(data), 512))


def spark_log(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("v1\n" + "\n".join(json.dumps(x, separators=(",", ":"), ensure_ascii=False) for x in lines))
    path.with_name(f".{path.name}.crc").write_bytes(crc_of(path))


def uri(path: Path) -> str:
    return "file://" + str(path).replace(" ", "%20")


def serve(data: Path) -> tuple[Settings, SQLiteStore]:
    settings = Settings(data_dir=data)
    return settings, SQLiteStore(data / "greta.sqlite")


def test_a_moved_data_folder_is_rebased_once_and_paths_outside_it_are_kept(tmp_path: Path) -> None:
    old, outside = tmp_path / "a" / "data", tmp_path / "ext"
    settings, store = serve(old)
    inside = QueryRecord(id="i", name="inside", text="x", source={"format": "jsonl", "path": str(old / "in")},
                         sinks=[{"format": "jsonl", "path": str(old / "out")}, {"format": "kafka", "topic": "t"}])
    far = QueryRecord(id="o", name="outside", text="x", source={"format": "jsonl", "path": str(outside)},
                      sinks=[{"format": "parquet", "path": str(old / "out-o")}])
    for rec in (inside, far):
        store.save_query(rec)
    assert relocate(settings, store) is None  # where it is: recorded
    assert json.loads((old / "checkpoints" / LOCATION_FILE).read_text())["absolute"] == str(old)
    key, far_key = stream_key(inside), stream_key(far)
    cp = old / "checkpoints" / key
    spark_log(cp / "sources" / "0" / "0", [{"path": uri(old / "in" / "e 0.jsonl"), "timestamp": 1, "batchId": 0}])
    spark_log(cp / "sources" / "1" / "9.compact", [{"path": uri(cp / "control" / "rows" / "qs-1.jsonl"),
                                                    "timestamp": 2, "batchId": 0}])
    schema = f"file:{cp}/state/0/_stateSchema/default/0_x"
    spark_log(cp / "state" / "0" / "_metadata" / "v2" / "0", [{"stateStoreInfo": [{"stateSchemaFilePaths": [schema]}]}])
    spark_log(old / "checkpoints" / far_key / "sources" / "0" / "0", [{"path": uri(outside / "e.jsonl")}])
    store.close()

    new = tmp_path / "b c é" / "data"  # a space and a letter beyond ASCII: how Spark writes them differs
    new.parent.mkdir()
    shutil.move(old, new)
    settings, store = serve(new)
    moved = relocate(settings, store)
    assert moved is not None and moved.records == 2 and moved.kept == [str(outside)]
    assert moved.missing == [str(outside)]  # not there: its query fails, and the start says so
    assert str(outside) in moved.summary() and f"moved from {old} to {new}" in moved.summary()
    rec = store.get_query("i")
    assert rec is not None and rec.source["path"] == str(new / "in") and rec.sinks[0]["path"] == str(new / "out")
    assert rec.sinks[1] == {"format": "kafka", "topic": "t"}
    far_now = store.get_query("o")
    assert far_now is not None and far_now.source == far.source and far_now.sinks[0]["path"] == str(new / "out-o")
    new_key = stream_key(rec)
    assert new_key != key and moved.streams == {key: new_key} and stream_key(far_now) == far_key
    cp = new / "checkpoints" / new_key
    assert not (new / "checkpoints" / key).exists() and cp.is_dir()
    encoded = str(new).replace(" ", "%20")
    assert f'"file://{encoded}/in/e%200.jsonl"' in (cp / "sources" / "0" / "0").read_text()
    assert f'"file://{encoded}/checkpoints/{new_key}/control/rows/qs-1.jsonl"' in (
        cp / "sources" / "1" / "9.compact").read_text()
    meta = cp / "state" / "0" / "_metadata" / "v2" / "0"
    assert f"file:{new}/checkpoints/{new_key}/state/0/_stateSchema/default/0_x" in meta.read_text()
    for path in (meta, cp / "sources" / "0" / "0", cp / "sources" / "1" / "9.compact"):
        assert path.with_name(f".{path.name}.crc").read_bytes() == crc_of(path)
        assert str(old) not in path.read_text()
    assert uri(outside / "e.jsonl") in (new / "checkpoints" / far_key / "sources" / "0" / "0").read_text()
    assert moved.files == 3
    assert relocate(settings, store) is None  # once
    store.close()

    # a data folder an older version wrote (no record of where it was) moved: read from its checkpoints
    (new / "checkpoints" / LOCATION_FILE).unlink()
    third = tmp_path / "c" / "data"
    third.parent.mkdir()
    shutil.move(new, third)
    settings, store = serve(third)
    moved = relocate(settings, store)
    assert moved is not None and moved.old.absolute == str(new) and moved.records == 2
    rec = store.get_query("i")
    assert rec is not None and rec.source["path"] == str(third / "in")
    assert (third / "checkpoints" / stream_key(rec) / "sources" / "0" / "0").read_text().count(str(third)) == 1
    store.close()


def test_a_data_folder_that_did_not_move_is_left_as_it_is(tmp_path: Path) -> None:
    settings, store = serve(tmp_path / "data")
    store.save_query(QueryRecord(id="i", name="q", text="x", source={"format": "jsonl", "path": str(tmp_path / "in")}))
    assert relocate(settings, store) is None and relocate(settings, store) is None
    assert store.get_query("i").source["path"] == str(tmp_path / "in")  # type: ignore[union-attr]
    assert [p.name for p in settings.checkpoint_dir.iterdir()] == [LOCATION_FILE]
    store.close()
