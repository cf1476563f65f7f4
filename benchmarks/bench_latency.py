"""Latency of a live stream: when a window's row is visible in the output folder, minus the window's end.

A writer thread writes stock events as they happen: every ``--every`` seconds
(default 0.2) a JSON-lines file (``--source file``; written beside the input
folder and renamed into it, so the stream never reads half a file) or a
batch of Kafka messages (``--source kafka``, on a real KRaft broker started
here as the Kafka tests start theirs, ``greta_stream.demo.broker``) of
``--rate`` x ``--every`` events (default 1,000 events/s), their ``time`` the
wall-clock second they were written at, spread evenly over the interval,
``--companies`` companies (default 20) whose prices walk at random.
Two runs read such a stream, one after the other, each for ``--seconds``
(default 60) from its start, Spark's start included:

- **greta**: ``greta-stream run`` (the real command, in a child process) with
  a Q1-like query, ``RETURN company, COUNT(*) PATTERN Stock S+ WHERE
  [company] AND S.price > NEXT(S).price GROUP-BY company WITHIN 10 seconds
  SLIDE 1 second``, ``--lateness 0``, the default trigger (a micro-batch as
  soon as the last one ends) unless ``--trigger-interval``, JSON-lines sink;
- **spark**: Spark's own ``groupBy(window(ts, "10 seconds", "1 second"),
  company).count()`` on the same kind of stream, ``withWatermark(ts, "0
  seconds")``, append mode, Spark's JSON file sink, on a session from
  ``greta_stream.spark.get_session`` (the same settings), default trigger.

Each run starts on an empty input (its writer starts with it), so its
first windows are those of its first seconds. The parent polls the run's
output folder every 50 ms and records the wall time each window (its end)
first shows a row: a file's rows are read again whenever its size changes
(Spark's file sink writes its part files in place). Reported per run:

- ``first row s``: from the child's start to the first row visible;
- ``p50``, ``p95``, ``p99``, ``max`` of (row visible - window end) over the
  steady windows: those that end after the first row was visible and after
  the run caught up, and at least 10 s before the run stops; ``missing``
  counts those windows that never showed a row (should be 0). A run has
  caught up when its first micro-batch after the first that reads events,
  at most 2 s of them, ends: the events written while Spark started come in one or
  two larger batches, and a window that closes during those measures the
  start, which the first column does. Without that rule the two runs would
  be measured differently: greta's first row comes out of its first
  micro-batch, Spark's append mode writes a window one batch later, so
  greta's measured windows would include its catch-up batch and Spark's
  would not;
- ``p99 all``: the p99 over every window after the first row, catch-up
  included;
- ``batches``, ``batch ms`` (median ``triggerExecution``);
- ``lag`` (file source): the median, over the same windows, of the
  micro-batches from the one that read the first event at or past the
  window's end (the batch that closes it) to the one that wrote its row, and
  ``0/1/2+`` the share of windows written in that same batch, the next one,
  or later: a measure the machine's load does not stretch;
- ``rows`` (greta): ``equal`` when the rows written are those of
  ``greta_stream.evaluate`` over every event written, for the windows up to
  the last one the run emitted (else ``DIFFER`` and how many rows differ);
- with ``--phases``, where a micro-batch's time goes (below);
- the load average over the run (the machine may be shared: a busy machine
  stretches every figure).

``--phases`` prints, for each run, the medians over its micro-batches that
read events of each ``durationMs`` phase of Spark's progress reports
(``latestOffset``: listing the files or asking Kafka for offsets,
``queryPlanning``, ``walCommit``, ``addBatch``: the job itself, ``commitOffsets``)
and of the state store's ``commitTimeMs``; for greta, also time measured
inside the job: in the driver, ``collect`` (running the job up to the
collected outputs: the shuffle, the Arrow transfer to and from the Python
workers, the operator, the state store) and ``sink`` (writing the rows),
and in the Python workers (summed over a batch's shard calls), ``arrow in``
(reading the shard's rows into one pandas frame), ``records`` (the frame to
the engine's records), ``engine`` (``shard.step_incremental``: the engine's
work and the state's bytes) and ``state API`` (the rest of a call: the
value, map and timer calls to the JVM). The worker timings are taken by
wrapping the operator's functions in the child before the stream starts
(the processor carries its steps pickled by value, so the wrappers travel with them).

``--conf key=value`` (repeatable) adds a Spark setting to both runs' sessions,
so each setting's effect can be measured on its own, e.g.
``--conf spark.sql.streaming.stateStore.checkpointFormatVersion=2``;
``--shards``, ``--trigger-interval`` are passed to ``greta-stream run``.

    .venv/bin/python benchmarks/bench_latency.py --quick             # 30 s per run, ~2 min
    .venv/bin/python benchmarks/bench_latency.py                     # 60 s per run, ~3 min
    .venv/bin/python benchmarks/bench_latency.py --runs greta --phases --conf spark.sql.shuffle.partitions=1
    .venv/bin/python benchmarks/bench_latency.py --source kafka      # needs `make setup-jvm` (the broker's jars)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from benchlib import Table, git_state  # noqa: E402

QUERY = ("RETURN company, COUNT(*) PATTERN Stock S+ WHERE [company] AND S.price > NEXT(S).price "
         "GROUP-BY company WITHIN {within} seconds SLIDE {slide} second")
MARGIN_S = 10.0  # windows ending this close to a run's stop are left out: their row may not be due yet
WORKER_LOG = "GRETA_BENCH_WORKER_LOG"  # the child's env: where the Python workers append their timings


# ----------------------------------------------------------------------------------------- the stream


class Writer(threading.Thread):
    """Stock events as they happen: every `every` s, `rate * every` events timed over the last interval."""

    def __init__(self, send: Any, rate: float, every: float, companies: int, seed: int = 0) -> None:
        super().__init__(name="writer", daemon=True)
        self.send, self.rate, self.every = send, rate, every
        self.rng = random.Random(seed)
        self.prices = [100.0 + 5 * c for c in range(companies)]
        self.done = threading.Event()
        self.events = 0
        self.sent: list[dict[str, Any]] = []  # every event, for the check against `evaluate`
        self.latest: list[float] = []  # the latest event time of each file (send)
        self.sends = 0

    def run(self) -> None:
        last = time.time()
        n = max(1, round(self.rate * self.every))
        while not self.done.is_set():
            deadline = last + self.every
            pause = deadline - time.time()
            if pause > 0 and self.done.wait(pause):
                break
            now = time.time()
            batch = []
            for i in range(n):
                c = self.rng.randrange(len(self.prices))
                self.prices[c] = round(max(1.0, self.prices[c] * (1 + self.rng.gauss(0, 0.002))), 2)
                batch.append({"type": "Stock", "time": round(last + (now - last) * (i + 1) / n, 6),
                              "id": self.events + i, "company": c, "price": self.prices[c], "volume": 100})
            self.send(self.sends, batch)
            self.sent += batch
            self.latest.append(batch[-1]["time"])
            self.events += n
            self.sends += 1
            last = now


def file_sender(folder: Path) -> Any:
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / "staging"
    staging.mkdir(exist_ok=True)

    def send(i: int, batch: list[dict[str, Any]]) -> None:
        temp = staging / f"e-{i:06d}.jsonl"
        temp.write_text("".join(json.dumps(e) + "\n" for e in batch))
        os.replace(temp, folder / temp.name)

    return send


def kafka_sender(bootstrap: str, topic: str) -> Any:
    from confluent_kafka import Producer

    from greta_stream.demo.broker import client_config

    producer = Producer(client_config(bootstrap, **{"linger.ms": 0}))

    def send(_i: int, batch: list[dict[str, Any]]) -> None:
        for e in batch:
            producer.produce(topic, json.dumps(e).encode())
        producer.flush(10)

    return send


# --------------------------------------------------------------------------------------- the children


def child_main(args: argparse.Namespace, rest: list[str]) -> None:
    """Inside the child: record every progress report (and, for greta, time the driver and
    workers' pieces), then run the stream until killed."""
    import greta_stream.spark.session as session
    from greta_stream.spark.progress import on_progress

    conf = dict(c.split("=", 1) for c in args.conf)
    progress = open(args.progress, "a", encoding="utf-8")  # noqa: SIM115 - open for the child's life
    made = session.get_session

    def get_session(master: str | None = None, **kw: Any) -> Any:
        kw["conf"] = {**(kw.get("conf") or {}), **conf}
        spark = made(master, **kw)
        on_progress(spark, lambda p: (progress.write(json.dumps(p) + "\n"), progress.flush()))
        return spark

    session.get_session = get_session
    if args.child == "spark":
        native_stream(get_session, args)
        return
    timed_pieces(args.progress + ".driver")
    sys.argv = ["greta-stream", "run", *rest]
    from greta_stream.cli import main

    main()


def timed_pieces(driver_log: str) -> None:
    """Wrap the driver's job and sink, and the operator's functions the Python workers run, to log their time."""
    import greta_stream.spark.operator as operator
    import greta_stream.spark.writers as writers

    out = open(driver_log, "a", encoding="utf-8")  # noqa: SIM115 - open for the child's life

    def driver(name: str, fn: Any) -> Any:
        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                out.write(json.dumps({"what": name, "ms": (time.perf_counter() - t0) * 1000, "t": time.time()}) + "\n")
                out.flush()
        return timed

    writers.collected = driver("collect", writers.collected)
    writers.BatchWriter.deliver = driver("sink", writers.BatchWriter.deliver)
    for name in ("joined_frames", "shard_records", "step_incremental"):
        setattr(operator, name, worker_timed(name, getattr(operator, name)))
    made = operator.incremental_processor

    def processor(*a: Any, **kw: Any) -> Any:
        from pyspark import cloudpickle

        proc = made(*a, **kw)
        steps = cloudpickle.loads(proc.steps)  # the operator's steps travel pickled inside the processor
        cls = type(steps)
        cls.step = worker_timed("call", cls.step)
        proc.steps = cloudpickle.dumps(steps)
        return proc

    operator.incremental_processor = processor


def worker_timed(name: str, fn: Any) -> Any:
    """`fn`, appending its ms to $GRETA_BENCH_WORKER_LOG in whatever process runs it (a Python worker)."""
    def timed(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            path = os.environ.get(WORKER_LOG)
            if path:
                with open(path, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"what": name, "ms": (time.perf_counter() - t0) * 1000,
                                        "t": time.time(), "pid": os.getpid()}) + "\n")
    return timed


def native_stream(get_session: Any, args: argparse.Namespace) -> None:
    from pyspark.sql import functions as F

    # the file sink's log of every batch is kept (Spark deletes those a compaction took in): `batch_lags` reads it
    from greta_stream.choices import packages_of

    spark = get_session(None, app_name="bench-latency-native", packages=packages_of(["kafka"] if args.source == "kafka" else []),
                        conf={"spark.sql.streaming.fileSink.log.deletion": "false"})
    if args.source == "kafka":
        raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.bootstrap)
               .option("subscribe", args.topic).option("startingOffsets", "earliest").load()
               .select(F.col("value").cast("string").alias("value")))
    else:
        raw = spark.readStream.format("text").load(args.input)
    ts = F.timestamp_seconds(F.get_json_object("value", "$.time").cast("double")).alias("ts")
    events = raw.select(ts, F.get_json_object("value", "$.company").alias("company")).withWatermark("ts", "0 seconds")
    counts = events.groupBy(F.window("ts", f"{args.within} seconds", f"{args.slide} seconds"), "company").count()
    ws = (counts.writeStream.format("json").outputMode("append").option("path", args.output)
          .option("checkpointLocation", args.checkpoint))
    if args.trigger_interval:
        ws = ws.trigger(processingTime=f"{args.trigger_interval} seconds")
    ws.start().awaitTermination()


# ------------------------------------------------------------------------------------------- measuring


def window_end(row: dict[str, Any]) -> float | None:
    if "window" in row:  # Spark's own: {"start": ISO, "end": ISO}
        return datetime.fromisoformat(row["window"]["end"].replace("Z", "+00:00")).timestamp()
    end = row.get("window_end")
    return float(end) if end is not None else None


def poll(folder: Path, seen: dict[float, float], sizes: dict[Path, int], where: dict[float, str]) -> None:
    """Record the wall time each window end first shows a row in `folder` (JSON-lines or JSON files),
    and the file it shows in (`where`)."""
    now = time.time()
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith((".", "_")) or not name.endswith((".json", ".jsonl")):
            continue
        path = folder / name
        try:
            size = path.stat().st_size
            if sizes.get(path) == size:
                continue
            sizes[path] = size
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        for line in text.splitlines():
            try:
                end = window_end(json.loads(line))
            except (ValueError, KeyError, TypeError):
                continue  # a line still being written
            if end is not None and end not in seen:
                seen[end] = now
                where[end] = name


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def one_run(kind: str, args: argparse.Namespace, tmp: Path, broker: Any) -> dict[str, Any]:
    """Start the writer and the child, watch the output for `--seconds`, stop both; the run's figures."""
    base = tmp / kind
    base.mkdir()
    out, chk, progress = base / "out", base / "chk", base / "progress.jsonl"
    text = QUERY.format(within=args.within, slide=args.slide)
    topic = None
    if broker is not None:
        topic = f"stock-{kind}-{os.getpid()}-{tmp.name}"  # a topic per run and round: each reads its own events
        broker.create_topics([topic], partitions=1)
        send = kafka_sender(broker.bootstrap, topic)
    else:
        send = file_sender(base / "in")
    child = [sys.executable, __file__, "--child", kind, "--progress", str(progress), "--source", args.source,
             *[a for c in args.conf for a in ("--conf", c)]]
    if kind == "spark":
        child += ["--input", str(base / "in"), "--output", str(out), "--checkpoint", str(chk),
                  "--within", str(args.within), "--slide", str(args.slide)]
        if broker is not None:
            child += ["--bootstrap", broker.bootstrap, "--topic", topic]
        if args.trigger_interval:
            child += ["--trigger-interval", str(args.trigger_interval)]
        child += ["--"]
    else:
        child += ["--"]
        if broker is not None:
            config = base / "pipeline.json"
            config.write_text(json.dumps({
                "source": {"format": "kafka", "topic": topic, "bootstrap_servers": broker.bootstrap,
                           "starting_offsets": "earliest"},
                "queries": [{"name": "q", "text": text, "sinks": [{"format": "jsonl", "path": str(out)}]}],
                "checkpoint": str(chk), "lateness_s": 0}))
            child += ["--config", str(config)]
        else:
            child += ["--query", text, "--input", str(base / "in"), "--output", str(out), "--checkpoint", str(chk),
                      "--lateness", "0"]
        if args.trigger_interval:
            child += ["--trigger-interval", str(args.trigger_interval)]
        if args.shards:
            child += ["--shards", str(args.shards)]
    env = {**os.environ, WORKER_LOG: str(base / "workers.jsonl")}
    log = open(base / "child.log", "wb")  # noqa: SIM115 - closed below
    writer = Writer(send, args.rate, args.every, args.companies)
    load_before = os.getloadavg()
    start = time.time()
    writer.start()
    proc = subprocess.Popen(child, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    seen: dict[float, float] = {}
    sizes: dict[Path, int] = {}
    where: dict[float, str] = {}
    loads = []
    try:
        while time.time() < start + args.seconds and proc.poll() is None:
            poll(out, seen, sizes, where)
            loads.append(os.getloadavg()[0])
            time.sleep(0.05)
    finally:
        stop_time = time.time()
        writer.done.set()
        writer.join()
        stop_child(proc)
        log.close()
    if proc.returncode not in (0, -signal.SIGINT, -signal.SIGKILL, 130):
        tail = (base / "child.log").read_text(errors="replace")[-3000:]
        raise SystemExit(f"the {kind} run failed (exit {proc.returncode}), its log ends:\n{tail}")
    first = min(seen.values()) if seen else stop_time
    reports = read_jsonl(progress)
    data = [p for p in reports if (p.get("numInputRows") or 0) > 0]
    begin = max(first, caught_up(reports, 2 * args.rate))
    after_first = [e for e in seen if e > first and e <= stop_time - MARGIN_S]
    steady = [e for e in after_first if e > begin]
    expected = [e for e in range(int(begin) + 1, int(stop_time - MARGIN_S) + 1) if e % args.slide == 0]
    latencies = [seen[e] - e for e in steady] or [float("nan")]
    check = rows_check(text, writer.sent, out) if kind == "greta" and seen else "-"
    lags = batch_lags(steady, where, writer.latest, chk, out) if broker is None else []
    return {
        "run": kind, "first_row_s": first - start if seen else None, "windows": len(steady),
        "missing": len(set(expected) - set(seen)),
        "p50": percentile(latencies, 0.5), "p95": percentile(latencies, 0.95), "p99": percentile(latencies, 0.99),
        "p99_all": percentile([seen[e] - e for e in after_first] or [float("nan")], 0.99),
        "caught_up_s": begin - start,
        "max": max(latencies), "batches": len(reports),
        "batch_ms": statistics.median(p["durationMs"]["triggerExecution"] for p in data) if data else None,
        "lag": statistics.median(lags) if lags else None,
        "lag_shares": {n: sum(1 for g in lags if min(g, 2) == n) / len(lags) for n in (0, 1, 2)} if lags else {},
        "events": writer.events, "check": check, "load": (load_before[0], max(loads) if loads else 0.0, os.getloadavg()[0]),
        "phases": phases(data, base, start),
        # each window after the first row: (its end, s after the run's start; its latency), to see when
        # the slow ones come (`caught_up_s`: where the steady ones begin)
        "window_latencies": [(round(e - start, 3), round(seen[e] - e, 3)) for e in sorted(after_first)],
    }


def caught_up(reports: list[dict[str, Any]], most: float) -> float:
    """Wall time (s since the epoch) the first micro-batch after the first that read events, at most
    `most` of them, ended: where the run has worked off what was written while Spark started."""
    for p in reports:
        if p.get("batchId", 0) >= 1 and 0 < (p.get("numInputRows") or 0) <= most:
            began = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
            return began + p["durationMs"]["triggerExecution"] / 1000
    return float("inf")


def batch_lags(ends: list[float], where: dict[float, str], latest: list[float], chk: Path, out: Path) -> list[int]:
    """File source: per window, the micro-batches from the one that read the first event at or past its
    end (which closes it: lateness 0) to the one that wrote its row (0: the same batch). Which batch
    read which file is in the source's log (`<checkpoint>/sources/0/<batch>`), which batch wrote which
    file in the output's name (greta: `part-<batch>.jsonl`) or in the file sink's log (`_spark_metadata`)."""
    read: dict[int, int] = {}  # input file number -> batch
    for log in chk.glob("**/sources/0/[0-9]*"):
        for line in log.read_text(encoding="utf-8").splitlines()[1:]:
            entry = json.loads(line)
            read[int(Path(entry["path"]).stem.split("-")[1])] = int(entry["batchId"])
    wrote: dict[str, int] = {}  # output file -> batch
    for log in (out / "_spark_metadata").glob("[0-9]*"):
        for line in log.read_text(encoding="utf-8").splitlines()[1:]:
            name, batch = Path(json.loads(line)["path"]).name, int(log.name.split(".")[0])
            wrote[name] = min(wrote.get(name, batch), batch)  # a compacted log lists earlier batches' files too
    lags = []
    for end in ends:
        name = where[end]
        batch = wrote.get(name, int(name.split("-")[1].split(".")[0]) if name.startswith("part-") else -1)
        closer = next((read[i] for i, t in enumerate(latest) if t >= end and i in read), None)
        if batch >= 0 and closer is not None:
            lags.append(batch - closer)
    return lags


def rows_check(text: str, events: list[dict[str, Any]], out: Path) -> str:
    """Whether the run's rows are `evaluate`'s on every event written, for the windows up to the
    last one it emitted ("equal", or "DIFFER" with how many rows differ)."""
    from greta_stream import evaluate

    got = {json.dumps(json.loads(line), sort_keys=True) for f in sorted(out.glob("part-*.jsonl"))
           for line in f.read_text(encoding="utf-8").splitlines() if line.strip()}
    last = max(json.loads(r)["window_end"] for r in got)
    want = {json.dumps(r, sort_keys=True) for r in evaluate(text, events) if r["window_end"] <= last}
    return "equal" if got == want else f"DIFFER ({len(got ^ want)} rows)"


def stop_child(proc: subprocess.Popen) -> None:
    """Ctrl-C to the child's process group (the CLI stops its stream), then kill what is left."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the JVM and Python workers, if still there
    proc.wait()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def phases(data: list[dict[str, Any]], base: Path, start: float) -> dict[str, float]:
    """Median ms per micro-batch with events: Spark's phases, the state store's commit and, for greta,
    the driver's and workers' pieces (summed per batch, over the batches after the first)."""
    out: dict[str, float] = {}
    if not data:
        return out
    rest = data[1:] or data
    for key in ("triggerExecution", "latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets"):
        out[key] = statistics.median(p["durationMs"].get(key, 0) for p in rest)
    ops = [(p.get("stateOperators") or [{}])[0] for p in rest]
    out["state commit"] = statistics.median(o.get("commitTimeMs", 0) for o in ops)
    # the batches' wall intervals, from their reports: a piece timed in that interval belongs to it
    spans = [(datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp(),
              p["durationMs"]["triggerExecution"] / 1000) for p in rest]
    timed = read_jsonl(base / "progress.jsonl.driver") + read_jsonl(base / "workers.jsonl")
    names = {"collect": "collect", "sink": "sink", "joined_frames": "arrow in", "shard_records": "records",
             "step_incremental": "engine", "call": "call"}
    per_batch: dict[str, list[float]] = {v: [] for v in names.values()}
    for t0, length in spans:
        sums = dict.fromkeys(names.values(), 0.0)
        for e in timed:
            if t0 <= e["t"] <= t0 + length + 0.01:
                sums[names[e["what"]]] += e["ms"]
        for k, v in sums.items():
            per_batch[k].append(v)
    if timed:
        for k, v in per_batch.items():
            out[k] = statistics.median(v)
        out["state API"] = statistics.median(c - a - r - g for c, a, r, g in zip(
            per_batch["call"], per_batch["arrow in"], per_batch["records"], per_batch["engine"], strict=True))
    return out


# ------------------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rest: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, rest = argv[:at], argv[at + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="length of each run, Spark's start included")
    ap.add_argument("--rate", type=float, default=1000.0, help="events per second")
    ap.add_argument("--every", type=float, default=0.2, help="seconds between files (or Kafka batches)")
    ap.add_argument("--companies", type=int, default=20)
    ap.add_argument("--within", type=int, default=10, help="window length, seconds")
    ap.add_argument("--slide", type=int, default=1, help="window slide, seconds")
    ap.add_argument("--source", choices=["file", "kafka"], default="file")
    ap.add_argument("--runs", default="greta,spark", help="which runs, in order (comma list of greta, spark)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the runs (a row per run and round)")
    ap.add_argument("--trigger-interval", type=float, help="seconds between micro-batches (default: at once)")
    ap.add_argument("--shards", type=int, help="greta's state shards (default 2 x cores)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting for both runs")
    ap.add_argument("--phases", action="store_true", help="where a micro-batch's time goes (module docstring)")
    ap.add_argument("--quick", action="store_true", help="30 s per run")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (input, output, logs, progress reports)")
    # the children's own arguments
    ap.add_argument("--child", choices=["greta", "spark"], help=argparse.SUPPRESS)
    for hidden in ("--progress", "--input", "--output", "--checkpoint", "--bootstrap", "--topic"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child_main(args, rest)
        return 0
    if args.quick:
        args.seconds = min(args.seconds, 30.0)
    kinds = args.runs.split(",")
    print(f"code {git_state()}; cores {os.cpu_count()}; {args.source} source, {args.rate:,.0f} events/s in "
          f"{1 / args.every:g} {'files' if args.source == 'file' else 'sends'}/s, {args.companies} companies, "
          f"WITHIN {args.within} s SLIDE {args.slide} s, {args.seconds:g} s per run"
          + (f", trigger {args.trigger_interval} s" if args.trigger_interval else ", default trigger")
          + "".join(f", {c}" for c in args.conf))
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]), flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="greta-bench-latency-") as made:
        tmp = args.keep or made
        Path(tmp).mkdir(parents=True, exist_ok=True)
        broker = start_broker(Path(tmp)) if args.source == "kafka" else None
        try:
            table = Table([("run", 6), ("first row s", 11), ("p50 s", 6), ("p95 s", 6), ("p99 s", 6), ("max s", 6),
                           ("p99 all", 7), ("windows", 7), ("missing", 7), ("batches", 7), ("batch ms", 8), ("lag", 3),
                           ("0/1/2+", 14), ("rows", 5), ("load avg", 16)])
            table.header()
            for r in range(args.repeat):
                for kind in kinds:
                    (Path(tmp) / f"r{r}").mkdir(exist_ok=True)
                    got = one_run(kind, args, Path(tmp) / f"r{r}", broker)
                    results.append(got)
                    load = "/".join(f"{v:.1f}" for v in got["load"])
                    first = f"{got['first_row_s']:.1f}" if got["first_row_s"] is not None else "no row"
                    table.row([kind, first, f"{got['p50']:.2f}", f"{got['p95']:.2f}",
                               f"{got['p99']:.2f}", f"{got['max']:.2f}", f"{got['p99_all']:.2f}",
                               str(got["windows"]), str(got["missing"]),
                               str(got["batches"]), f"{got['batch_ms'] or 0:,.0f}",
                               "-" if got["lag"] is None else f"{got['lag']:g}",
                               "/".join(f"{v:.0%}" for v in got["lag_shares"].values()) or "-", got["check"], load])
        finally:
            if broker is not None:
                broker.stop()
    print("load avg: 1-minute load average before / highest during / after the run, on "
          f"{os.cpu_count()} cores")
    if args.phases:
        print_phases(results)
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "results": results}, indent=1))
    return 0


def start_broker(tmp: Path) -> Any:
    from greta_stream.demo.broker import KafkaBroker
    from greta_stream.jvm import SETUP_HINT, jars

    if not jars("kafka"):
        raise SystemExit(f"Apache Kafka's jars are missing: {SETUP_HINT}")
    broker = KafkaBroker(tmp / "kafka")
    broker.start()
    return broker


def print_phases(results: list[dict[str, Any]]) -> None:
    keys: list[str] = []
    for r in results:
        keys += [k for k in r["phases"] if k not in keys]
    print("\nmedian ms per micro-batch with events (after the first):")
    table = Table([("phase", 18)] + [(r["run"], 8) for r in results])
    table.header()
    for k in keys:
        table.row([k] + [f"{r['phases'][k]:,.0f}" if k in r["phases"] else "-" for r in results])


if __name__ == "__main__":
    raise SystemExit(main())
