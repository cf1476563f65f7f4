"""Many different queries sharing a Kleene sub-pattern: shared evaluation against one run per query.

The stock workload of the Hamlet paper (Poppe et al., SIGMOD'21), rebuilt: ticker
events, each ticker its own event type `T0`..`T9`, with `vol` (int, 1..150), `open` (float, each
ticker's own geometric random walk) and `sector` (one of four, drawn per
event), at `--rate` events per second (Poisson, strictly increasing float
seconds). The queries put a Kleene plus over one of five shared types `E` in
`T0`..`T4` (round robin) and differ around it, each drawn (seeded) from:

    RETURN sector, COUNT(*) | SUM(E.open) | AVG(E.open)
    PATTERN E+ | SEQ(X, E+) | SEQ(E+, Y) | SEQ(X, E+, Y)         (X, Y: two of T5..T9)
    WHERE E.vol > 30 | 50 | 100 AND E.open < NEXT(E).open
    GROUP-BY sector
    WITHIN 5 | 10 | 15 | 20 minutes SLIDE 5 minutes

Workloads (`--workload`):

- *uniform*: those queries; each event's ticker drawn uniformly;
- *bursty*: the same queries; the stream alternates stretches of 5 to 30
  events, either a burst of one Kleene type (`T0`..`T4`) or other tickers
  drawn uniformly from `T5`..`T9` (half the events each, as in *uniform*):
  the short and long bursts a share / not-share decision is about;
- *middle*: the uniform stream; longer sequences with the Kleene part in
  the middle, built from fragments shared per Kleene type: a prefix `A` or
  `SEQ(B, A)` and a suffix `C`, `SEQ(C, D)` or `D`, as in
  `SEQ(T5 A, T0 E+, T7 C, T8 D)` and `SEQ(T6 B, T5 A, T0 E+, T9 D)`.

The queries of a smaller size are the first ones of the largest. On the same
events, the engine modes of `bench_multiquery.engine_modes` (no Spark):

- *separate*: `evaluate` of each query on its own;
- *unshared*: one `MultiRunner` without sharing;
- *shared*: one `MultiRunner` with the planner (`plan_units`).

Columns: `units` (the planner's units) and `sharing` (queries in a unit of
more than one query); `rows` (result rows of the queries, from an untimed
shared run over the largest query set that also loads the kernels) and
`empty` (queries without a row: each such query is printed above the table);
events/s of the three modes over the whole workload (the fastest of
`--repeat` runs); `shared x` (shared over unshared events/s); `peak MB` (the
process's RSS high-water mark so far, `ru_maxrss`: it covers every mode and
every earlier row); `check` (`same` if every query's rows agree across the
three modes, else `MISMATCH` and the exit status is 1). Numbers, not tests.

    .venv/bin/python benchmarks/bench_sharing.py                                   # 10-100 queries, 90k events
    .venv/bin/python benchmarks/bench_sharing.py --sizes 5,10 --events 10000        # smoke run
    .venv/bin/python benchmarks/bench_sharing.py --workload bursty --repeat 3
    .venv/bin/python benchmarks/bench_sharing.py --run-config --sizes 100     # through Spark: sharing on/off
    .venv/bin/python benchmarks/bench_sharing.py --lanes                      # what one traversal could save
    .venv/bin/python benchmarks/bench_sharing.py --choices --workload bursty  # the cost model against the clock
    .venv/bin/python benchmarks/bench_sharing.py --ceiling --sizes 100        # the most one traversal could gain

`--lanes` measures the ceiling of sharing one traversal among queries that
differ around a Kleene part: a kernel pass costs a part per vertex (the edge
search, the index path, the limb bookkeeping: what such a traversal would do
once) and a part per lane (each (query, window) of the vertex: what it would
still do per query). One query over the Kleene type `T0` of the uniform
stream, `WITHIN 20 minutes` sliding so that each event falls in `W` windows
(each window the same length, so counts keep their size), is timed at
growing `W` (the kernel alone, best of `--repeat`, at least 3). `n` queries
of `w` windows each cost `n * t(w)` evaluated apart and at least `t(n * w)`
in one traversal that carries their lanes: the table prints that ratio, the
most such sharing could gain in the kernel.

`--choices` checks the cost model against the clock, one union at a time:
every union the planner weighs over the largest query set (per Kleene type,
edge predicates, partitioning and window spec: the queries of one union
pass, two lanes or more; queries whose lanes are equal share one) is
evaluated in one traversal (`evaluate_union`) and each of its lanes apart
(the same batch path, a lane's queries in a union of their own: a family,
or a query alone), best of `--repeat`. Columns: the model's estimates per
event (`est apart`, `est union`) and its choice (the planner's own rule: a
window spec's queries run as a union pass only where `est union` is the
lower), the measured seconds both ways and their ratio,
and whether the choice was the faster one (`right`; `wrong` where the
measured difference is over 10% the other way, `close` within 10%).

`--ceiling` measures how far sharing with a lane per query can go at the
largest size: one `MultiRunner` without and with sharing; the shared one
with a kernel that does nothing (what the run costs around the kernel: the
most any kernel could gain is the unshared run over this); and batch
evaluations that do less than the queries need (every window at once):
one traversal per Kleene part (every query of one `union_group_key`, every
window spec in one `evaluate_union`), the same with one query per lane
configuration (parts before the Kleene part, local predicates up to it,
windows), and one per configuration whatever its windows (the longest: a
shorter window of one slide is a prefix in time of a longer one).
`--run-config` also runs a `floor`: the same queries and files with one
event of each type per file, the run's cost that no sharing can take away (`--no-floor`: not run).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_multiquery import engine_modes  # noqa: E402
from benchlib import Table, peak_rss_bytes  # noqa: E402

from greta_stream import MultiRunner, QueryError, QuerySet, RunSpec  # noqa: E402
from greta_stream.engine.columnar import Input  # noqa: E402
from greta_stream.engine.columnar.union import evaluate_union, union_plan  # noqa: E402
from greta_stream.engine.ingest import FieldNames  # noqa: E402
from greta_stream.runtime.plan import plan_units, union_estimates, union_group_key  # noqa: E402

KLEENE = 5  # T0..T4 carry the Kleene plus
TICKERS = 10  # T5..T9 are the other parts of the patterns
SECTORS = 4
VOL_MAX = 150
OPEN_START = (10.0, 500.0)
OPEN_VOLATILITY = 0.002  # log-return spread per event of a ticker
BURST = (5, 30)  # events per stretch of the bursty stream
US_PER_S = 1_000_000

SHAPES = ["{E}", "SEQ({X}, {E})", "SEQ({E}, {Y})", "SEQ({X}, {E}, {Y})"]
VOLS = [30, 50, 100]
WITHINS_MIN = [5, 10, 15, 20]
AGGREGATES = ["COUNT(*)", "SUM(E.open)", "AVG(E.open)"]
WORKLOADS = ["uniform", "bursty", "middle"]


# ------------------------------------------------------------ events


def ticker_events(n: int, *, seed: int, rate: float, bursty: bool) -> list[dict[str, Any]]:
    """`n` ticker events sorted by time: type `T0`..`T9`, id, vol, open, sector."""
    rng = np.random.default_rng(seed)
    ticker = _bursty_tickers(rng, n) if bursty else rng.integers(0, TICKERS, n)
    gaps_us = np.maximum(1, np.rint(rng.exponential(US_PER_S / rate, n))).astype(np.int64)
    time_s = np.cumsum(gaps_us) / US_PER_S
    steps = rng.normal(0.0, OPEN_VOLATILITY, n)
    walk = np.empty(n)
    for t in range(TICKERS):  # each ticker's own walk, in its events' order
        mine = ticker == t
        walk[mine] = np.cumsum(steps[mine])
    start = rng.uniform(*OPEN_START, TICKERS)
    open_ = np.maximum(np.round(start[ticker] * np.exp(walk), 2), 0.01)
    vol = rng.integers(1, VOL_MAX + 1, n)
    sector = rng.integers(0, SECTORS, n)
    return [{"type": f"T{k}", "time": float(t), "id": i, "vol": int(v), "open": float(o), "sector": int(s)}
            for i, (k, t, v, o, s) in enumerate(zip(ticker, time_s, vol, open_, sector))]


def _bursty_tickers(rng: np.random.Generator, n: int) -> np.ndarray:
    """Stretches of 5 to 30 events: a burst of one Kleene ticker, or other tickers drawn uniformly."""
    out: list[np.ndarray] = []
    filled = 0
    while filled < n:
        length = int(rng.integers(BURST[0], BURST[1] + 1))
        if rng.random() < 0.5:
            out.append(np.full(length, rng.integers(0, KLEENE)))
        else:
            out.append(rng.integers(KLEENE, TICKERS, length))
        filled += length
    return np.concatenate(out)[:n]


# ------------------------------------------------------------ queries


def _others(rnd: random.Random, k: int) -> list[int]:
    return rnd.sample(range(KLEENE, TICKERS), k)


def _clauses(rnd: random.Random, pattern: str) -> str:
    vol = rnd.choice(VOLS)
    within = rnd.choice(WITHINS_MIN)
    agg = rnd.choice(AGGREGATES)
    return (f"RETURN sector, {agg} PATTERN {pattern} WHERE E.vol > {vol} AND E.open < NEXT(E).open "
            f"GROUP-BY sector WITHIN {within} minutes SLIDE 5 minutes")


def hamlet_query(rnd: random.Random, e: int) -> str:
    """One query of the Hamlet stock workload over Kleene type `T{e}`."""
    x, y = _others(rnd, 2)
    pattern = rnd.choice(SHAPES).format(E=f"T{e} E+", X=f"T{x} X", Y=f"T{y} Y")
    return _clauses(rnd, pattern)


def middle_query(rnd: random.Random, e: int) -> str:
    """A longer sequence with `T{e} E+` in the middle, from prefix and suffix fragments fixed per `e`."""
    a, b, c, d, f = (f"T{KLEENE + (e + i) % (TICKERS - KLEENE)}" for i in range(5))
    prefix = rnd.choice([f"{a} A", f"{b} B, {a} A"])
    suffix = rnd.choice([f"{c} C", f"{c} C, {d} D", f"{f} D"])
    return _clauses(rnd, f"SEQ({prefix}, T{e} E+, {suffix})")


QUERIES = {"uniform": hamlet_query, "bursty": hamlet_query, "middle": middle_query}


def workload(kind: str, n: int, seed: int) -> list[tuple[str, str]]:
    """`n` distinct queries, Kleene types round robin; a smaller `n` gives a prefix of a larger one."""
    rnd = random.Random(seed)
    make = QUERIES[kind]
    texts: list[str] = []
    seen: set[str] = set()
    for _ in range(100 * n):
        text = make(rnd, len(texts) % KLEENE)
        if text not in seen:
            seen.add(text)
            texts.append(text)
            if len(texts) == n:
                break
    if len(texts) < n:
        raise ValueError(f"the {kind} templates make fewer than {n} distinct queries")
    return [(f"q{i:03d}", t) for i, t in enumerate(texts)]


# ------------------------------------------------------------ measuring


def rows_per_query(queries: list[tuple[str, str]], events: list[dict[str, Any]]) -> dict[str, int]:
    """Result rows of each query, from one shared `MultiRunner` (untimed; loads the kernels)."""
    multi = MultiRunner(QuerySet.of([(name, RunSpec.create(text)) for name, text in queries]))
    multi.add_many(events)
    counts = dict.fromkeys((name for name, _ in queries), 0)
    for name, _ in multi.finish():
        counts[name] += 1
    return counts


def best_of(queries: list[tuple[str, str]], events: list[dict[str, Any]], repeat: int) -> dict[str, Any]:
    """`engine_modes` `repeat` times: the fastest seconds of each mode, and whether every run agreed."""
    runs = [engine_modes(queries, events) for _ in range(repeat)]
    best = {mode: min(r[mode] for r in runs) for mode in ("separate", "unshared", "shared")}
    return {**best, "same": all(r["same"] for r in runs)}


def measure(kind: str, events: list[dict[str, Any]], sizes: list[int], args: argparse.Namespace) -> bool:
    """Print one workload's table; False if some query's rows differed between modes."""
    queries = workload(kind, max(sizes), args.seed)
    try:
        specs = [(name, RunSpec.create(text)) for name, text in queries]
    except QueryError as err:
        raise SystemExit(f"a generated {kind} query does not compile:\n{err}") from err
    kinds = {s.runner_kind for _, s in specs}
    kleene = sum(1 for e in events if int(e["type"][1:]) < KLEENE)
    rows = rows_per_query(queries, events)
    print(f"\n## {kind}: {len(events):,} events ({kleene:,} of the Kleene types T0..T{KLEENE - 1}), "
          f"{max(sizes)} queries on the {'/'.join(sorted(kinds))} runner(s)")
    print(f"   e.g. {queries[0][1]}")
    empty = [(name, text) for name, text in queries if rows[name] == 0]
    for name, text in empty:
        print(f"   no rows: {name}: {text}")
    table = Table([("queries", 7), ("events", 8), ("units", 5), ("sharing", 7), ("rows", 8), ("empty", 5),
                   ("separate ev/s", 13), ("unshared ev/s", 13), ("shared ev/s", 11), ("shared x", 8),
                   ("peak MB", 7), ("check", 8)])
    table.header()
    ok = True
    for n in sizes:
        chosen = queries[:n]
        plan = plan_units(QuerySet.of(specs[:n]))
        sharing = sum(len(u.names) for u in plan.units if len(u.names) > 1)
        r = best_of(chosen, events, args.repeat)
        ok &= r["same"]
        e = len(events)
        table.row([str(n), f"{e:,}", str(len(plan.units)), str(sharing), f"{sum(rows[q] for q, _ in chosen):,}",
                   str(sum(1 for q, _ in chosen if rows[q] == 0)), f"{e / r['separate']:,.0f}",
                   f"{e / r['unshared']:,.0f}", f"{e / r['shared']:,.0f}", f"{r['unshared'] / r['shared']:.2f}",
                   f"{peak_rss_bytes() / 2**20:,.0f}", "same" if r["same"] else "MISMATCH"])
    return ok


def run_config(events: list[dict[str, Any]], queries: list[tuple[str, str]], files: int, floor: bool = True) -> bool:
    """The queries through `greta-stream run --config --flush-at-end` on one source folder, `sharing` on and off:
    wall time of each run (Spark's start included) and whether every query's rows agree. A third run, `floor`,
    reads the same number of files with one event of each type each (sharing off): what the run costs with next to no
    evaluation (Spark's start, planning, a micro-batch per file, the sinks), which no sharing can take away."""
    import json
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="bench-sharing-"))
    try:
        size = -(-len(events) // files)
        table = Table([("queries", 7), ("events", 8), ("files", 5), ("sharing", 7), ("wall s", 7), ("rows", 8),
                       ("check", 8)])
        print(f"\n## greta-stream run --config: {len(queries)} queries on one source folder of {files} files")
        table.header()
        outputs: dict[str, dict[str, list[str]]] = {}
        walls: dict[str, float] = {}
        runs = [("on", True), ("off", False)] + ([("floor", False)] if floor else [])
        for label, sharing in runs:
            run = root / label
            src = run / "in"
            src.mkdir(parents=True)
            n = 0
            for i in range(files):
                part = events[i * size:(i + 1) * size]
                if label == "floor":
                    part = floor_part(part)
                n += len(part)
                (src / f"part-{i:03d}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in part))
            walls[label], outputs[label] = _run_config_once(run, src, queries, sharing)
            rows = sum(len(v) for v in outputs[label].values())
            check = "-" if label == "floor" else "same" if label == "on" or outputs["on"] == outputs["off"] else "MISMATCH"
            table.row([str(len(queries)), f"{n:,}", str(files), label, f"{walls[label]:.1f}",
                       f"{rows:,}", check])
        if floor:
            print(f"   floor / off = {walls['floor'] / walls['off']:.2f}: with sharing the run takes at least the floor, "
                  f"so at best {walls['off'] / walls['floor']:.2f}x faster than without")
        return outputs["on"] == outputs["off"]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def floor_part(part: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The floor's file: the first event of each type in `part`, in time order (a query with none of its
    types is an error)."""
    firsts: dict[str, dict[str, Any]] = {}
    for e in part:
        firsts.setdefault(e["type"], e)
    return sorted(firsts.values(), key=lambda e: e["time"])


def _run_config_once(run: Path, src: Path, queries: list[tuple[str, str]],
                     sharing: bool) -> tuple[float, dict[str, list[str]]]:
    """One `greta-stream run --config --once --flush-at-end` in folder `run`: its wall time and each query's rows."""
    import json
    import subprocess
    import time

    lines = [f"source: {{format: jsonl, path: {src}, max_files_per_trigger: 1}}",
             f"checkpoint: {run / 'checkpoint'}", "once: true", "lateness_s: 60",
             f"sharing: {'true' if sharing else 'false'}", "queries:"]
    for name, text in queries:
        lines += [f"  - name: {name}", f"    text: {json.dumps(text)}",
                  f"    sinks: [{{format: jsonl, path: {run / 'out' / name}}}]"]
    cfg = run / "pipeline.yaml"
    cfg.write_text("\n".join(lines) + "\n")
    exe = Path(sys.executable).with_name("greta-stream")
    t = time.perf_counter()
    done = subprocess.run([str(exe), "run", "--config", str(cfg), "--flush-at-end"], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode:
        print(done.stdout[-2000:], done.stderr[-4000:])
        raise SystemExit(f"greta-stream run failed (exit {done.returncode})")
    return wall, {name: sorted(line for f in sorted((run / "out" / name).glob("*.jsonl"))
                               for line in f.read_text().splitlines()) for name, _ in queries}


def choices(kind: str, events: list[dict[str, Any]], queries: list[tuple[str, str]], repeat: int) -> bool:
    """Each union pass the planner weighs, timed in one traversal and as its lanes apart (each lane's
    queries in a traversal of their own: a family, or a query alone), beside the model's estimates; False if
    some query's rows differ between the two."""
    import time

    groups: dict[Any, list[tuple[str, Any]]] = {}
    for name, text in queries:
        spec = RunSpec.create(text)
        key = union_group_key(spec)
        plan = spec.columnar
        if key is not None and plan is not None:
            groups.setdefault((key, plan.within, plan.slide), []).append((name, plan))
    candidates = [members for members in groups.values() if union_plan(members).nq > 1]
    print(f"\n## {kind}: {len(events):,} events, {len(queries)} queries: {len(candidates)} union passes weighed")
    table = Table([("kleene", 6), ("window", 9), ("queries", 7), ("lanes", 5), ("est apart", 9), ("est union", 9),
                   ("model", 5), ("apart s", 7), ("union s", 7), ("apart/union", 11), ("choice", 6), ("check", 8)])
    table.header()
    fields = FieldNames()

    def best(run: Any) -> tuple[float, Any]:
        times, out = [], None
        for _ in range(repeat):
            t = time.perf_counter()
            out = run()
            times.append(time.perf_counter() - t)
        return min(times), out

    ok = True
    tally = {"right": 0, "close": 0, "wrong": 0}
    batch = Input(events)  # one batch's columns, read once for every query (as a MultiRunner's batch is)
    for members in candidates[:1]:  # the kernels loaded and the columns read before the clock starts
        evaluate_union(union_plan(members), batch, fields)
        evaluate_union(union_plan(members[:1]), batch, fields)
    for members in sorted(candidates, key=lambda m: (m[0][1].states[0].type, m[0][1].within)):
        union = union_plan(members)
        alone_est, union_est = union_estimates(union)
        t_union, shared = best(lambda u=union: evaluate_union(u, batch, fields))
        t_alone, apart = 0.0, {}
        plans = dict(members)
        for lane in range(union.nq):
            mine = [(m.name, plans[m.name]) for m in union.members if m.lane == lane]
            t, rows = best(lambda mine=mine: evaluate_union(union_plan(mine), batch, fields))
            t_alone += t
            apart.update(rows)
        same = shared == apart
        ok &= same
        share = union_est < alone_est
        faster = t_union < t_alone
        verdict = "right" if share == faster else "close" if abs(t_alone / t_union - 1) <= 0.1 else "wrong"
        tally[verdict] += 1
        plan = members[0][1]
        core = next(s.type for s in plan.states if s.kleene)
        table.row([core, f"{plan.within / 60:g}m/{plan.slide / 60:g}m", str(len(members)), str(union.nq),
                   f"{alone_est:,.0f}", f"{union_est:,.0f}", "union" if share else "apart", f"{t_alone:.3f}",
                   f"{t_union:.3f}", f"{t_alone / t_union:.2f}", verdict, "same" if same else "MISMATCH"])
    print(f"   choices: {tally['right']} right, {tally['close']} within 10%, {tally['wrong']} wrong")
    return ok


def lane_configuration(plan: Any) -> tuple[Any, ...]:
    """What makes a query's lanes of the core its own: the parts before the core and every local predicate
    up to it, and its windows. Queries of one configuration carry equal values at the core."""
    from greta_stream.compiler.expressions import format_expr
    from greta_stream.engine.columnar.union import core_of

    c = core_of(plan)
    before = tuple((s.type, s.kleene) for s in plan.states[:c])
    local = tuple(sorted((i - c, format_expr(e).replace(f"{plan.states[i].alias}.", "")) for i, e in plan.local
                         if i <= c))
    return before, local, plan.within, plan.slide


@contextlib.contextmanager
def no_kernels() -> Iterator[None]:
    """The kernel does nothing (no rows) while inside: what a run costs around it."""
    from greta_stream.engine.columnar import kernel

    real = kernel.run

    def run(task: Any, lo: int, hi: int, k_first: int, lanes: int, group_of_part: Any, n_groups: int, ev: Any,
            wiring: Any, ncell: int, limbs: int, max_words: int) -> tuple[Any, ...]:
        return (0, np.zeros(0, np.int64), np.zeros(0, np.int64),
                np.zeros((0, ncell, limbs + kernel.EXTRA_LIMBS), np.uint64), np.zeros((0, ev.mmval.shape[1]), np.float64))

    kernel.run = run
    try:
        yield
    finally:
        kernel.run = real


def sharing_ceiling(kind: str, events: list[dict[str, Any]], queries: list[tuple[str, str]], repeat: int) -> bool:
    """How far sharing with a lane per query can go, at the largest size: one `MultiRunner` without and with
    sharing, then evaluations that do less than the queries need, in batch (every window computed at once,
    so one traversal serves every window spec, which a stream closing a window per slide cannot do):

    - *one traversal per Kleene part*: each `union_group_key` group's queries, every window spec, in one
      `evaluate_union` over one batch read once (each query's rows, checked against the unshared run);
    - *a query per lane configuration*: the same with one query per lane configuration
      (`lane_configuration`), the lanes a traversal merging equal lanes would still compute (only those
      queries' rows);
    - *... but its windows*: one query per configuration whatever its windows, the longest window's;
    - *kernels doing nothing*: the shared `MultiRunner` with a no-op kernel, what the run costs around it:
      the most any kernel could gain is the unshared run over this.

    False if some query's rows differ."""
    import time

    specs = [(name, RunSpec.create(text)) for name, text in queries]
    groups: dict[Any, list[tuple[str, Any]]] = {}
    alone = []
    for name, spec in specs:
        key = union_group_key(spec)
        if key is None:
            alone.append((name, spec))
        else:
            groups.setdefault(key, []).append((name, spec.columnar))
    per_part = [union_plan(members) for members in groups.values()]
    # one query per lane configuration; or per configuration but its windows, the longest window's query (a
    # shorter window of one slide is a prefix in time of a longer one: its lanes are the longer one's, read
    # at an earlier end)
    distinct, by_prefix = [], []
    for members in groups.values():
        one: dict[Any, tuple[str, Any]] = {}
        longest: dict[Any, tuple[str, Any]] = {}
        for name, plan in members:
            key = lane_configuration(plan)
            one.setdefault(key, (name, plan))
            if key[:2] not in longest or plan.within > longest[key[:2]][1].within:
                longest[key[:2]] = (name, plan)
        distinct.append(union_plan(list(one.values())))
        by_prefix.append(union_plan(list(longest.values())))
    fields = FieldNames()

    def traversals(unions: list[Any]) -> dict[str, list[dict[str, Any]]]:
        batch = Input.of(events)
        rows: dict[str, list[dict[str, Any]]] = {}
        for union in unions:
            rows.update(evaluate_union(union, batch, fields))
        for name, spec in alone:
            multi = MultiRunner(QuerySet.of([(name, spec)]))
            multi.add_many(events)
            rows[name] = [row for _, row in multi.finish()]
        return rows

    def runner(sharing: bool) -> dict[str, list[dict[str, Any]]]:
        multi = MultiRunner(QuerySet.of(specs, sharing=sharing))
        multi.add_many(events)
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in specs}
        for name, row in multi.finish():
            rows[name].append(row)
        return rows

    def best(run: Any) -> tuple[float, Any]:
        out, times = None, []
        for _ in range(repeat):
            t = time.perf_counter()
            out = run()
            times.append(time.perf_counter() - t)
        return min(times), out

    traversals(distinct[:1])  # the kernels loaded before the clock starts
    t_off, rows_off = best(lambda: runner(False))
    t_on, rows_on = best(lambda: runner(True))
    t_part, rows_part = best(lambda: traversals(per_part))
    t_distinct, _ = best(lambda: traversals(distinct))
    t_prefix, _ = best(lambda: traversals(by_prefix))
    with no_kernels():
        t_floor, _ = best(lambda: runner(True))

    def canon(rows: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
        return {name: sorted(map(repr, r)) for name, r in rows.items()}

    same = canon(rows_off) == canon(rows_on) == canon(rows_part)
    print(f"\n## {kind}: {len(events):,} events, {len(queries)} queries in {len(groups)} Kleene part(s), "
          f"{len(alone)} of none; {sum(len(u.members) for u in distinct)} distinct lane configurations, "
          f"{sum(len(u.members) for u in by_prefix)} but their windows")
    table = Table([("run", 34), ("s", 6), ("x unshared", 10), ("check", 8)])
    table.header()
    table.row(["MultiRunner, sharing off", f"{t_off:.2f}", "1.00", "same" if same else "MISMATCH"])
    table.row(["MultiRunner, sharing on", f"{t_on:.2f}", f"{t_off / t_on:.2f}", "same" if same else "MISMATCH"])
    table.row(["one traversal per Kleene part", f"{t_part:.2f}", f"{t_off / t_part:.2f}", "same" if same else "MISMATCH"])
    table.row(["a query per lane configuration", f"{t_distinct:.2f}", f"{t_off / t_distinct:.2f}", "-"])
    table.row(["... but its windows (the longest)", f"{t_prefix:.2f}", f"{t_off / t_prefix:.2f}", "-"])
    table.row(["sharing on, kernels doing nothing", f"{t_floor:.2f}", f"{t_off / t_floor:.2f}", "-"])
    return same


LANE_WINDOWS = [1, 2, 4, 8, 16, 20, 40, 80]  # each divides 20 minutes into whole seconds


def lane_ceiling(events: list[dict[str, Any]], repeat: int) -> dict[int, float]:
    """Kernel seconds of one `T0 E+` query at `W` windows per event, and the most a traversal shared by
    `n` queries of `w` windows could gain over them apart (`n * t(w) / t(n * w)`)."""
    import time

    from greta_stream.engine.columnar import driver

    kernel = {"s": 0.0}
    run_kernel = driver.run_kernel

    def timed(*a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return run_kernel(*a, **kw)
        finally:
            kernel["s"] += time.perf_counter() - t

    driver.run_kernel = timed
    took: dict[int, float] = {}
    try:
        for w in LANE_WINDOWS:
            slide_s = 20 * 60 / w
            spec = RunSpec.create(f"RETURN sector, COUNT(*), SUM(E.open) PATTERN T0 E+ "
                                  f"WHERE E.vol > 30 AND E.open < NEXT(E).open GROUP-BY sector "
                                  f"WITHIN 20 minutes SLIDE {slide_s:g} seconds")
            best = float("inf")
            for _ in range(repeat):
                kernel["s"] = 0.0
                multi = MultiRunner(QuerySet.of([("q", spec)]))
                multi.add_many(events)
                multi.finish()
                best = min(best, kernel["s"])
            took[w] = best
    finally:
        driver.run_kernel = run_kernel
    print(f"\n## lanes: one query over T0 ({sum(1 for e in events if e['type'] == 'T0'):,} events of "
          f"{len(events):,}), WITHIN 20 minutes, W windows per event; kernel seconds, best of {repeat}")
    table = Table([("W", 4), ("kernel ms", 9), ("ms per lane", 11), ("n x w", 7), ("apart ms", 9),
                   ("one traversal ms", 16), ("ceiling x", 9)])
    table.header()
    pairs = {2: (1, 2), 4: (2, 2), 8: (4, 2), 16: (8, 2), 20: (10, 2), 40: (20, 2), 80: (20, 4)}
    for w, t in took.items():
        n, each = pairs.get(w, (1, w))
        apart = n * took[each]
        table.row([str(w), f"{t * 1e3:,.1f}", f"{t * 1e3 / w:,.2f}", f"{n} x {each}", f"{apart * 1e3:,.1f}",
                   f"{t * 1e3:,.1f}", f"{apart / t:,.2f}"])
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="all", choices=[*WORKLOADS, "all"])
    ap.add_argument("--bursty", action="store_true", help="the bursty workload only (as --workload bursty)")
    ap.add_argument("--sizes", default="10,20,50,100", help="numbers of queries")
    ap.add_argument("--events", type=int, default=90_000, help="events per stream")
    ap.add_argument("--rate", type=float, default=50.0, help="events per second (50: 15k events per 5-minute window)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each size; the fastest is shown")
    ap.add_argument("--run-config", action="store_true",
                    help="instead: the largest size through `greta-stream run --config`, sharing on and off (Spark)")
    ap.add_argument("--files", type=int, default=10, help="input files (micro-batches) of --run-config")
    ap.add_argument("--no-floor", action="store_true", help="--run-config without its third run, the floor")
    ap.add_argument("--lanes", action="store_true",
                    help="instead: the kernel's cost per vertex and per lane, and what a shared traversal could gain")
    ap.add_argument("--choices", action="store_true",
                    help="instead: each union the planner weighs, timed both ways beside the cost model's choice")
    ap.add_argument("--ceiling", action="store_true",
                    help="instead: the largest size against the most a traversal per Kleene part could gain")
    args = ap.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    kinds = ["bursty"] if args.bursty else WORKLOADS if args.workload == "all" else [args.workload]
    print(f"# bench_sharing: {' '.join(sys.argv[1:]) or '(defaults)'}")
    ok = True
    if args.lanes:
        lane_ceiling(ticker_events(args.events, seed=args.seed, rate=args.rate, bursty=False), max(3, args.repeat))
        return 0
    if args.choices:
        for kind in kinds:
            events = ticker_events(args.events, seed=args.seed, rate=args.rate, bursty=kind == "bursty")
            ok &= choices(kind, events, workload(kind, max(sizes), args.seed), args.repeat)
        return 0 if ok else 1
    if args.ceiling:
        for kind in kinds:
            events = ticker_events(args.events, seed=args.seed, rate=args.rate, bursty=kind == "bursty")
            ok &= sharing_ceiling(kind, events, workload(kind, max(sizes), args.seed), max(args.repeat, 2))
        return 0 if ok else 1
    if args.run_config:
        kind = "uniform" if args.workload == "all" else args.workload
        events = ticker_events(args.events, seed=args.seed, rate=args.rate, bursty=kind == "bursty")
        ok = run_config(events, workload(kind, max(sizes), args.seed), args.files, floor=not args.no_floor)
        return 0 if ok else 1
    streams: dict[bool, list[dict[str, Any]]] = {}
    for kind in kinds:
        bursty = kind == "bursty"
        if bursty not in streams:
            streams[bursty] = ticker_events(args.events, seed=args.seed, rate=args.rate, bursty=bursty)
        ok &= measure(kind, streams[bursty], sizes, args)
    if not ok:
        print("!!! MISMATCH: some query's rows differ between modes")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
