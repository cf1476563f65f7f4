"""Delta Lake in and out: a table of events as a source, a query's rows (or dead letters) as a table.

Source: `read_delta` reads a Delta table as a stream (Spark's Delta source):
each micro-batch takes the commits made since the last one; its typed
columns go to the operator as Parquet's do (the same field names, time
kinds, lateness and dead letters as every source).

Sink: `DeltaSink` appends one micro-batch's rows to a Delta table, with the
typed schema `trend_aggregates` gives (`typed.py`): window bounds
(timestamps for timestamp streams, else seconds), the GROUP-BY columns, the
aggregates (COUNT and integer SUM as `decimal(38,0)`, or their exact text
with `counts: text`). Dead letters go to a table of `reason`, `detail`,
`event` (the record as JSON text).

Exactly once. Each append is a Delta idempotent write: `txnAppId` names the
sink (an id kept in the query's checkpoint, so a new checkpoint is a new
writer) and `txnVersion` is the micro-batch id. Delta commits the rows and
the (app id, version) pair in one transaction and skips a write whose
version it already has: a batch that Spark replays after a crash, or that a
failed sink's spool delivers again, adds nothing twice. Without a local
checkpoint (no place for the id) the writes are at-least-once.

A count past 38 digits does not fit `decimal(38,0)`: the batch fails that
query's sink with a message saying to set `counts: text` (its output waits
in the spool), rather than writing a null.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DataType, TimestampType

from greta_stream.connectors.jsonl import loads
from greta_stream.errors import ConfigError
from greta_stream.jvm import DELTA_HINT, spark_delta_jars
from greta_stream.pipeline.model import SinkConfig, SourceConfig
from greta_stream.runtime import RunSpec
from greta_stream.spark.session import need_package
from greta_stream.spark.sinks import SinkBatch, SinkPlace
from greta_stream.spark.typed import DEAD_LETTER_SCHEMA, exact_columns, typed_rows

DECIMAL_38 = 10 ** 38


def need_delta(spark: SparkSession) -> None:
    """Fail clearly when Delta Lake is not on Spark's classpath."""
    need_package(spark, bool(spark_delta_jars()), "delta-spark", "Delta Lake", DELTA_HINT)


def read_delta(spark: SparkSession, src: SourceConfig) -> DataFrame:
    """A streaming DataFrame of the Delta table at `src.path`: its columns, typed as the table has them.
    `src.options` go to Spark's Delta reader (startingVersion, maxBytesPerTrigger, ignoreDeletes, ...)."""
    need_delta(spark)
    reader = spark.readStream.format("delta")
    if src.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", src.max_files_per_trigger)
    for k, v in src.options.items():
        reader = reader.option(k, v)
    return reader.load(src.path)


class DeltaSink:
    """Appends a query's rows (`kind` "row") or dead letters ("dead") of each micro-batch to a Delta table."""

    def __init__(self, query: str, kind: str, cfg: SinkConfig, spec: RunSpec, app_id_file: Path | None) -> None:
        self.query, self.kind, self.cfg, self.spec = query, kind, cfg, spec
        self.app_id_file = app_id_file
        self.types: dict[str, DataType] = {}  # the source's column types ({} for JSON text), set by `bind`
        self._app_id: str | None = None
        self._checked = False  # the target was checked (`_check_target`) before this sink's first write

    @property
    def merges(self) -> bool:
        """Whether a write may add columns: with merge_schema, and always to a dead-letter table, whose
        schema (`DeadLetter.FIELDS`) only ever gains nullable columns (a table of an earlier version)."""
        return self.cfg.merge_schema or self.kind == "dead"

    def bind(self, types: dict[str, DataType]) -> None:
        """The source's column types (the stream's DataFrame, when it starts)."""
        self.types = types

    @property
    def target(self) -> str:
        return f"table {self.cfg.table}" if self.cfg.table else str(self.cfg.path)

    def app_id(self) -> str:
        """This sink's Delta writer id: made once and kept in the query's checkpoint (a new checkpoint: a new id)."""
        if self._app_id is None:
            if self.app_id_file is None:
                self._app_id = f"greta-stream-{uuid.uuid4()}"  # no checkpoint to keep it: at-least-once
            else:
                if not self.app_id_file.is_file():
                    self.app_id_file.parent.mkdir(parents=True, exist_ok=True)
                    temp = self.app_id_file.with_suffix(".tmp")
                    temp.write_text(f"greta-stream-{uuid.uuid4()}\n")
                    temp.replace(self.app_id_file)
                self._app_id = self.app_id_file.read_text().strip()
        return self._app_id

    @classmethod
    def create(cls, place: SinkPlace) -> DeltaSink:
        assert place.query.spec is not None, "a QueryConfig gets its RunSpec from QueryConfig.compile"
        log = place.log
        return cls(place.query.name, place.kind, place.cfg, place.query.spec,
                   log and log.with_name(log.name + ".delta-app-id"))

    def write(self, spark: SparkSession, batch: SinkBatch) -> None:
        """Append the batch's rows (or dead letters) in one idempotent commit."""
        self.append(spark, batch.batch_id, batch.outputs if self.kind == "row" else batch.payloads)

    def append(self, spark: SparkSession, batch_id: int, outputs: list[Any]) -> None:
        """Append `outputs` (rows: `Output`s; dead letters: their JSON text) as micro-batch `batch_id`."""
        if not outputs and (self.kind != "dead" or self._checked):
            return  # nothing to commit: Delta records no version for this batch, and needs none
        # a dead-letter table is there from the first batch on, empty with its columns on a clean run:
        # its readers find a table, not TableNotFound
        if not outputs and self._exists(spark):
            self._checked = True
            return
        frame = self._rows(spark, outputs) if self.kind == "row" else self._dead(spark, outputs)
        if not self._checked:
            self._check_target(spark, frame)
            self._checked = True
        writer = (frame.write.format("delta").mode("append")
                  .option("txnAppId", self.app_id()).option("txnVersion", batch_id)
                  .option("mergeSchema", "true" if self.merges else "false"))
        for k, v in self.cfg.options.items():  # e.g. delta.appendOnly, userMetadata
            writer = writer.option(k, v)
        if self.cfg.partition_by:
            missing = [c for c in self.cfg.partition_by if c not in frame.columns]
            if missing:
                raise ConfigError(f"query {self.query!r}: cannot partition its Delta table by {', '.join(missing)}: "
                                  f"its columns are {', '.join(frame.columns)}")
            writer = writer.partitionBy(*self.cfg.partition_by)
        if self.cfg.table:
            writer.saveAsTable(self.cfg.table)
        else:
            writer.save(self.cfg.path)

    def _exists(self, spark: SparkSession) -> bool:
        """Whether the table is there (a path that is not local: taken to be)."""
        if self.cfg.table:
            return bool(spark.catalog.tableExists(self.cfg.table))
        path = str(self.cfg.path)
        return "://" in path or (Path(path) / "_delta_log").is_dir()

    def _check_target(self, spark: SparkSession, frame: DataFrame) -> None:
        """Before the first write: a folder of other files is no table to create around them, and an
        existing table must have the columns this query writes (one line saying which differ)."""
        table = self.cfg.table
        if not table:
            path = str(self.cfg.path)
            local = Path(path) if "://" not in path else None
            if local is not None and local.is_dir() and any(local.iterdir()) and not (local / "_delta_log").is_dir():
                raise ConfigError(f"query {self.query!r}: the Delta sink path {path} holds files and is not a Delta "
                                  "table: give a new or empty folder, or an existing Delta table")
        exists = self._exists(spark)
        if not exists or self.merges:
            return
        try:
            have = (spark.table(table) if table else spark.read.format("delta").load(str(self.cfg.path))).schema
        except Exception:  # noqa: BLE001 - not readable as a table (a remote path not there yet): the write says
            return
        differ = _schema_differences({f.name: f.dataType for f in have.fields},
                                     {f.name: f.dataType for f in frame.schema.fields})
        if differ:
            raise ConfigError(f"query {self.query!r}: the Delta table {self.target} has other columns than the query "
                              f"writes: {differ} (a new table, or merge_schema: true to add columns)")

    def _rows(self, spark: SparkSession, rows: list[Any]) -> DataFrame:
        counts = self.cfg.counts
        if counts == "decimal":
            self._check_fits(rows)
        frame = spark.createDataFrame([(float(o.window_start), float(o.window_end), o.payload) for o in rows],
                                      "window_start double, window_end double, payload string")
        # a timestamp stream's rows say their bounds as ISO text: the table gets timestamps
        timestamps = (self.spec.time_kind == "timestamp" or self.types.get(self.spec.fields.time) == TimestampType()
                      or isinstance(loads(rows[0].payload).get("window_start"), str))
        return typed_rows(frame, self.spec, self.types, timestamps, counts)

    def _check_fits(self, rows: list[Any]) -> None:
        exact = exact_columns(self.spec, self.types)
        for o in rows:
            record = loads(o.payload)
            for c in exact:
                value = record.get(c)
                if isinstance(value, int) and abs(value) >= DECIMAL_38:
                    raise ValueError(f"{c} = {value} in window {o.window_start} has {len(str(abs(value)))} digits, "
                                     f"past decimal(38,0): set counts: text on the Delta sink {self.target} to "
                                     "write counts as their exact text")

    def _dead(self, spark: SparkSession, payloads: list[str]) -> DataFrame:
        from pyspark.sql import functions as F

        frame = spark.createDataFrame([(p,) for p in payloads], "payload string")
        return frame.select(F.from_json("payload", DEAD_LETTER_SCHEMA).alias("d")).select("d.*")


def _schema_differences(table: dict[str, DataType], written: dict[str, DataType]) -> str:
    """"" when a table takes what is written (its columns, of their types; a column it has and the
    write lacks stays null), else the differences in one line."""
    out = []
    for name, kind in written.items():
        if name not in table:
            out.append(f"{name} ({kind.simpleString()}) is not in the table")
        elif table[name] != kind:
            out.append(f"{name} is {table[name].simpleString()} in the table, {kind.simpleString()} written")
    return "; ".join(out)
