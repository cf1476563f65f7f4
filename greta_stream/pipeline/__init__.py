"""A pipeline as users describe it (config files, CLI flags, the service's requests), free of Spark."""

from greta_stream.pipeline.config_file import check_delta_only
from greta_stream.pipeline.model import (
    PipelineConfig,
    QueryConfig,
    SinkConfig,
    SourceConfig,
    StreamConfig,
    default_shards,
    source_key,
    streams,
    uses,
)

__all__ = ["PipelineConfig", "QueryConfig", "SinkConfig", "SourceConfig", "StreamConfig", "check_delta_only",
           "default_shards", "source_key", "streams", "uses"]
