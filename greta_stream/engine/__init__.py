"""The GRETA runtime in pure Python: no Spark, no I/O.

Imports `greta_stream.compiler` (and through it `greta_stream.query`).
Main flow: `ingest` validates records, `engine.Engine` buffers them up to a
watermark and routes them to `partition.Partition`s, each holding
`graph.Run`s (the event graph over panes) that propagate the aggregates of
`plan.GraphPlan`; closed windows roll up into result rows.
"""

from greta_stream.engine.engine import Engine
from greta_stream.engine.ingest import DeadLetter, FieldNames

__all__ = ["DeadLetter", "Engine", "FieldNames"]
