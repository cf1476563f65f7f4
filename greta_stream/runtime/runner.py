"""`Runner`: the one interface every way of evaluating a query implements.

The general engine (`greta_stream.engine.Engine`), the columnar stream
(`greta_stream.engine.columnar.stream.ColumnarStream`, compiled kernels) and
CET extraction (`greta_stream.cet.TrendExtractor`) are runners; a `RunSpec`
builds the right one. Drivers (the batch evaluator, `open_stream`, the Spark
shard step) call this interface only, never a runner's own names.

Call order:

    runner = spec.build(dead_letter=sink)  # or spec.restore(blob, sink)
    runner.expect(watermark)               # optional: events before it are late from now on
    runner.add_many(records)               # any order; bad or late records -> dead letters
    rows = runner.advance(watermark)       # rows of every window that ends by the watermark
    rows = runner.finish()                 # end of input: rows of every window left
    blob = spec.snapshot(runner)           # state as bytes, when `not runner.idle`
    runner.next_window_end()               # when to advance again without input (a timer)

Rows are the same whatever the arrival order and wherever the watermark
advances (docs/QUERY_LANGUAGE.md section 6). Watermarks and window bounds are in the
stream's time unit: seconds for numeric times, microseconds since the epoch
for timestamps (`time_kind`, fixed by the first valid event unless the spec
declares it). A driver that knows its watermark only in another unit passes
`watermark_of(time_kind)` to `add_many`: the runner declares it again in
the stream's unit once the first event fixes that unit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from greta_stream.engine.ingest import DeadLetterSink
from greta_stream.engine.plan import Metrics

WatermarkOf = Callable[[str | None], Any]


@runtime_checkable
class Runner(Protocol):
    """What a driver may call on a runner; see the module docstring for the order."""

    metrics: Metrics
    dead_letter: DeadLetterSink | None

    @property
    def time_kind(self) -> str | None:
        """"seconds" or "timestamp" once known (the stream's unit of time), else None."""

    @property
    def other_types(self) -> dict[str, int]:
        """Events seen of types the query has not, by type (some names): what a query whose
        types match no event should have said."""

    @property
    def typed(self) -> dict[str, int]:
        """Events seen of the query's types (valid or refused), by type: with `other_types`, what
        tells a misspelled type or attribute (`runtime.dead_letters.name_problems`) from a quiet one."""

    def expect(self, watermark: Any) -> None:
        """Events before `watermark` are late from now on; nothing is processed."""

    def add_many(self, records: Iterable[Any], watermark_of: WatermarkOf | None = None) -> None:
        """Validate and keep records (dicts, or a DataFrame); the rest become dead letters."""

    def advance(self, watermark: Any) -> list[dict[str, Any]]:
        """Rows of every window that ends at or before `watermark` and was not reported."""

    def finish(self) -> list[dict[str, Any]]:
        """End of input: rows of every window not reported."""

    def snapshot(self) -> bytes:
        """State as bytes (untagged: `RunSpec.snapshot` adds the runner's tag)."""

    @property
    def idle(self) -> bool:
        """Nothing kept: the runner may be dropped."""

    def next_window_end(self) -> Any:
        """End of the first window not reported yet, or None."""
