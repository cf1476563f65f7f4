"""A pipeline as users describe it (config files, CLI flags, the service's requests), free of Spark."""

from greta_stream.pipeline.model import (
    FieldsConfig,
    PipelineConfig,
    QueryConfig,
    QueryOptions,
    SinkConfig,
    SourceConfig,
    StreamConfig,
    StreamOptions,
    default_shards,
    glob_base,
    packages,
    source_key,
    streams,
)
from greta_stream.pipeline.sample import sample_census

__all__ = ["FieldsConfig", "PipelineConfig", "QueryConfig", "QueryOptions", "SinkConfig", "SourceConfig",
           "StreamConfig", "StreamOptions", "default_shards", "glob_base", "sample_census",
           "source_key", "streams", "packages"]
