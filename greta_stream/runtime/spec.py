"""`RunSpec`: everything a run of one query needs, validated once, frozen.

Every way of running a query (the Python API, the command line, a pipeline
config, the service, the Spark operator and its shard step) builds one
`RunSpec` where the run begins and passes only it on. The spec holds the
compiled query, so a query is compiled once per run and process: pickled
(to Spark's Python workers), a spec travels as its text and options and is
compiled again once per worker process (`compile_once`), never per batch.

    spec = RunSpec.create(text, mode=None, engine="auto", fields=FieldNames())
    runner = spec.build(dead_letter=sink)   # greta_stream.runtime.runner.Runner
    blob = spec.snapshot(runner)             # tagged bytes; spec.restore(blob)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any

from greta_stream.cet import CetConfig, TrendExtractor
from greta_stream.choices import ENGINES, MODES, STREAM_ENGINES, Mode
from greta_stream.choices import Engine as EngineChoice
from greta_stream.compiler.compiled import CompiledQuery, compile_query
from greta_stream.compiler.limits import LIMITS, Limits, check_limits
from greta_stream.engine import Engine, FieldNames
from greta_stream.engine.columnar import KernelPlan, Unsupported, columnar_plan
from greta_stream.engine.columnar.stream import ColumnarStream
from greta_stream.engine.ingest import DeadLetterSink
from greta_stream.engine.timebase import NUMERIC, TIMESTAMP
from greta_stream.errors import ConfigError, SnapshotError
from greta_stream.runtime.runner import Runner

TIME_KINDS: tuple[str | None, ...] = (None, NUMERIC, TIMESTAMP)
CET_COLUMNS = ("trend", "total", "truncated")
# Events further ahead of the watermark are dead-lettered as "future" (a year-long
# typo, a clock gone wrong): they would move the watermark and make every later
# event late. 30 days lets any replay of real streams through.
DEFAULT_MAX_FUTURE_S = 30 * 86_400.0

# A snapshot starts with a tag byte that names its runner.
_TAGS: dict[type, bytes] = {Engine: b"G", TrendExtractor: b"T", ColumnarStream: b"C"}
_RUNNERS = {tag: cls for cls, tag in _TAGS.items()}


@dataclass(frozen=True, eq=False)
class RunSpec:
    """A validated, immutable description of one query's run.

    - `query`: the compiled query.
    - `mode`: "aggregate" (result rows, docs/QUERY_LANGUAGE.md section 4) or "cet"
      (one record per trend, section 5; the default for `RETURN TRENDS`).
    - `engine`: "auto" (the columnar kernels where they cover the query,
      else the general engine), "general" or "columnar" (an error when the
      kernels do not cover the query). Aggregate mode only.
    - `fields`: names of the type, time and id fields of the input records.
    - `cet`: CET mode's options (`trends`, `max_trends`, `with_events`;
      `distribute_over` for Spark pipelines, whose batch writer extracts the
      deferred windows it makes: `greta_stream.cet.distributed`).
    - `time_kind`: "seconds" or "timestamp" when the source declares it;
      None lets the first valid event fix it.
    - `lateness_s`: allowed lateness (the watermark delay) in seconds.
    - `kernel_threads`: a cap on the columnar kernel's threads (None: one
      per core); a setting of this process, not of the results.
    - `max_future_s`: once there is a watermark, events more than this many
      seconds ahead of the newest time it stands for (the watermark plus
      `lateness_s`) are dead-lettered as "future" (None: no bound).
    - `life`: how many times a stream saw this query's name come back with
      another text or after a delete (`spark.layout`); part of its run
      fingerprint, so that no earlier life's state is taken for this one.
    """

    query: CompiledQuery
    mode: Mode = "aggregate"
    engine: EngineChoice = "auto"
    fields: FieldNames = FieldNames()
    cet: CetConfig = field(default_factory=CetConfig)
    time_kind: str | None = None
    lateness_s: float = 0.0
    kernel_threads: int | None = None
    max_future_s: float | None = DEFAULT_MAX_FUTURE_S
    life: int = 0

    @classmethod
    def create(
        cls,
        query: str | CompiledQuery,
        *,
        mode: str | None = None,
        engine: str = "auto",
        fields: FieldNames = FieldNames(),
        trends: str = "complete",
        max_trends: int | None = None,
        with_events: bool = False,
        distribute_over: int | None = None,
        time_kind: str | None = None,
        lateness_s: float = 0.0,
        kernel_threads: int | None = None,
        max_future_s: float | None = DEFAULT_MAX_FUTURE_S,
        limits: Limits = LIMITS,
    ) -> RunSpec:
        """Compile `query` (or take it compiled) and check every option;
        `QueryError` or `ConfigError` (both ValueErrors) say what is wrong.
        `limits` caps the windows of the query (`greta_stream.compiler.Limits`)."""
        cq = check_limits(compile_once(query) if isinstance(query, str) else compile_query(query, limits=None),
                          limits)
        mode = mode or ("cet" if cq.query.trends else "aggregate")
        if mode not in MODES:
            raise ConfigError(f"mode must be {_one_of(MODES)}, got {mode!r}")
        if mode == "aggregate" and cq.query.trends:
            raise ConfigError("RETURN TRENDS lists trends: use mode cet")
        if engine not in ENGINES:
            raise ConfigError(f"engine must be {_one_of(ENGINES)}, got {engine!r}")
        if time_kind not in TIME_KINDS:
            raise ConfigError(f"time_kind must be {NUMERIC!r}, {TIMESTAMP!r} or None, got {time_kind!r}")
        lateness_s = checked_lateness(lateness_s)
        if max_future_s is not None and (isinstance(max_future_s, bool) or not isinstance(max_future_s, (int, float))
                                         or not (math.isfinite(max_future_s) and max_future_s > 0)):
            raise ConfigError(f"max_future_s must be a finite number of seconds > 0 or None, got {max_future_s!r}")
        if kernel_threads is not None and (isinstance(kernel_threads, bool) or kernel_threads < 1):
            raise ConfigError(f"kernel_threads must be a positive integer or None, got {kernel_threads!r}")
        if mode == "aggregate" and (trends != "complete" or max_trends is not None or with_events
                                    or distribute_over is not None):
            raise ConfigError("trends, max_trends, with_events and distribute_over apply to mode 'cet' only")
        try:
            cet = CetConfig(trends=trends, max_trends=max_trends, with_events=with_events,
                            distribute_over=distribute_over)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        spec = cls(cq, mode, engine, fields, cet, time_kind, lateness_s, kernel_threads,  # type: ignore[arg-type]
                   None if max_future_s is None else float(max_future_s))
        if mode == "aggregate" and engine == "columnar" and spec.columnar is None:
            raise ConfigError(f"the columnar engine does not cover this query: {spec.columnar_refusal}")
        return spec

    # ------------------------------------------------------------ derived
    @property
    def text(self) -> str:
        return self.query.text

    @property
    def columns(self) -> list[str]:
        """Columns of the runner's rows: docs/QUERY_LANGUAGE.md section 4, or section 5's records."""
        if self.mode == "cet":
            extra = ["aliases", "events"] if self.cet.with_events else []
            return ["window_start", "window_end", *self.query.group_columns, *CET_COLUMNS, *extra]
        return list(self.query.columns)

    @property
    def group_columns(self) -> tuple[str, ...]:
        return self.query.group_columns

    @cached_property
    def _columnar(self) -> tuple[KernelPlan | None, str]:
        if self.mode != "aggregate":
            return None, "CET mode lists the trends themselves"
        if self.engine == "general":
            return None, "the run asks for the general engine"
        try:
            return columnar_plan(self.query), ""
        except Unsupported as exc:
            return None, str(exc)

    @property
    def columnar(self) -> KernelPlan | None:
        """The columnar engine's plan when this run may use it, else None."""
        return self._columnar[0]

    @property
    def columnar_refusal(self) -> str:
        """Why the columnar engine does not run this query ("" when it may)."""
        return self._columnar[1]

    def engine_ran(self, runner: Any) -> tuple[str, str | None]:
        """The engine `runner` (one this spec built) runs on now: ("columnar", None), ("cet", None), or
        ("general", why the columnar engine does not: the query, or input it does not take)."""
        if isinstance(runner, ColumnarStream):
            return runner.engine_ran
        return ("cet", None) if self.mode == "cet" else ("general", self.columnar_refusal)

    @property
    def runner_kind(self) -> str:
        """"cet", "columnar" or "general": what `build` makes."""
        if self.mode == "cet":
            return "cet"
        return "columnar" if self.columnar is not None else "general"

    def for_streaming(self) -> RunSpec:
        """This spec, checked for a stream of micro-batches (Spark, the service)."""
        if self.engine not in STREAM_ENGINES:
            raise ConfigError(f"engine must be {_one_of(STREAM_ENGINES)} for a stream, got {self.engine!r}")
        return self

    def with_options(self, **changes: Any) -> RunSpec:
        """This spec with some options changed (the query stays compiled)."""
        return replace(self, **changes)

    # ----------------------------------------------------------- runners
    def build(self, dead_letter: DeadLetterSink | None = None, *, kind: str | None = None) -> Runner:
        """A new runner (see `greta_stream.runtime.runner.Runner`): CET
        extraction, the columnar stream (which hands over to the general
        engine by itself when some input needs it) or the general engine.
        `kind` forces "general" for an aggregate run."""
        kind = kind or self.runner_kind
        if kind == "cet":
            runner: Any = TrendExtractor(self.query, config=self.cet, fields=self.fields, dead_letter=dead_letter)
        elif kind == "columnar":
            assert self.columnar is not None
            runner = ColumnarStream(self.columnar, fields=self.fields, dead_letter=dead_letter,
                                    threads=self.kernel_threads)
        else:
            runner = Engine(self.query, fields=self.fields, dead_letter=dead_letter)
        if self.time_kind is not None:
            runner.validator.time_kind = self.time_kind
        return self.armed(runner)

    def armed(self, runner: Any) -> Any:
        """`runner` with this run's settings that are not state (`max_future_s`, `lateness_s`)."""
        runner.front.max_future_s, runner.front.lateness_s = self.max_future_s, self.lateness_s
        return runner

    def snapshot(self, runner: Any) -> bytes:
        """The runner's state as bytes: a tag byte naming the runner, then its snapshot."""
        return _TAGS[type(runner)] + runner.snapshot()

    def restore(self, blob: bytes | bytearray, dead_letter: DeadLetterSink | None = None) -> Runner:
        """The runner that `snapshot` saved, continuing where it left off."""
        cls = _RUNNERS.get(bytes(blob[:1]))
        if cls is None or (cls is TrendExtractor) != (self.mode == "cet"):
            raise SnapshotError("the state is of another engine or mode: start from a new checkpoint")
        data = bytes(blob[1:])
        if cls is TrendExtractor:
            return self.armed(TrendExtractor.restore(self.query, data, config=self.cet, fields=self.fields,
                                                     dead_letter=dead_letter))
        if cls is ColumnarStream:
            plan = self.columnar or _plan_of(self.query)
            return self.armed(ColumnarStream.restore(plan, data, fields=self.fields, dead_letter=dead_letter,
                                                     threads=self.kernel_threads))
        return self.armed(Engine.restore(self.query, data, fields=self.fields, dead_letter=dead_letter))

    # ------------------------------------------------------ identity, pickle
    @property
    def key(self) -> tuple[Any, ...]:
        """What identifies this run's results and state: the query text and every option."""
        return (self.query.text, self.mode, self.engine, self.fields, self.cet, self.time_kind, self.lateness_s,
                self.kernel_threads, self.max_future_s, self.life)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunSpec) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __reduce__(self) -> tuple[Any, ...]:
        # The compiled query holds compiled predicates (closures): a spec
        # travels as its text and options and compiles once per process.
        return (_from_key, self.key)


def _from_key(text: str, mode: Mode, engine: EngineChoice, fields: FieldNames, cet: CetConfig,
              time_kind: str | None, lateness_s: float, kernel_threads: int | None,
              max_future_s: float | None, life: int = 0) -> RunSpec:
    return RunSpec(compile_once(text), mode, engine, fields, cet, time_kind, lateness_s, kernel_threads,
                   max_future_s, life)


@lru_cache(maxsize=8192)  # a service holds thousands of queries: each text compiled once, not once per read
def compile_once(text: str) -> CompiledQuery:
    """A query text compiled once per process (compiled queries are immutable configuration):
    every entry point of a run compiles through here."""
    return compile_query(text, limits=None)  # a run's own limits are checked where it is set up


def _plan_of(cq: CompiledQuery) -> KernelPlan:
    try:
        return columnar_plan(cq)
    except Unsupported as exc:
        raise SnapshotError(f"columnar state for a query the columnar engine does not cover: {exc}") from None


def checked_lateness(lateness_s: Any) -> float:
    """A lateness in seconds, or the `ConfigError` every entry point gives: the one rule of the setting
    (a finite number >= 0; a bool is none), applied by `RunSpec.create` and by the pipeline models
    (`greta_stream.pipeline.model`, and through them the service's requests)."""
    if isinstance(lateness_s, bool) or not isinstance(lateness_s, (int, float)) or not (
            math.isfinite(lateness_s) and lateness_s >= 0):
        raise ConfigError(f"lateness must be a finite number of seconds >= 0, got {lateness_s!r}")
    return float(lateness_s)


def _one_of(choices: tuple[str, ...]) -> str:
    """`'a', 'b' or 'c'`: the choices of `greta_stream.choices` as a message names them."""
    quoted = [repr(c) for c in choices]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
