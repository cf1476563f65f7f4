"""`greta_service.recheck` in process (no Spark): registered queries the registration's checks refuse now
are failed, the later of two in conflict; tests/service/test_moved_data.py checks it on the service."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from greta_service.guards import Place, check_places
from greta_service.recheck import recheck, refusal
from greta_service.registry import Registry
from greta_service.roster import Folders
from greta_service.settings import Settings
from greta_service.store import QueryRecord, SQLiteStore
from greta_stream import ConfigError


def record(n: int, name: str, source: Path, *sinks: Path) -> QueryRecord:
    return QueryRecord(id=f"q{n}", name=name, text="x", source={"format": "jsonl", "path": str(source)},
                       sinks=[{"format": "jsonl", "path": str(s)} for s in sinks], created_at=n)


def test_the_later_of_two_queries_in_conflict_fails_and_the_others_pass(tmp_path: Path) -> None:
    for folder in ("in", "other"):
        (tmp_path / folder).mkdir()
    store = SQLiteStore(tmp_path / "data" / "greta.sqlite")
    registry = Registry(Settings(data_dir=tmp_path / "data"), store)
    recs = [record(1, "first", tmp_path / "other", tmp_path / "in" / "rows"),  # it writes into in: the reader fails
            record(2, "reader", tmp_path / "in", tmp_path / "out" / "reader"),
            record(3, "fine", tmp_path / "other", tmp_path / "out" / "fine"),
            record(4, "twin", tmp_path / "other", tmp_path / "out" / "fine"),  # a second writer of one folder
            record(5, "gone", tmp_path / "nowhere", tmp_path / "out" / "gone"),
            record(6, "heir", tmp_path / "other", tmp_path / "out" / "reader")]  # the failed reader's: not started
    store.save_queries(recs)
    failed = recheck(registry)
    assert sorted(failed) == ["q2", "q4", "q5"]
    assert "holds the sink folder" in failed["q2"] and "query 'first'" in failed["q2"]
    assert "two writers" in failed["q4"] and "query 'fine'" in failed["q4"] and "does not exist" in failed["q5"]
    for rec in store.list_queries():
        assert (rec.status, rec.error) == (("failed", failed[rec.id]) if rec.id in failed else ("running", None))
    assert refusal(registry, store.get_query("q3")) is None  # type: ignore[arg-type]
    assert "query 'fine'" in (refusal(registry, store.get_query("q4")) or "")  # type: ignore[arg-type]
    assert "query 'heir'" in (refusal(registry, store.get_query("q2")) or "")  # type: ignore[arg-type]
    assert refusal(registry, store.get_query("q6")) is None  # type: ignore[arg-type]  # the failed reader: not counted
    store.close()


@pytest.mark.parametrize("seed", range(20))
def test_the_places_near_a_query_name_the_conflict_all_of_them_would(seed: int) -> None:
    rng = random.Random(seed)
    folders = ["/", "/a", "/a/b", "/a/b/c", "/a/bc", "/a/b-c", "/b", "/b/a", "/ab", "/a/b/c/d"]
    passed = Folders()
    everything: list[Place] = []
    for n in range(rng.randint(1, 12)):
        mine = [Place(rng.choice(folders), rng.choice(["source", "sink", "dead_letter"]), rng.choice(["jsonl", "delta"]),
                      f"q{n}") for _ in range(rng.randint(1, 3))]
        expected = _refused(mine, everything)
        assert _refused(mine, passed.near(mine)) == expected
        if expected is None:
            everything += mine
            passed.put(mine)


def _refused(new: list[Place], others: list[Place]) -> str | None:
    try:
        check_places(new, others)
    except ConfigError as exc:
        return str(exc)
    return None
