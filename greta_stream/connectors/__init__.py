"""Sources and sinks outside Spark: JSON lines in and out, file sinks, dead letters.

Imports the engine and runtime layers; never pyspark (Spark's sources and
sinks, Kafka among them, live in `greta_stream.spark`).
"""

from greta_stream.connectors.jsonl import dumps, loads, read_events
from greta_stream.connectors.sinks import read_jsonl_dir

__all__ = ["dumps", "loads", "read_events", "read_jsonl_dir"]
