"""Where Spark runs each shard: `spark_partition` is Spark's own hash
partitioning of an int key, so `shard_keys` spreads shards evenly over cores."""

from __future__ import annotations

import pytest

from greta_stream.spark.layout import shard_keys, spark_partition

pytestmark = pytest.mark.spark


def test_spark_partition_is_sparks_hash_partitioning(spark) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    keys = [*range(-50, 300), 2**31 - 1, -(2**31), *shard_keys(16)]
    df = spark.createDataFrame([(k,) for k in keys], "k int")
    for partitions in (2, 3, 4, 8):
        got = dict(df.repartition(partitions, "k").select("k", F.spark_partition_id().alias("p")).collect())
        assert got == {k: spark_partition(k, partitions) for k in keys}


def test_default_layout_gives_every_core_as_many_shards(spark) -> None:  # noqa: ANN001
    """The operator's grouping is by the shard key column: with 4 shards and
    2 shuffle partitions (the test session), 2 shards per partition."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(k,) for k in shard_keys(4)], "k int")
    parts = [r.p for r in df.repartition(2, "k").select(F.spark_partition_id().alias("p")).collect()]
    assert sorted(parts) == [0, 0, 1, 1]
