"""The registry as the checks of a change read it (no server): `Store.records` and `version`, and `Roster`.

A change is checked against a roster built once per version of the registry; a roster that outlived a
change would check against queries that are gone, or miss new ones, without a word."""

from __future__ import annotations

from pathlib import Path

from greta_service.guards import places
from greta_service.roster import Roster
from greta_service.runner import stream_key
from greta_service.store import QueryRecord, SQLiteStore


def record(i: int, source: str, sink: str | None = None, created: float | None = None) -> QueryRecord:
    return QueryRecord(id=f"id{i}", name=f"q{i}", text="-", source={"format": "jsonl", "path": source},
                       sinks=[{"format": "jsonl", "path": sink}] if sink else [],
                       created_at=float(i) if created is None else created)


def test_records_are_kept_until_a_change_and_each_change_is_a_new_version(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "r.sqlite")
    store.save_queries([record(2, "/in/a"), record(1, "/in/a")])
    first, v1 = store.records(), store.version
    assert [r.id for r in first] == ["id1", "id2"]  # registration order, not the order saved
    assert all(a is b for a, b in zip(first, store.records())) and store.version == v1  # no copy, no change
    assert all(a is not b for a, b in zip(first, store.list_queries()))  # a caller's own copies
    store.save_query(record(0, "/in/b", created=0.5))
    assert store.version != v1 and [r.id for r in store.records()] == ["id0", "id1", "id2"]
    v2 = store.version
    store.delete_query("id1")
    assert store.version != v2 and [r.id for r in store.records()] == ["id0", "id2"]
    again = SQLiteStore(tmp_path / "r.sqlite")  # read back from the file, in the same order
    assert [r.id for r in again.records()] == ["id0", "id2"]


def test_a_roster_holds_each_stream_name_and_folder(tmp_path: Path) -> None:
    recs = [record(1, "/in/a", "/out/1"), record(2, "/in/a"), record(3, "/in/b", "/out/3")]
    roster = Roster.of(7, recs, tmp_path)
    assert roster.version == 7
    assert {k: [r.id for r in v] for k, v in roster.by_stream.items()} == {
        stream_key(recs[0]): ["id1", "id2"], stream_key(recs[2]): ["id3"]}
    assert roster.names == {"q1": "id1", "q2": "id2", "q3": "id3"} and roster.by_id["id2"] is recs[1]
    new = places("new", {"format": "jsonl", "path": "/in/a"}, [{"format": "jsonl", "path": "/out/1/x"}], None, tmp_path)
    assert {(p.folder, p.query) for p in roster.folders.near(new)} == {("/in/a", "q1"), ("/out/1", "q1")}
    # the query itself left out before one place of each folder is kept: q2 still names the source
    assert {(p.folder, p.query) for p in roster.folders.near(new, frozenset({"q1"}))} == {("/in/a", "q2")}
    assert roster.folders.near(places("n", {"format": "jsonl", "path": "/in/c"}, [], None, tmp_path)) == []
