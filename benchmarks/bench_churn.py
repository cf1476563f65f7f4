"""Query churn on a running service: does a change to one query stop, slow or alter the others?

One `greta-stream serve` (a subprocess, its own data folder, trigger every
``--trigger-s`` seconds) and one JSON-lines source that gets a file every
trigger (each file ``--file-s`` seconds of event time of a stock stream, 10
companies in 3 sectors). Then, as a user of the REST API would:

1. ``--queries`` queries (default 50) registered one every ``--every-s``
   seconds (default 2): Q1-like texts grouped by sector with different
   windows, predicates and aggregates;
2. the first half stopped, one every ``--every-s``, then the second half
   deleted but the last query (25 stopped, 24 deleted at 50);
3. throughout, the stream's completed micro-batches are read from a query's
   progress (``stream_batches``, polled every 0.1 s; a restart starts that
   count again).

Printed: registration latency p50 / p95 / max; stop and delete latency;
micro-batches the stream completed during the churn and how many times it
restarted; the longest gap between two completed batches against the target
(3 trigger intervals plus the longest batch); and whether the last query's
rows (registered last, it stays to the end; the source gets its end-of-input event after the
churn) equal ``evaluate`` over the files it saw: registered after file j
was written, it joins the stream where the stream is (at file j or
before: the stream may run behind the files), so its rows must equal
``evaluate`` over files k.. for one k <= j.

Usage::

    python benchmarks/bench_churn.py [--queries 50] [--every-s 2] [--trigger-s 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from greta_stream import evaluate
from greta_stream.connectors.jsonl import dumps, loads

ROOT = Path(__file__).resolve().parents[1]
KEY = "churn-bench-key"


def texts(n: int, seed: int = 0) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        window = rnd.choice([10, 20, 30])
        op = rnd.choice([">", "<"])
        agg = rnd.choice(["COUNT(*)", "COUNT(*), AVG(S.price)", "SUM(S.price)", "COUNT(*), MAX(S.price)"])
        out.append(f"-- churn query {i}\nRETURN sector, {agg} PATTERN Stock S+ WHERE [company, sector] AND "
                   f"S.price {op} NEXT(S).price GROUP-BY sector WITHIN {window} seconds SLIDE 10 seconds")
    return out


def events_of(index: int, file_s: float, per_file: int, seed: int = 7) -> list[dict[str, Any]]:
    rnd = random.Random(seed * 100_003 + index)
    start = index * file_s
    return [{"type": "Stock", "time": round(start + file_s * k / per_file, 3), "company": (c := rnd.randrange(10)),
             "sector": c % 3, "price": round(100 + rnd.gauss(0, 3), 2)} for k in range(per_file)]


class Trickle(threading.Thread):
    """A file into the source folder every `every_s` seconds (increasing modification times)."""

    def __init__(self, folder: Path, every_s: float, file_s: float, per_file: int) -> None:
        super().__init__(daemon=True)
        self.folder, self.every_s, self.file_s, self.per_file = folder, every_s, file_s, per_file
        self.files: list[list[dict[str, Any]]] = []
        self.written_at: list[float] = []
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()

    def write(self, records: list[dict[str, Any]]) -> None:
        with self.lock:
            i = len(self.files)
            temp = self.folder / f".e-{i:05d}.tmp"
            temp.write_text("".join(json.dumps(r) + "\n" for r in records))
            os.replace(temp, self.folder / f"e-{i:05d}.jsonl")
            self.files.append(records)
            self.written_at.append(time.monotonic())

    def run(self) -> None:
        while not self.stop_flag.wait(self.every_s):
            self.write(events_of(len(self.files), self.file_s, self.per_file))


class Batches(threading.Thread):
    """When the stream completes micro-batches, from one query's progress (`stream_batches`)."""

    def __init__(self, api: httpx.Client) -> None:
        super().__init__(daemon=True)
        self.api, self.probe = api, None
        self.done: list[float] = []
        self.longest_ms: list[tuple[float, int]] = []  # (when, the latest batch's ms) at each batch seen
        self.restarts = 0
        self.stop_flag = threading.Event()

    def run(self) -> None:
        last = None
        while not self.stop_flag.wait(0.1):
            if self.probe is None:
                continue
            try:
                progress = self.api.get(f"/queries/{self.probe}").json()["progress"]
                n, durations = progress["stream_batches"], progress["batch_durations_ms"]
            except Exception:  # noqa: BLE001 - a probe query being deleted: the caller moves it
                continue
            if last is not None and n < last:
                self.restarts += 1
            if last is None or n != last:
                self.done.append(time.monotonic())
                self.longest_ms.append((time.monotonic(), max(durations or [0])))
            last = n


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--every-s", type=float, default=2.0, help="seconds between two changes")
    ap.add_argument("--trigger-s", type=float, default=1.0, help="the stream's trigger interval (and file rate)")
    ap.add_argument("--file-s", type=float, default=10.0, help="event seconds per file")
    ap.add_argument("--per-file", type=int, default=60, help="events per file")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="greta-churn-"))
    src = tmp / "in"
    src.mkdir()
    port = free_port()
    config = tmp / "service.toml"
    config.write_text(f'path_roots = ["{tmp}"]\ntrigger_interval_s = {args.trigger_s}\nmonitor_interval_s = 0.5\n'
                      "max_shards = 8\n")
    env = {**os.environ, "GRETA_API_KEY": KEY, "GRETA_SPARK_LOG_LEVEL": "ERROR"}
    log = open(tmp / "service.log", "wb")  # noqa: SIM115 - open for the server's life
    proc = subprocess.Popen([sys.executable, "-m", "greta_stream", "serve", "--config", str(config), "--port",
                             str(port), "--data-dir", str(tmp / "data")], stdout=log, stderr=subprocess.STDOUT,
                            cwd=tmp, env=env, start_new_session=True)
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"X-API-Key": KEY}, timeout=120)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if api.get("/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        else:
            raise SystemExit("the service did not start: " + (tmp / "service.log").read_text()[-2000:])
        trickle, batches = Trickle(src, args.trigger_s, args.file_s, args.per_file), Batches(api)
        all_texts = texts(args.queries)

        def body(i: int) -> dict[str, Any]:
            return {"name": f"churn-{i:03d}", "text": all_texts[i],
                    "source": {"format": "jsonl", "path": str(src), "max_files_per_trigger": 1},
                    "sinks": [{"format": "jsonl", "path": str(tmp / "out" / f"q{i}")}], "options": {"shards": 4}}

        trickle.write(events_of(0, args.file_s, args.per_file))
        ids, joined_after, register_s = [], [], []
        for i in range(args.queries):
            joined_after.append(len(trickle.files))  # files written before it registered
            t0 = time.monotonic()
            r = api.post("/queries", json=body(i))
            register_s.append(time.monotonic() - t0)
            if r.status_code != 201:
                raise SystemExit(f"registration {i}: {r.status_code} {r.text}")
            ids.append(r.json()["id"])
            if i == 0:
                batches.probe = ids[0]
                batches.start()
                trickle.start()
            time.sleep(max(0.0, args.every_s - register_s[-1]))
        churn_start = batches.done[0] if batches.done else time.monotonic()
        half = args.queries // 2
        batches.probe = ids[-1]  # a query that stays to the end
        stop_s, delete_s = [], []
        for i in range(half):
            t0 = time.monotonic()
            assert api.post(f"/queries/{ids[i]}/stop").status_code == 200
            stop_s.append(time.monotonic() - t0)
            time.sleep(max(0.0, args.every_s - stop_s[-1]))
        for i in range(half, args.queries - 1):
            t0 = time.monotonic()
            assert api.delete(f"/queries/{ids[i]}").status_code == 204
            delete_s.append(time.monotonic() - t0)
            time.sleep(max(0.0, args.every_s - delete_s[-1]))
        churn_end = time.monotonic()
        trickle.stop_flag.set()
        trickle.join()
        trickle.write([{"type": "Flush", "time": len(trickle.files) * args.file_s + 100_000}])  # closes every window
        last = ids[-1]
        # the last query ran throughout: its rows against evaluate over the files from its registration on
        deadline = time.monotonic() + 300
        flat = lambda k: [e for f in trickle.files[k:] for e in f if e["type"] == "Stock"]  # noqa: E731
        # the stream may run behind the files written (a file per trigger, some batches longer): the
        # query joins at the stream's position, at or before the file written when it registered
        want_by_k = {k: sorted(dumps(r) for r in evaluate(all_texts[-1], flat(k)))
                     for k in range(max(0, joined_after[-1] - 20), joined_after[-1] + 1)}
        got: list[str] = []
        while time.monotonic() < deadline:
            got, offset = [], 0
            while offset is not None:
                page = loads(api.get(f"/queries/{last}/results", params={"limit": 1000, "offset": offset}).text)
                got += [dumps(r) for r in page["rows"]]
                offset = page["next_offset"]
            if any(sorted(got) == w for w in want_by_k.values()):
                break
            time.sleep(1)
        joined = [k for k, w in want_by_k.items() if sorted(got) == w]
        exact = bool(joined)
        batches.stop_flag.set()
        during = [t for t in batches.done if churn_start <= t <= churn_end]
        gaps = [b - a for a, b in zip(during, during[1:], strict=False)]
        longest_batch_s = max([ms for t, ms in batches.longest_ms if churn_start <= t <= churn_end] or [0]) / 1000
        target_gap = 3 * args.trigger_s + longest_batch_s
        result = {
            "queries": args.queries, "every_s": args.every_s, "trigger_s": args.trigger_s,
            "register_p50_s": statistics.median(register_s), "register_p95_s": pct(register_s, 0.95),
            "register_max_s": max(register_s), "stop_p50_s": statistics.median(stop_s) if stop_s else None,
            "delete_p50_s": statistics.median(delete_s) if delete_s else None,
            "churn_s": churn_end - churn_start, "batches_during_churn": len(during), "restarts": batches.restarts,
            "longest_batch_s": longest_batch_s, "longest_gap_s": max(gaps) if gaps else None,
            "target_gap_s": target_gap,
            "rows_exact_last_query": exact, "files": len(trickle.files),
            "last_query_registered_after_file": joined_after[-1], "it_joined_at_file": joined[0] if joined else None,
        }
        width = max(map(len, result))
        for k, v in result.items():
            print(f"{k:<{width}}  {v:.3f}" if isinstance(v, float) else f"{k:<{width}}  {v}")
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(result, indent=1))
        return 0 if exact else 1
    finally:
        api.close()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


if __name__ == "__main__":
    raise SystemExit(main())
