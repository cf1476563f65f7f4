"""The query sets that ride a stream do not pile up: a stream's start removes the earlier runs' sets."""

from __future__ import annotations

from pathlib import Path

from greta_stream import QuerySet, RunSpec
from greta_stream.spark.control import ControlSets
from greta_stream.spark.layout import open_layout


def test_a_start_removes_the_sets_before_its_own_version(tmp_path: Path) -> None:
    queries = QuerySet.of({"q": RunSpec.create("RETURN COUNT(*) PATTERN A X+ WITHIN 10 s")})
    layout = open_layout(None, queries, 2, 2)
    sets = ControlSets(tmp_path / "control")
    for version in (1, 2, 3, 4):
        sets.write(version, queries, layout)
    assert sets.prune(below=3) == 2
    assert sorted(p.name for p in sets.sets.iterdir()) == ["qs-0000000003.pkl", "qs-0000000004.pkl"]
    assert sets.latest() == 4 and sets.slots(3)[0] == layout  # the kept ones still read
    assert sets.prune(below=3) == 0


def test_a_set_gone_or_damaged_reads_the_newest_one_written(tmp_path: Path) -> None:
    """Control files deleted or damaged while the service was stopped, or a stray control row naming a
    version never written: a shard runs with the newest set there (the driver's own, from its registry),
    and says which it ran; with none at all, a clear error."""
    import pytest

    from greta_stream.errors import SnapshotError

    queries = {v: QuerySet.of({f"q{i}": RunSpec.create("RETURN COUNT(*) PATTERN A X+ WITHIN 10 s") for i in range(v)})
               for v in (1, 2, 3)}
    layout = open_layout(None, queries[3], 2, 2)
    sets = ControlSets(tmp_path / "control")
    for version in (1, 2, 3):
        sets.write(version, queries[version], layout)
    (sets.sets / "qs-0000000002.pkl").unlink()
    version, (_, slots) = sets.read(2)
    assert version == 3 and sorted(n for qs in slots.values() for n in qs.names) == ["q0", "q1", "q2"]
    assert sets.read(999_999)[0] == 3  # a stray row {"version": 999999}
    assert sets.read(1)[0] == 1  # one that is there: itself
    (sets.sets / "qs-0000000003.pkl").write_bytes(b"damaged")
    sets._cache.clear()
    with pytest.raises(SnapshotError, match="query set 3 is gone"):
        sets.read(3)
    for path in sets.sets.iterdir():
        path.unlink()
    with pytest.raises(SnapshotError, match="no other is there"):
        sets.read(2)
