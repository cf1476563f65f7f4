"""The control rows' protocol (greta_stream/spark/control.py), without a JVM: what the driver writes
(a query set, then a one-line row naming its version), how a shard's state carries the version it ran
(`stamped` / `unstamped`), how a shard's input gives up its control rows (`control_rows`) and which
version a shard then runs (`operator._turn`, `_moved`, `_kept`), and `ControlSets.read` falling back
to the newest set when the one named is gone or damaged. The rows as Spark reads them from their
files (`read_rows`) are the one test here that needs a SparkSession."""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from greta_stream import QuerySet, RunSpec
from greta_stream.errors import SnapshotError
from greta_stream.spark import control
from greta_stream.spark.control import (
    CONTROL_COLUMN,
    ControlSets,
    LiveSet,
    control_rows,
    stamped,
    streaming_slots,
    unstamped,
)
from greta_stream.spark.layout import open_layout
from greta_stream.spark.operator import _kept, _moved, _turn
from greta_stream.spark.shard import parse_json_records, step

Q = "RETURN COUNT(*) PATTERN A X+ WITHIN 10 s"


def queries(n: int) -> QuerySet:
    return QuerySet.of({f"q{i}": RunSpec.create(Q) for i in range(n)})


def names(slots: dict[int, QuerySet]) -> list[str]:
    return sorted(n for qs in slots.values() for n in qs.names)


class Stream:
    """A stream's control folder with versions 1..n written (version v: queries q0..q{v-1}), started at `first`."""

    def __init__(self, folder: Path, n: int = 3, first: int = 1) -> None:
        self.layout = open_layout(None, queries(n + 1), 2, 2)  # the queries of every version, and of one more
        self.sets = ControlSets(folder / "control")
        for v in range(1, n + 1):
            self.sets.write(v, queries(v), self.layout)
        self.first = first
        self.slots = streaming_slots(self.layout, queries(first))  # what the stream started with
        self.key = self.layout.keys(0)[0]

    def turn(self, frame: pd.DataFrame | None, state: bytes | None = None) -> Any:
        return _turn((self.sets, self.first), self.layout, self.slots, self.key, frame, state)


def shard_input(events: int, *versions: float | None) -> pd.DataFrame:
    """A shard's input as Spark hands it: `events` event rows (no version), then a row per version
    (None: a control row whose version Spark could not read: a null, as for an event)."""
    values = [json.dumps({"type": "X", "time": i}) for i in range(events)] + [None] * len(versions)
    return pd.DataFrame({"value": values, CONTROL_COLUMN: [np.nan] * events + [np.nan if v is None else v for v in versions]})


# --- what the driver writes ------------------------------------------------------------------------------------

def test_a_version_is_its_set_then_a_one_line_row_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sets = ControlSets(tmp_path / "control")
    layout = open_layout(None, queries(2), 2, 2)
    written: list[str] = []
    atomic = control._atomic
    monkeypatch.setattr(control, "_atomic", lambda path, data: (written.append(f"{path.parent.name}/{path.name}"),
                                                                atomic(path, data)))
    sets.write(7, queries(2), layout)
    # the set first: a shard that reads the row finds its set
    assert written == ["sets/qs-0000000007.pkl", "rows/qs-0000000007.jsonl"]
    row = (sets.rows / "qs-0000000007.jsonl").read_text()
    assert row.endswith("\n") and row.count("\n") == 1 and json.loads(row) == {"version": 7}
    kept, kept_layout = pickle.loads((sets.sets / "qs-0000000007.pkl").read_bytes())  # noqa: S301 - written here
    assert kept.names == queries(2).names and kept_layout == layout
    assert sorted(p.name for p in (tmp_path / "control").rglob("*")) == [
        "qs-0000000007.jsonl", "qs-0000000007.pkl", "rows", "sets"]  # no temporary file left
    assert sets.latest() == 7 and ControlSets(tmp_path / "nowhere").latest() == 0


def test_a_live_change_writes_the_next_version_and_refuses_one_the_stream_cannot_route(tmp_path: Path) -> None:
    layout = open_layout(tmp_path, queries(1), 2, 2, control=True)
    sets = ControlSets(tmp_path / "control")
    sets.write(4, queries(1), layout)
    live = LiveSet(sets, tmp_path, layout, queries(1), frozenset(layout.members(queries(1))), 4)
    assert live.change(queries(2)) == 5 and live.version == 5 and sets.latest() == 5
    assert json.loads((sets.rows / "qs-0000000005.jsonl").read_text()) == {"version": 5}
    grouped = QuerySet.of({"g": RunSpec.create(Q.replace("WITHIN", "WHERE [a] GROUP-BY a WITHIN"))})
    assert live.change(grouped) is None  # a new slot: no event goes there, the stream restarts instead
    assert sets.latest() == 5 and live.version == 5  # nothing written


# --- the version a shard's state carries -----------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 2, 999_999, 2 ** 63 - 1])
@pytest.mark.parametrize("blob", [b"state", b"GRETA-CTL\x00 inside", None])
def test_a_stamped_state_gives_back_its_version_and_blob(version: int, blob: bytes | None) -> None:
    assert unstamped(stamped(blob, version)) == (version, blob)
    assert unstamped(bytearray(stamped(blob, version))) == (version, blob)  # Spark hands binary state as a bytearray


def test_a_stamp_alone_is_kept_state_and_an_empty_blob_is_none() -> None:
    assert stamped(None, 3) == stamped(b"", 3) and len(stamped(None, 3)) == len(b"GRETA-CTL\x00") + 8
    assert unstamped(stamped(b"", 3)) == (3, None)


@pytest.mark.parametrize("blob", [None, b"", b"x" * 40, b"GRETA-CTL", b"x\x9c" + bytes(range(30))])
def test_an_unstamped_state_is_version_0_and_kept_whole(blob: bytes | None) -> None:
    """A state written before control rows (or by a stream without them): version 0, its bytes untouched."""
    assert unstamped(blob) == (0, blob)


def test_a_truncated_stamp_is_refused_not_read_as_a_version() -> None:
    with pytest.raises(struct.error):
        unstamped(stamped(b"", 5)[:-3])


# --- a shard's input: control rows out, the newest version -----------------------------------------------------

def test_an_input_without_control_rows_is_handed_on_as_it_is() -> None:
    assert control_rows(None) == (None, 0)
    plain = pd.DataFrame({"value": ["{}"]})
    assert control_rows(plain)[0] is plain and control_rows(plain)[1] == 0
    events = shard_input(3)
    assert control_rows(events)[0] is events and control_rows(events)[1] == 0


@pytest.mark.parametrize("dtype", ["float64", "Int64"])  # Arrow's long with nulls: float64 NaN, or pandas' nullable
def test_control_rows_leave_the_input_and_the_newest_version_is_taken(dtype: str) -> None:
    frame = shard_input(0)
    frame = pd.DataFrame({"value": ['{"time": 1}', None, '{"time": 2}', None, None],
                          CONTROL_COLUMN: pd.array([None, 4, None, 2, 3], dtype=dtype)})
    rest, newest = control_rows(frame)
    assert newest == 4 and type(newest) is int
    assert rest is not None and rest["value"].tolist() == ['{"time": 1}', '{"time": 2}'] and list(rest.index) == [0, 1]
    only, newest = control_rows(frame.iloc[[1, 3]])
    assert only is None and newest == 4  # a batch of control rows alone: no input left


# --- which version a shard runs ---------------------------------------------------------------------------------

def test_a_stream_without_control_rows_runs_its_slots_unstamped(tmp_path: Path) -> None:
    stream = Stream(tmp_path)
    frame = shard_input(2)
    turn = _turn(None, stream.layout, stream.slots, stream.key, frame, b"old state")
    assert turn.frame is frame and turn.now == 0 and not turn.moved and turn.blob == b"old state"
    assert _moved(turn) == [] and _kept(None, 0, b"blob") == b"blob" and _kept(None, 0, None) is None


def test_a_shard_first_runs_the_version_the_stream_started_with(tmp_path: Path) -> None:
    stream = Stream(tmp_path, first=1)
    turn = stream.turn(shard_input(2))
    assert turn.now == 1 and turn.moved and names({0: turn.where[0]}) == ["q0"]
    assert _kept((stream.sets, 1), 1, None) is None  # nothing to keep at the start version: no stamp needed
    assert unstamped(_kept((stream.sets, 1), 1, b"s")) == (1, b"s")


def test_a_control_row_moves_the_shard_to_its_version_and_says_so(tmp_path: Path) -> None:
    stream = Stream(tmp_path, first=1)
    turn = stream.turn(shard_input(2, 2), stamped(b"state", 1))
    assert turn.now == 2 and turn.moved and turn.blob == b"state"
    assert turn.frame is not None and len(turn.frame) == 2  # the events, the control row gone
    assert turn.where is not None and names({0: turn.where[0]}) == ["q0", "q1"]
    assert _moved(turn) == [{"query": "", "kind": "control", "window_start": None, "window_end": None, "grp": None,
                             "payload": "2", "reason": None}]
    # the stamp is kept even with no state left: the shard must not fall back to the start version
    assert unstamped(_kept((stream.sets, 1), 2, None)) == (2, None)


def test_a_stamped_state_keeps_its_version_in_later_batches(tmp_path: Path) -> None:
    stream = Stream(tmp_path, first=1)
    turn = stream.turn(shard_input(1), stamped(None, 3))
    assert turn.now == 3 and not turn.moved and turn.blob is None and names({0: turn.where[0]}) == ["q0", "q1", "q2"]
    assert _moved(turn) == []


@pytest.mark.parametrize("version", [1, 0, -5])
def test_an_older_or_bad_version_never_moves_a_shard_back(tmp_path: Path, version: int) -> None:
    """A control row of an older version (a replayed batch, a row written before the shard took a newer
    one) or a version no driver writes (0, negative): versions only grow, the shard keeps its own."""
    stream = Stream(tmp_path, first=1)
    turn = stream.turn(shard_input(1, version), stamped(b"s", 2))
    assert turn.now == 2 and not turn.moved and turn.frame is not None and len(turn.frame) == 1


def test_a_stray_row_naming_a_set_never_written_runs_the_newest_set_and_stamps_its_version(tmp_path: Path) -> None:
    """{"version": 999999}: no such set; the shard runs the newest written (the driver's own) and stamps that
    version, not 999999, so the driver's next version is still taken."""
    stream = Stream(tmp_path, n=2, first=1)
    turn = stream.turn(shard_input(1, 999_999), stamped(None, 1))
    assert turn.now == 2 and turn.moved and names({0: turn.where[0]}) == ["q0", "q1"]
    assert _moved(turn)[0]["payload"] == "2"
    state = _kept((stream.sets, 1), turn.now, None)
    stream.sets.write(3, queries(3), stream.layout)
    later = stream.turn(shard_input(0, 3), state)
    assert later.now == 3 and later.moved and names({0: later.where[0]}) == ["q0", "q1", "q2"]


def test_a_row_with_no_readable_version_is_no_control_row(tmp_path: Path) -> None:
    """{"version": "abc"}, {} or a line that is not JSON: Spark reads a null version (`read_rows`), which is
    what an event has. It changes no version; it stays in the shard's input, where its text (none) is a
    malformed dead letter of each query, never a query-set change."""
    stream = Stream(tmp_path, first=1)
    turn = stream.turn(shard_input(1, None), stamped(None, 2))
    assert turn.now == 2 and not turn.moved and turn.frame is not None and len(turn.frame) == 2
    records = parse_json_records(turn.frame["value"])
    out, _, _ = step(turn.where[0], None, records, 0, times_s=np.array([0.0, np.nan]))
    dead = [(o["query"], json.loads(o["payload"])) for o in out if o["kind"] == "dead"]
    assert dead == [(q, {"reason": "malformed", "detail": "an event must be a JSON object", "event": None})
                    for q in ("q0", "q1")]


def test_a_shard_whose_sets_are_all_gone_fails_saying_to_restart(tmp_path: Path) -> None:
    stream = Stream(tmp_path, first=1)
    for path in stream.sets.sets.iterdir():
        path.unlink()
    with pytest.raises(SnapshotError, match="restart the stream"):
        stream.turn(shard_input(1, 2), stamped(None, 1))


# --- ControlSets.read: the set named, or the newest one ---------------------------------------------------------

def test_a_set_that_is_there_is_read_as_itself(tmp_path: Path) -> None:
    stream = Stream(tmp_path)
    for v in (1, 2, 3):
        version, (layout, slots) = stream.sets.read(v)
        assert version == v and layout == stream.layout and names(slots) == [f"q{i}" for i in range(v)]


@pytest.mark.parametrize("damage", ["gone", "garbage", "truncated", "empty", "other shape"])
def test_a_set_gone_or_damaged_reads_the_newest_one(tmp_path: Path, damage: str) -> None:
    stream = Stream(tmp_path)
    path = stream.sets.sets / "qs-0000000002.pkl"
    if damage == "gone":
        path.unlink()
    else:
        path.write_bytes({"garbage": b"not a pickle", "truncated": path.read_bytes()[:20], "empty": b"",
                          "other shape": pickle.dumps((1, 2, 3))}[damage])
    version, (_, slots) = stream.sets.read(2)
    assert version == 3 and names(slots) == ["q0", "q1", "q2"]


def test_the_newest_set_damaged_is_an_error_not_an_older_set(tmp_path: Path) -> None:
    """Falling back goes to the newest set only: an older one would run a query set the driver left."""
    stream = Stream(tmp_path)
    (stream.sets.sets / "qs-0000000003.pkl").write_bytes(b"damaged")
    with pytest.raises(SnapshotError, match="query set 3 is gone"):
        stream.sets.read(3)
    assert stream.sets.read(1)[0] == 1  # an older one asked by name still reads


def test_a_stray_row_with_the_newest_set_damaged_is_the_error_that_says_to_restart(tmp_path: Path) -> None:
    stream = Stream(tmp_path)
    (stream.sets.sets / "qs-0000000003.pkl").write_bytes(b"damaged")
    with pytest.raises(SnapshotError, match="restart the stream"):
        stream.sets.read(999_999)


def test_a_worker_keeps_the_last_sets_it_read(tmp_path: Path) -> None:
    stream = Stream(tmp_path, n=6)
    for v in range(1, 7):
        stream.sets.read(v)
    assert sorted(stream.sets._cache) == [3, 4, 5, 6]
    (stream.sets.sets / "qs-0000000006.pkl").unlink()
    assert stream.sets.read(6)[0] == 6  # read before: from memory


# --- the rows as Spark reads them --------------------------------------------------------------------------------

def test_spark_reads_a_rows_version_or_a_null(spark: Any, tmp_path: Path) -> None:  # noqa: ANN401
    """Each row file's line as `read_rows` gives it to the stream: its version, or a null when it names none
    Spark reads as a number (which `control_rows` leaves in the input: the test above)."""
    sets = ControlSets(tmp_path / "control")
    sets.write(3, queries(1), open_layout(None, queries(1), 2, 2))
    lines = {"a": '{"version": 7}', "b": '{"version": "8"}', "c": "{}", "d": "not json", "e": '{"version": null}',
             "f": '{"other": 1, "version": 9}'}
    for name, line in lines.items():
        (sets.rows / f"{name}.jsonl").write_text(line + "\n")
    got: list[Any] = []
    query = (control.read_rows(spark, sets).writeStream.trigger(availableNow=True)
             .foreachBatch(lambda batch, _: got.extend(r[0] for r in batch.collect()))
             .option("checkpointLocation", str(tmp_path / "chk")).start())
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(got, key=lambda v: (v is None, v)) == [3, 7, 8, 9, None, None, None]


def test_a_row_whose_version_is_no_whole_number_is_a_null_not_a_failed_stream(spark: Any, tmp_path: Path) -> None:  # noqa: ANN401
    sets = ControlSets(tmp_path / "control")
    sets.rows.mkdir(parents=True)
    for name, line in {"a": '{"version": "abc"}', "b": '{"version": 1.5}', "c": '{"version": 1' + "0" * 22 + "}"}.items():
        (sets.rows / f"{name}.jsonl").write_text(line + "\n")
    got: list[Any] = []
    query = (control.read_rows(spark, sets).writeStream.trigger(availableNow=True)
             .foreachBatch(lambda batch, _: got.extend(r[0] for r in batch.collect()))
             .option("checkpointLocation", str(tmp_path / "chk")).start())
    query.awaitTermination(120)
    assert query.exception() is None and got == [None, None, None]
