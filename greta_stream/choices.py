"""The closed sets of choices, declared once for every entry point.

The run spec (`runtime.spec`), the pipeline model (`greta_stream.pipeline`),
the command line (`cli_args`' enums are built from these) and the service's
requests all take their choices from here, so a choice added here is offered
everywhere. Imports nothing of the package.
"""

from __future__ import annotations

from typing import Literal, get_args

Mode = Literal["aggregate", "cet"]
Engine = Literal["auto", "general", "columnar"]
# A stream cannot promise "columnar": its columnar runner hands over to the
# general engine by itself when some micro-batch needs it.
StreamEngine = Literal["auto", "general"]
Trends = Literal["complete", "all"]
Operator = Literal["transformWithStateInPandas", "applyInPandasWithState"]
SourceFormat = Literal["jsonl", "parquet", "delta", "kafka"]
SinkFormat = Literal["jsonl", "parquet", "delta", "console", "kafka"]
TableFormat = Literal["jsonl", "parquet", "delta"]  # what `run --input` holds and `--output` is written as
Counts = Literal["decimal", "text"]  # COUNT and integer SUM in typed outputs: decimal(38,0) or their exact text
StartingOffsets = Literal["earliest", "latest"]

MODES: tuple[str, ...] = get_args(Mode)
ENGINES: tuple[str, ...] = get_args(Engine)
STREAM_ENGINES: tuple[str, ...] = get_args(StreamEngine)
TRENDS: tuple[str, ...] = get_args(Trends)
OPERATORS: tuple[str, ...] = get_args(Operator)
COUNTS: tuple[str, ...] = get_args(Counts)
