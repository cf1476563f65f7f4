"""CET mode: the trends themselves, over the same templates, partitions and panes.

Pure Python, no Spark. Imports `greta_stream.query`, `greta_stream.compiler`
and the public pieces of `greta_stream.engine` (Validator, Event, DeadLetter,
FieldNames, Timebase, and Engine for exact trend counts); never `spark` or
`service`.

Pipeline: `extractor.TrendExtractor` validates and buffers records, routes
them in time order to `partition.CetPartition`s, whose runs are
`graph.TrendGraph`s (the CET graph, with `negation.Negation` thresholds);
when a window closes, `windows.WindowView` finds the trends, stitching the
partial trends that `graphlets` caches per pane (the CET paper's H-CET).
"""

from greta_stream.cet.config import ALL, COMPLETE, CetConfig
from greta_stream.cet.extractor import TrendExtractor

__all__ = ["ALL", "COMPLETE", "CetConfig", "TrendExtractor"]
