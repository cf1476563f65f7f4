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
