"""RocksDB's native library comes from the cache (`greta_stream.jvm.rocksdb_library_dir`), not from a
copy each JVM unpacks into the temporary folder: a JVM killed with SIGKILL after its stateful stream ran
leaves no `librocksdbjni*.so` behind. Without the cache's folder on the driver's library path (the same
run with `spark.driver.extraLibraryPath` emptied) it does, which is what the first half guards against."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from greta_stream.jvm import rocksdb_library_dir

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("subprocesses")]

# A stateful stream on RocksDB (get_session's state store), then the JVM's pid and the native libraries
# it mapped; the test kills it with SIGKILL, as a crash or a supervisor would
STATEFUL = """
import json, os, sys
from greta_stream.spark.session import get_session
tmp = sys.argv[1]
conf = {"spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={tmp}", **json.loads(sys.argv[2])}
spark = get_session("local[1]", conf=conf)
os.makedirs(f"{tmp}/in")
with open(f"{tmp}/in/e.json", "w") as f:
    f.write("\\n".join(json.dumps({"k": i % 3}) for i in range(30)))
df = spark.readStream.schema("k INT").json(f"{tmp}/in")
q = (df.groupBy("k").count().writeStream.outputMode("complete").format("memory").queryName("counts")
     .option("checkpointLocation", f"{tmp}/chk").trigger(availableNow=True).start())
q.awaitTermination()
assert sorted(tuple(r) for r in spark.sql("SELECT * FROM counts").collect()) == [(0, 10), (1, 10), (2, 10)]
pid = spark.sparkContext._gateway.proc.pid
libs = sorted({line.split()[-1] for line in open(f"/proc/{pid}/maps") if "rocksdbjni" in line})
print(json.dumps({"pid": pid, "libs": libs}), flush=True)
sys.stdin.read()  # until killed
"""


def killed_after_a_stateful_stream(tmp: Path, conf: dict[str, str]) -> tuple[list[str], list[Path]]:
    """The RocksDB libraries the JVM mapped, and the ones its temporary folder holds once it was killed."""
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", STATEFUL, str(tmp), json.dumps(conf)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line, proc.stderr.read()[-3000:]  # type: ignore[union-attr]
        seen = json.loads(line)
        os.kill(seen["pid"], signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    return seen["libs"], sorted(tmp.glob("librocksdbjni*"))


@pytest.mark.skipif(rocksdb_library_dir() is None, reason="no RocksDB library of this machine in Spark's jar")
def test_a_killed_jvm_leaves_no_rocksdb_library_in_the_temporary_folder(tmp_path: Path) -> None:
    native = rocksdb_library_dir()
    assert native is not None
    mapped, left = killed_after_a_stateful_stream(tmp_path / "cached", {})
    assert mapped == [str(native / "librocksdbjni.so")] and left == []
    mapped, left = killed_after_a_stateful_stream(tmp_path / "unpacked", {"spark.driver.extraLibraryPath": ""})
    assert len(left) == 1 and mapped == [str(left[0])]  # RocksDB's own copy, left behind by the kill
