"""Long windows on a stream: batch time, state bytes per batch and memory as the window and the rate grow.

The goal: windows of hours at thousands of events per second, with state
and memory that follow the micro-batch, not the window. This measures where
the stream stands with a query whose windows per event (W / slide,
``--windows-per-event``, default 60) stay fixed while W varies. The query
(``--query``):

- ``q1`` (default): Q1-like, run by the columnar engine::

    RETURN sector, COUNT(*), AVG(S.price) PATTERN Stock S+
    WHERE [company, sector] AND S.price > NEXT(S).price
    GROUP-BY sector WITHIN <W> SLIDE <W / windows per event>

- ``general``: a nested Kleene run by the general engine, and
  pinned to it (``engine: general``) so that it stays there whatever the
  columnar engine comes to cover. The script prints what runs it and, under ``engine: auto``, the columnar
  engine's refusal (``RunSpec.runner_kind``, ``RunSpec.columnar_refusal``)::

    RETURN sector, COUNT(*), AVG(S.price) PATTERN (SEQ(Stock A, Stock S+))+
    WHERE [company, sector] AND S.price > NEXT(S).price
    GROUP-BY sector WITHIN <W> SLIDE <W / windows per event>

  The general engine is far slower than the columnar one, and its time per
  event grows with the events of a partition's window (each new event is
  propagated from its predecessors there), so the issue's case runs it at
  50 ev/s and 10 windows per event (below).
- ``nested``: the same nested Kleene under ``engine: auto``, which the
  columnar engine runs (its first state reads the last one's vertices: the
  SEQ's end loops back to its start, as GRETA's template does).
- ``cet``: q1's text in CET mode (``mode: cet``, complete trends,
  ``max_trends: 10`` per window and group, so that the output stays small;
  each record keeps the exact total). Q1's pattern does not explode here:
  the graph is kept, trends are only extracted up to the cap when a window
  closes (at 200 ev/s and 1 hour, 10 windows per event, one batch in 36
  closes a window, in 2-8 s in engine mode), so no more selective pattern
  was needed. Through the CLI the 1-hour case takes about an hour on 2
  cores: a shard's batch that Spark hands to the other Python worker
  rebuilds the extractor from its log (the window's events), and that
  grows with the window.

Input: a seeded stock stream (100 companies in 10 sectors, prices a
geometric random walk per company as in ``generators.stock``, Poisson
times at the rate), made one micro-batch at a time so that no run holds
its whole stream (27M events at 5,000 ev/s for 1.5 h). Each configuration
streams ``--duration`` windows of event time (default 1.5: the window
fills, then a steady state); ``--same-length``: in the window sweep, the
longest window's, for every window.

Sweeps (``--sweeps``): ``window``: each of ``--windows-min`` at each of
``--rate``, micro-batches of ``--batch-s`` event seconds (default 10);
``rate``: each of ``--rates`` at one window of ``--window-min`` (default 1
hour, so sliding 1 minute), micro-batches of ``--batch-events`` events
(default 120,000; 0: ``--batch-s`` seconds).

Modes (``--modes``), each configuration in a fresh process, one at a time:

- ``engine``: no Spark. A forked child drives ``greta_stream.spark.shard.step_incremental``
  (``--operator incremental``, the default operator's state) or ``shard.step``
  (``--operator whole``) as the operator does: ``--shards`` shards (default Spark's, 2 x cores; an
  event goes to shard ``sector % shards``), a shard called when it has
  events or its timeout passed, Spark's watermark for a batch = the latest
  event time of the batches before it (ms). Per batch: the ms of all the
  shards' steps (one after another, on one core) and the size of the state
  bytes they return (what Spark's state store writes per batch with the
  current operator). Memory: the child's VmRSS at the end.
- ``run``: the real CLI, ``greta-stream run --config <pipeline.yaml>`` in a
  subprocess: a folder of JSON-lines files, one per micro-batch,
  ``max_files_per_trigger: 1``, ``once: true``, a jsonl sink, a checkpoint
  in a temp folder, ``operator: transformWithStateInPandas`` (the default
  operator, said explicitly: state written as it changes), the query's
  options (``engine`` for ``general``, ``mode`` and ``max_trends`` for
  ``cet``); ``--set KEY=VALUE`` (repeatable;
  dotted keys, YAML values) is merged into that config first, e.g. ``--set
  operator=applyInPandasWithState`` for the operator that rewrites the state whole. Per
  batch: the ms of its progress line on stderr, and the bytes the state
  store wrote (``state_bytes_by_version``: the checkpoint's state files of
  that batch's version). Memory: the peak of the summed RSS of the run's
  ``pyspark.daemon`` and ``pyspark.worker`` processes, polled every 0.5 s.
  The state files are scanned every 5 s while the run goes on, as Spark's
  maintenance deletes those of all but the last 100 or so versions.

Columns: ``window``, ``slide``, ``rate ev/s``, ``ev/batch``, ``batches``
(done, with events), ``kept ev`` (window x rate); ``med ms``, ``max ms``:
batch time in steady state (batches that start at or after W; the last
half if none do); ``state B``: median state bytes per steady batch;
``fill B/b``: their growth per batch while the window fills (least-squares
slope); ``RSS MB``; ``B/kept`` = RSS / kept events (a fixed 150-800 MB of
interpreters and libraries is in it); ``Δ B/kept`` (engine): (RSS at the
end - RSS before the first batch - the bytes of the map state's values,
which stand in for Spark's state store and live in its JVM) / kept, the
worker's memory per kept event, and beside it (``store B/kept``) the state
store's bytes per kept event; ``headroom x``: steady event
seconds / their summed batch seconds; ``wall x`` (run): all event seconds /
wall seconds from the first batch's start to the last batch's end (from
when the progress lines arrived: startup left out, time between batches
in).

A run past ``--budget-s`` is killed and marked ``over budget``; its batches
so far are shown. ``--per-batch`` prints each run's batches (events, ms,
state bytes) under its row, to see which batches write more. The default
invocation (q1; windows of 5 and 10 minutes at 200 ev/s; 200 and 500 ev/s
at 1 hour) takes about 15 minutes on 2 idle cores. The lines under the
tables give the issue's targets where this invocation ran them: each longer
window of the window sweep against the shortest at the same rate (state
bytes per batch, batch ms; the issue's 40 vs 5 and 60 vs 5 minutes, target
within 1.5x), bytes per kept event, and (q1) the headroom of 1 h / 1 min at
2,000 ev/s. The issue's cases take longer (the query's are printed at the
start)::

    B=".venv/bin/python benchmarks/bench_long_window.py"
    $B --sweeps window --windows-min 5,40 --rate 200,2000 --budget-s 7200 --json out/lw-5v40.json
    $B --sweeps window --windows-min 10,40,60,240 --rate 200 --budget-s 14400 --json out/lw-windows.json
    $B --sweeps rate --rates 200,500,1000,2000,5000 --budget-s 7200 --json out/lw-rates.json
    $B --sweeps rate --rates 2000 --batch-events 20000 --budget-s 7200 --json out/lw-2000-20k.json
    $B --query general --sweeps window --windows-min 5,40 --rate 50 --windows-per-event 10 \\
        --budget-s 3600 --json out/lw-general-5v40.json
    $B --query cet --sweeps window --windows-min 5,60 --rate 200 --windows-per-event 10 \\
        --modes engine --json out/lw-cet-5v60.json
    $B --query cet --sweeps window --windows-min 5,60 --rate 200 --windows-per-event 10 \\
        --modes run --budget-s 7200 --json out/lw-cet-5v60-run.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import os
import platform
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import generators  # noqa: E402
from benchlib import Table, cpu_model, memory_gib  # noqa: E402

Q1_TEXT = ("RETURN sector, COUNT(*), AVG(S.price) PATTERN Stock S+ WHERE [company, sector] AND S.price > "
           "NEXT(S).price GROUP-BY sector WITHIN {window_s:g} seconds SLIDE {slide_s:g} seconds")
GENERAL_TEXT = ("RETURN sector, COUNT(*), AVG(S.price) PATTERN (SEQ(Stock A, Stock S+))+ WHERE [company, sector] AND "
                "S.price > NEXT(S).price GROUP-BY sector WITHIN {window_s:g} seconds SLIDE {slide_s:g} seconds")
CET_MAX_TRENDS = 10


@dataclass(frozen=True)
class Query:
    """A measured query (`--query`): its text with `{window_s}` and `{slide_s}` to fill, its mode,
    engine and CET's cap on trends per (window, group), what it measures (`label`) and the issue's
    commands for it."""

    name: str
    label: str
    template: str
    mode: str = "aggregate"
    engine: str = "auto"
    max_trends: int | None = None
    targets: tuple[str, ...] = ()

    def options(self) -> dict[str, Any]:
        """`RunSpec.create`'s keywords beyond the text (the pipeline config's query keys are the same)."""
        if self.mode == "cet":
            return {"mode": self.mode, "max_trends": self.max_trends}
        return {"engine": self.engine} if self.engine != "auto" else {}


QUERIES = {q.name: q for q in [
    Query("q1", "Q1 GROUP-BY sector (columnar engine)", Q1_TEXT, targets=(  # 40 vs 5 min at 200 and 2,000 ev/s;
        "--sweeps window --windows-min 5,40 --rate 200,2000 --budget-s 7200 --json out/lw-5v40.json",  # 10 min to 4 h;
        "--sweeps window --windows-min 10,40,60,240 --rate 200 --budget-s 14400 --json out/lw-windows.json",
        "--sweeps rate --rates 200,500,1000,2000,5000 --budget-s 7200 --json out/lw-rates.json",  # rates at 1 h
        "--sweeps rate --rates 2000 --batch-events 20000 --budget-s 7200 --json out/lw-2000-20k.json")),
    Query("general", "(SEQ(Stock A, Stock S+))+, a nested Kleene (general engine)", GENERAL_TEXT, engine="general",
          targets=("--query general --sweeps window --windows-min 5,40 --rate 50 --windows-per-event 10 "
                   "--budget-s 3600 --json out/lw-general-5v40.json",)),
    Query("nested", "(SEQ(Stock A, Stock S+))+, a nested Kleene (columnar engine: the SEQ's end loops to its start)",
          GENERAL_TEXT, targets=("--query nested --sweeps window --windows-min 5,40 --rate 200 "
                                 "--budget-s 7200 --json out/lw-nested-5v40.json",)),
    Query("cet", f"Q1's pattern in CET mode, complete trends, at most {CET_MAX_TRENDS} per window and group",
          Q1_TEXT, mode="cet", max_trends=CET_MAX_TRENDS, targets=(
              "--query cet --sweeps window --windows-min 5,60 --rate 200 --windows-per-event 10 --modes engine "
              "--json out/lw-cet-5v60.json",  # a few minutes; through the CLI about an hour:
              "--query cet --sweeps window --windows-min 5,60 --rate 200 --windows-per-event 10 --modes run "
              "--budget-s 7200 --json out/lw-cet-5v60-run.json")),
]}
COMPANIES, SECTORS = 100, 10
COLUMNS = [("mode", 6), ("window", 6), ("slide", 5), ("rate ev/s", 9), ("ev/batch", 8), ("batches", 7),
           ("kept ev", 10), ("med ms", 8), ("max ms", 8), ("state B", 11), ("fill B/b", 9), ("RSS MB", 7),
           ("B/kept", 7), ("Δ B/kept", 8), ("store B/kept", 12), ("headroom x", 10), ("wall x", 7), ("note", 4)]
TARGET_RATIO = 1.5  # the issue's bound on long / short window (state bytes per batch, batch ms)


@dataclass(frozen=True)
class Case:
    """One configuration: a window of `window_s` sliding every `slide_s`, `rate` events/s,
    micro-batches of `batch_s` event seconds, `duration_s` event seconds in all, of `QUERIES[query]`."""

    sweep: str
    window_s: float
    slide_s: float
    rate: float
    batch_s: float
    duration_s: float
    query: str = "q1"

    @property
    def text(self) -> str:
        return QUERIES[self.query].template.format(window_s=self.window_s, slide_s=self.slide_s)

    def spec(self) -> Any:
        """The query's `RunSpec` (its mode and CET options)."""
        from greta_stream.runtime import RunSpec

        return RunSpec.create(self.text, **QUERIES[self.query].options())

    @property
    def batches(self) -> int:
        return math.ceil(self.duration_s / self.batch_s - 1e-9)

    @property
    def kept(self) -> int:
        return round(self.window_s * self.rate)

    @property
    def fill_batches(self) -> int:
        """Batches before the first that starts at or after the window's length."""
        return math.ceil(self.window_s / self.batch_s - 1e-9)


# ------------------------------------------------------------------ input


def stock_batches(case: Case, seed: int) -> Iterator[dict[str, np.ndarray]]:
    """The stream, one micro-batch of columns at a time (type Stock, time, id, company, sector,
    price): Poisson times (whole microseconds apart) and per-company random-walk prices
    carried from batch to batch, so the stream is one whatever the batch size."""
    rng = np.random.default_rng(seed)
    start_price = rng.uniform(*generators.STOCK_START_PRICE, COMPANIES)
    log_price = np.zeros(COMPANIES)
    gap_us = generators.US_PER_S / case.rate
    last_us, next_id = 0, 0
    for b in range(case.batches):
        end_us = round(min((b + 1) * case.batch_s, case.duration_s) * generators.US_PER_S)
        times: list[np.ndarray] = []
        while last_us < end_us:  # gaps from the last event; past the batch's end, the next batch starts there
            draw = int((end_us - last_us) / gap_us + 6 * math.sqrt((end_us - last_us) / gap_us) + 16)
            t = last_us + np.cumsum(np.maximum(1, np.rint(rng.exponential(gap_us, draw))).astype(np.int64))
            times.append(t[t < end_us])
            last_us = int(t[-1]) if t[-1] < end_us else end_us
        time_us = np.concatenate(times) if times else np.zeros(0, np.int64)
        n = time_us.size
        company = rng.integers(0, COMPANIES, n)
        walk = log_price[company] + generators._group_cumsum(rng.normal(0.0, generators.STOCK_VOLATILITY, n),
                                                              company)
        last = np.full(COMPANIES, -1)
        np.maximum.at(last, company, np.arange(n))
        log_price[last >= 0] = walk[last[last >= 0]]
        price = np.maximum(np.round(start_price[company] * np.exp(walk), 2), 0.01)
        yield {"time": time_us / generators.US_PER_S, "id": np.arange(next_id, next_id + n), "company": company,
               "sector": company % SECTORS, "price": price}
        next_id += n


def records(cols: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """The batch as the dicts the operator parses from its JSON lines."""
    names = list(cols)
    return [{"type": "Stock", **dict(zip(names, row))} for row in zip(*(c.tolist() for c in cols.values()))]


# ------------------------------------------------------------------ engine mode


def vm_rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def engine_child(conn: Any, case: Case, seed: int, shards: int, operator: str = "incremental") -> None:
    """Drive the shards of `case` as Spark's operator would; send ("batch", {...}) per batch, then ("end", {...}).
    `operator`: "incremental" (`shard.step_incremental`: a small value and chunks, what changed written) or
    "whole" (`shard.step`: one value per shard, rewritten whole)."""
    from greta_stream.runtime.queryset import QuerySet
    from greta_stream.spark.shard import Shard, step, step_incremental

    spec = case.spec().for_streaming().with_options(kernel_threads=max(1, (os.cpu_count() or 1) // shards))
    queries = QuerySet.of({case.query: spec})
    layout = [Shard(i, shards, ("sector",)) for i in range(shards)]
    states: list[Any] = [None] * shards
    chunks: list[dict[str, bytes]] = [{} for _ in range(shards)]  # incremental: each shard's map state
    wakes: list[int | None] = [None] * shards
    watermark_ms, rss0 = 0, vm_rss()
    for cols in stock_batches(case, seed):
        parts: list[list[dict[str, Any]]] = [[] for _ in range(shards)]
        for r in records(cols):
            parts[r["sector"] % shards].append(r)
        rows, written, start = 0, 0, time.perf_counter()
        for i, shard in enumerate(layout):
            wake = wakes[i]
            if parts[i] or (wake is not None and wake < watermark_ms):  # Spark calls a shard with data or timed out
                if operator == "whole":
                    out, states[i], wakes[i] = step(queries, states[i], parts[i], watermark_ms, shard)
                    written += len(states[i] or b"")
                else:
                    out, states[i], new, removed, wakes[i] = step_incremental(queries, states[i], chunks[i], parts[i],
                                                                              watermark_ms, shard)
                    chunks[i].update(new)
                    for k in removed:
                        del chunks[i][k]
                    written += (len(states[i].blob) if states[i] else 0) + sum(map(len, new.values()))
                rows += sum(o["kind"] == "row" for o in out)
        ms = 1000 * (time.perf_counter() - start)
        conn.send(("batch", {"events": int(cols["time"].size), "ms": ms, "rows": rows, "state": written}))
        if cols["time"].size:
            watermark_ms = max(watermark_ms, math.floor(float(cols["time"][-1]) * 1000))
    conn.send(("end", {"rss": vm_rss(), "rss0": rss0, "store": sum(len(v) for c in chunks for v in c.values()),
                       "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


def run_engine(case: Case, args: argparse.Namespace) -> dict[str, Any]:
    """`engine_child` in a forked process, killed past the budget; its batches so far."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=engine_child, args=(child, case, args.seed, args.shards, args.operator))
    proc.start()
    child.close()
    result: dict[str, Any] = {"batches": [], "status": "ok"}
    deadline = time.monotonic() + args.budget_s
    try:
        while True:
            if not parent.poll(max(0.0, deadline - time.monotonic())):
                result["status"] = "over budget"
                break
            kind, data = parent.recv()
            if kind == "end":
                result.update(data)
                break
            result["batches"].append(data)
    except EOFError:
        result["status"] = f"error: exit code {proc.exitcode}"
    if proc.is_alive():
        proc.kill()
    proc.join()
    return result


def warm_up(query: str) -> None:
    """Load the query's modules (for the columnar engine numba's kernels, from its cache) in the parent once,
    so no forked child pays for it."""
    from greta_stream.spark import shard

    case = Case("warm-up", 60.0, 1.0, 50.0, 10.0, 90.0, query)
    state, watermark_ms = None, 0
    for cols in stock_batches(case, 1):
        _, state, _ = shard.step(case.spec(), state, records(cols), watermark_ms)
        watermark_ms = math.floor(float(cols["time"][-1]) * 1000)
    shard._RUNNERS.clear()


# ------------------------------------------------------------------ run mode

PROGRESS = re.compile(r"^\[[^\]]+\] batch (\d+): ([\d,]+) events \([\d,]+/s\) in ([\d,]+) ms;")
STATE_SCAN_S = 5.0  # seconds between two scans of a run's state files
STATE_FILE = re.compile(r"^(\d+)(?:_[^.]+)?\.(delta|snapshot|changelog|zip)$")


def write_input(folder: Path, case: Case, seed: int) -> None:
    """One JSON-lines file per micro-batch, modification times in batch order (Spark reads them in that order)."""
    folder.mkdir(parents=True)
    base = time.time() - 86_400
    for b, cols in enumerate(stock_batches(case, seed)):
        path = folder / f"part-{b:06d}.jsonl"
        with open(path, "w") as f:
            f.writelines(f'{{"type":"Stock","time":{t!r},"id":{i},"company":{c},"sector":{s},"price":{p!r}}}\n'
                         for t, i, c, s, p in zip(*(cols[k].tolist() for k in ("time", "id", "company", "sector",
                                                                                  "price"))))
        os.utime(path, (base + b, base + b))


def pipeline_config(case: Case, work: Path, shards: int, sets: list[str]) -> dict[str, Any]:
    """The pipeline of a run, with each `--set KEY=VALUE` merged in (dotted keys, list indices as numbers).
    The operator is the incremental one (`transformWithStateInPandas`, also the default) unless a `--set`
    says otherwise."""
    config: dict[str, Any] = {
        "source": {"format": "jsonl", "path": str(work / "input"), "max_files_per_trigger": 1},
        "checkpoint": str(work / "checkpoint"), "once": True, "shards": shards,
        "operator": "transformWithStateInPandas",
        "queries": [{"name": case.query, "text": case.text, **QUERIES[case.query].options(),
                     "sinks": [{"format": "jsonl", "path": str(work / "out")}]}],
    }
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set needs KEY=VALUE, got {item!r}")
        *path, last = key.split(".")
        node: Any = config
        for part in path:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        node[int(last) if isinstance(node, list) else last] = yaml.safe_load(value)
    return config


def state_bytes_by_version(state_dir: Path, seen: dict[str, tuple[int, int]] | None = None) -> dict[int, int]:
    """Bytes Spark's state store wrote per state version under `<checkpoint>/<stream>/state/`
    (every operator and partition); version v is written by batch v - 1. `seen`: the files of
    earlier scans (`state_files`, taken while the run went on), since Spark's maintenance deletes
    the files of all but the last 100 or so versions (`spark.sql.streaming.minBatchesToRetain`).

    Reads both providers' names. HDFS-backed (Spark's default, what greta runs on):
    `<v>.delta` per partition and version, and the `<v>.snapshot` that maintenance
    writes now and then, counted in v. RocksDB: `<v>.changelog` (changelog
    checkpointing) and `<v>.zip`, or `<v>_<id>.changelog` and `<v>_<id>.zip` (Spark 4's
    checkpoint format 2); its SST files (`SSTs/*.sst`, no version in the name) count in
    the first zip of their partition written at or after them. `.crc` files and
    `_metadata` are left out."""
    out: dict[int, int] = {}
    for version, size in {**(seen or {}), **state_files(state_dir)}.values():
        out[version] = out.get(version, 0) + size
    return out


def state_files(state_dir: Path) -> dict[str, tuple[int, int]]:
    """The state files under `state_dir` now (see `state_bytes_by_version`): path -> (the version
    it counts in, bytes). A file deleted while it is read is left out."""
    out: dict[str, tuple[int, int]] = {}
    for part in [p for p in state_dir.glob("*/*") if p.is_dir() and not p.name.startswith("_")]:
        zips = []
        with contextlib.suppress(FileNotFoundError):
            for f in part.iterdir():
                m = STATE_FILE.match(f.name)
                with contextlib.suppress(FileNotFoundError):
                    if m and f.is_file():
                        st = f.stat()
                        out[str(f)] = (int(m.group(1)), st.st_size)
                        if m.group(2) == "zip":
                            zips.append((st.st_mtime, int(m.group(1))))
            for sst in part.glob("SSTs/*.sst"):
                with contextlib.suppress(FileNotFoundError):
                    st = sst.stat()
                    later = [v for t, v in sorted(zips) if t >= st.st_mtime]
                    if later:
                        out[str(sst)] = (later[0], st.st_size)
    return out


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        try:
            ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1]) if d.isdigit() else None
        except (OSError, IndexError, ValueError):
            continue
        if ppid is not None:
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _worker_memory(root: int) -> tuple[int, int]:
    """Summed RSS and proportional set size of the Python workers under `root` (Spark's `pyspark.daemon` and
    the workers it forks). RSS counts the pages the daemon shares with its workers once in each; PSS splits
    them, so their sum is the memory the workers take together."""
    rss = pss = 0
    for pid in _descendants(root):
        try:
            if re.search(rb"pyspark\.(daemon|worker)", Path(f"/proc/{pid}/cmdline").read_bytes()):
                status = Path(f"/proc/{pid}/status").read_text()
                rss += int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) * 1024  # type: ignore[union-attr]
                rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
                pss += int(re.search(r"^Pss:\s+(\d+)", rollup, re.M).group(1)) * 1024  # type: ignore[union-attr]
        except (OSError, AttributeError):
            continue
    return rss, pss


def run_cli(case: Case, args: argparse.Namespace) -> dict[str, Any]:
    """`greta-stream run --config` over the case's files; per-batch ms, state bytes, worker RSS, wall time."""
    with tempfile.TemporaryDirectory(prefix="greta-long-window-") as tmp:
        work = Path(tmp)
        write_input(work / "input", case, args.seed)
        (work / "pipeline.yaml").write_text(yaml.safe_dump(pipeline_config(case, work, args.shards, args.set)))
        cli = Path(sys.executable).with_name("greta-stream")
        cmd = [str(cli)] if cli.exists() else [sys.executable, "-m", "greta_stream"]
        proc = subprocess.Popen([*cmd, "run", "--config", str(work / "pipeline.yaml")], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        lines: list[tuple[float, str]] = []
        reader = threading.Thread(target=lambda: lines.extend((time.monotonic(), ln) for ln in proc.stderr),
                                  daemon=True)
        reader.start()
        status, peak, deadline, samples, pss = "ok", 0, time.monotonic() + args.budget_s, [], []
        state_dir, scanned = work / "checkpoint" / "source" / "state", time.monotonic()
        seen: dict[str, tuple[int, int]] = {}
        while proc.poll() is None:
            if time.monotonic() > deadline:
                status = "over budget"
                _kill(proc)
                break
            rss, shared = _worker_memory(proc.pid)
            samples.append(rss)
            pss.append(shared)
            peak = max(peak, samples[-1])
            if time.monotonic() - scanned > STATE_SCAN_S:  # before maintenance deletes old versions' files
                seen.update(state_files(state_dir))
                scanned = time.monotonic()
            time.sleep(0.5)
        proc.wait()
        reader.join(10)
        if status == "ok" and proc.returncode:
            status = f"error: exit {proc.returncode}: " + (lines[-1][1].strip()[:100] if lines else "")
        versions = state_bytes_by_version(state_dir, seen)
    batches, wall = _batches(lines, versions)
    # the workers' memory between window computations: the median over the run's last third (filled)
    steady = float(np.median(samples[-max(1, len(samples) // 3):])) if any(samples) else None
    pss_steady = float(np.median(pss[-max(1, len(pss) // 3):])) if any(pss) else None
    return {"batches": batches, "status": status, "rss": peak or None, "rss_steady": steady,
            "pss_steady": pss_steady, "wall_s": wall}


def _batches(lines: list[tuple[float, str]], versions: dict[int, int]) -> tuple[list[dict[str, Any]], float | None]:
    """Batches with events from the progress lines, their state bytes, and the wall seconds from the first's
    start (its line's arrival less its duration) to the last's line."""
    out, first, last = [], None, None
    for arrived, line in lines:
        m = PROGRESS.match(line)
        if m and int(m.group(2).replace(",", "")):
            batch_id, events, ms = (int(g.replace(",", "")) for g in m.groups())
            out.append({"batch": batch_id, "events": events, "ms": float(ms), "state": versions.get(batch_id + 1)})
            first = arrived - ms / 1000 if first is None else first
            last = arrived
    return out, (last - first if first is not None and last is not None else None)


def _kill(proc: subprocess.Popen) -> None:
    """The run's process group (its JVM and Python workers), and any of its processes that left it."""
    pids = _descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------------ figures


def summarize(case: Case, result: dict[str, Any], mode: str) -> dict[str, Any]:
    """Steady-state and filling figures of one run (see the module docstring)."""
    batches = [b for b in result["batches"] if b["events"]]
    steady = batches[case.fill_batches:] or batches[len(batches) // 2:]
    filling = batches[1:case.fill_batches]
    ms = [b["ms"] for b in steady]
    fig: dict[str, Any] = {"mode": mode, **asdict(case), "events_per_batch": round(case.rate * case.batch_s),
                           "kept": case.kept, "batches_done": len(batches), "status": result["status"]}
    fig["median_ms"] = float(np.median(ms)) if ms else None
    fig["max_ms"] = max(ms) if ms else None
    states = [b["state"] for b in steady if b.get("state") is not None]
    fig["state_bytes"] = float(np.median(states)) if states else None
    fill = [(i, b["state"]) for i, b in enumerate(filling) if b.get("state") is not None]
    fig["fill_bytes_per_batch"] = float(np.polyfit(*zip(*fill), 1)[0]) if len(fill) >= 2 else None
    rss = result.get("rss")
    fig["rss_mb"] = rss / 2**20 if rss else None
    fig["rss_steady_mb"] = result["rss_steady"] / 2**20 if result.get("rss_steady") else None
    fig["pss_steady_mb"] = result["pss_steady"] / 2**20 if result.get("pss_steady") else None
    fig["bytes_per_kept"] = rss / case.kept if rss else None
    # the map state's values stand in for Spark's state store (RocksDB, in the JVM): not the worker's memory
    store = result.get("store") or 0
    fig["delta_bytes_per_kept"] = (rss - result["rss0"] - store) / case.kept if rss and result.get("rss0") else None
    fig["store_bytes_per_kept"] = store / case.kept if result.get("rss0") else None
    fig["headroom"] = case.batch_s * len(ms) / (sum(ms) / 1000) if ms and sum(ms) else None
    wall = result.get("wall_s")
    fig["wall_headroom"] = min(case.duration_s, case.batch_s * len(batches)) / wall if wall else None
    fig["batch_ms"] = [b["ms"] for b in batches]
    fig["batch_state_bytes"] = [b.get("state") for b in batches]
    return fig


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def _span(seconds: float) -> str:
    return f"{seconds / 3600:g}h" if seconds >= 3600 and seconds % 3600 == 0 else (
        f"{seconds / 60:g}m" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g}s")


def row(fig: dict[str, Any]) -> list[str]:
    planned = math.ceil(fig["duration_s"] / fig["batch_s"] - 1e-9)
    note = "" if fig["status"] == "ok" else f"{fig['status']} ({fig['batches_done']}/{planned} batches)"
    return [fig["mode"], _span(fig["window_s"]), _span(fig["slide_s"]), _num(fig["rate"]),
            _num(fig["events_per_batch"]), str(fig["batches_done"]), _num(fig["kept"]), _num(fig["median_ms"], ",.1f"),
            _num(fig["max_ms"], ",.1f"), _num(fig["state_bytes"]), _num(fig["fill_bytes_per_batch"]),
            _num(fig["rss_mb"]), _num(fig["bytes_per_kept"]), _num(fig["delta_bytes_per_kept"]),
            _num(fig.get("store_bytes_per_kept")), _num(fig["headroom"], ",.2f"), _num(fig["wall_headroom"], ",.2f"), note]


def targets(figs: list[dict[str, Any]], query: str = "q1") -> list[str]:
    """The issue's figures, from whichever runs this invocation made: each window of the window sweep
    against the shortest one at the same rate (the issue's 40 vs 5 and 60 vs 5 minutes among them)."""
    lines = []
    for mode in sorted({f["mode"] for f in figs}):
        window = {(f["window_s"], f["rate"]): f for f in figs if f["mode"] == mode and f["sweep"] == "window"}
        for rate in sorted({r for _, r in window}):
            spans = sorted(w for w, r in window if r == rate)
            short = window[(spans[0], rate)]
            for w in spans[1:]:
                long_ = window[(w, rate)]
                lines.append(f"{mode}: {_span(w)} vs {_span(spans[0])} at {rate:,.0f} ev/s: state bytes per batch x"
                             f"{_ratio(long_['state_bytes'], short['state_bytes'])}, batch ms x"
                             f"{_ratio(long_['median_ms'], short['median_ms'])} (same windows per event; "
                             f"target within {TARGET_RATIO:g}x)")
        per_kept = ", ".join(f"{_span(f['window_s'])}@{f['rate']:,.0f}: {_num(f['bytes_per_kept'])}"
                             for f in figs if f["mode"] == mode)
        lines.append(f"{mode}: bytes per kept event (RSS / kept): {per_kept}")
        lines += marginal_memory(mode, window)
        if query != "q1":
            continue  # the headroom target is Q1's
        goal = [f for f in figs if f["mode"] == mode and f["window_s"] == 3600 and f["slide_s"] == 60
                and f["rate"] == 2000]
        lines += [f"{mode}: headroom of 1h / 1m at 2,000 ev/s, {f['events_per_batch']:,} ev/batch: "
                  f"{_num(f['headroom'], '.2f')}x real time (wall {_num(f['wall_headroom'], '.2f')}x)" for f in goal]
        if not goal:
            lines.append(f"{mode}: headroom of 1h / 1m at 2,000 ev/s: not in this run (see the commands above)")
    return lines


def marginal_memory(mode: str, window: dict[tuple[float, float], dict[str, Any]]) -> list[str]:
    """Worker memory per kept event as the window grows (what the interpreters and libraries take cancels
    out): (RSS of the longest window - RSS of the shortest) / (their kept events), at each rate; run mode
    also over the workers' steady RSS (the median of the run's last third: between window computations)."""
    lines = []
    for rate in sorted({r for _, r in window}):
        spans = sorted(w for w, r in window if r == rate)
        if len(spans) < 2:
            continue
        short, long_ = window[(spans[0], rate)], window[(spans[-1], rate)]
        kept = long_["kept"] - short["kept"]
        figures = [f"{label} {_num((long_[key] - short[key]) * 2**20 / kept)} B"
                   for label, key in (("RSS at the end" if mode == "engine" else "peak RSS", "rss_mb"),
                                      ("steady RSS", "rss_steady_mb"), ("steady PSS", "pss_steady_mb"))
                   if long_.get(key) and short.get(key) and kept > 0]
        if figures:
            lines.append(f"{mode}: worker memory per kept event, {_span(spans[-1])} less {_span(spans[0])} at "
                         f"{rate:,.0f} ev/s: " + ", ".join(figures) + " (target at most 200 B)")
    return lines


def print_batches(batches: list[dict[str, Any]]) -> None:
    """A run's batches, eight to a line: batch id (run) or index (engine), events, ms, state bytes."""
    cells = [f"{b.get('batch', i)}: {b['events']:,} ev {b['ms']:,.0f} ms {_num(b.get('state'))} B"
             for i, b in enumerate(batches)]
    for i in range(0, len(cells), 8):
        print("    " + " | ".join(cells[i:i + 8]))


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else " n/a"


# ------------------------------------------------------------------ command line


def cases(args: argparse.Namespace) -> list[Case]:
    def case(sweep: str, window_min: float, rate: float) -> Case:
        window_s = 60 * window_min
        batch_s = args.batch_events / rate if sweep == "rate" and args.batch_events else args.batch_s
        longest = 60 * max(_floats(args.windows_min)) if sweep == "window" and args.same_length else window_s
        return Case(sweep, window_s, window_s / args.windows_per_event, rate, batch_s, args.duration * longest,
                    args.query)

    out = []
    if "window" in args.sweeps:
        out += [case("window", w, r) for r in _floats(args.rate) for w in _floats(args.windows_min)]
    if "rate" in args.sweeps:
        out += [case("rate", args.window_min, r) for r in _floats(args.rates)]
    return out


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--query", choices=list(QUERIES), default="q1",
                    help="q1 (columnar engine), general (a nested Kleene: the general engine), nested (the same on the "
                         "columnar engine) or cet (Q1's pattern, "
                         f"CET mode, at most {CET_MAX_TRENDS} trends per window and group)")
    ap.add_argument("--sweeps", default="window,rate", help="window and/or rate")
    ap.add_argument("--windows-min", default="5,10", help="window sweep: window lengths in minutes")
    ap.add_argument("--rate", default="200", help="window sweep: events per second (comma list)")
    ap.add_argument("--rates", default="200,500", help="rate sweep: events per second")
    ap.add_argument("--window-min", type=float, default=60.0, help="rate sweep: window length in minutes")
    ap.add_argument("--windows-per-event", type=float, default=60.0, help="window / slide")
    ap.add_argument("--batch-s", type=float, default=10.0, help="window sweep: event seconds per micro-batch")
    ap.add_argument("--batch-events", type=int, default=120_000,
                    help="rate sweep: events per micro-batch (batch s = this / rate); 0: --batch-s")
    ap.add_argument("--duration", type=float, default=1.5, help="event time to stream, in windows")
    ap.add_argument("--same-length", action="store_true",
                    help="the window sweep streams the event time of its longest window for every window: the shorter "
                         "ones run as many batches, and their memory is as steady where the worker memory per kept "
                         "event compares them")
    ap.add_argument("--modes", default="engine,run", help="engine (shard.step, no Spark) and/or run (the CLI)")
    ap.add_argument("--shards", type=int, default=2 * (os.cpu_count() or 2), help="state shards (Spark's default)")
    ap.add_argument("--operator", choices=["incremental", "whole"], default="incremental",
                    help="engine mode: incremental (transformWithStateInPandas' state: a small value and chunks) or "
                         "whole (applyInPandasWithState's: one value per shard); for run mode use --set operator=...")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="run mode: merged into the pipeline config (dotted key, YAML value; repeatable)")
    ap.add_argument("--budget-s", type=float, default=900.0, help="seconds per run; past it the run is killed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write every figure (and per-batch series) to this file")
    ap.add_argument("--per-batch", action="store_true",
                    help="print each run's batches (events, ms, state bytes) under its row")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.sweeps, args.modes = args.sweeps.split(","), args.modes.split(",")
    if not set(args.sweeps) <= {"window", "rate"} or not set(args.modes) <= {"engine", "run"}:
        raise SystemExit("--sweeps takes window and/or rate, --modes engine and/or run")
    from greta_stream.runtime import RunSpec

    check = Case("check", 60.0, 1.0, 1.0, 1.0, 1.0, args.query)
    pipeline_config(check, Path("."), args.shards, args.set)  # a bad --set fails now
    query, spec = QUERIES[args.query], check.spec()
    auto = RunSpec.create(check.text, **{k: v for k, v in query.options().items() if k != "engine"})
    refused = "" if spec.runner_kind != "general" else (
        f" (under engine auto: {auto.runner_kind}; the columnar engine refuses it: {auto.columnar_refusal})"
        if auto.columnar is None else " (under engine auto the columnar engine would run it)")
    text = query.template.replace("{window_s:g}", "<W>").replace("{slide_s:g}", "<W / windows per event>")
    options = "".join(f", {k} {v}" for k, v in query.options().items())
    print(f"query {query.name}: {query.label}\n  {text}\n  runner: {spec.runner_kind}{options}{refused}")
    me = f"{Path(sys.executable).relative_to(ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable}"
    print("The issue's target cases (they take longer than the defaults):")
    for t in query.targets:
        print(f"  {me} benchmarks/bench_long_window.py {t}")
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, {memory_gib()} GiB; {platform.python_version()}; "
          f"command: {' '.join(sys.argv)}", flush=True)
    if "engine" in args.modes:
        warm_up(args.query)
    figs: list[dict[str, Any]] = []
    for sweep in args.sweeps:
        batch = f"{args.batch_events:,} events" if sweep == "rate" and args.batch_events else f"{args.batch_s:g} s"
        print(f"\nsweep {sweep}: {query.label}, windows per event {args.windows_per_event:g}, "
              f"{args.duration:g} windows of event time, micro-batches of {batch}, {args.shards} shards")
        table = Table(COLUMNS)
        table.header()
        for case in [c for c in cases(args) if c.sweep == sweep]:
            for mode in args.modes:
                result = run_engine(case, args) if mode == "engine" else run_cli(case, args)
                figs.append(summarize(case, result, mode))
                table.row(row(figs[-1]))
                if args.per_batch:
                    print_batches(result["batches"])
    print()
    lines = targets(figs, args.query)
    for line in lines:
        print(line)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
        args.json.write_text(json.dumps({"command": sys.argv, "args": settings, "cpu": cpu_model(), "cores": os.cpu_count(),
                                         "targets": lines, "results": figs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
