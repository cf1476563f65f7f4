"""One pipeline model: flags, a config file and a REST request build equal models.

`greta-stream run`'s flags, a pipeline config file and the service's
`POST /queries` body each describe a query with its source, sinks and
options; all three must arrive at the same `greta_stream.pipeline` models and
the same compiled run (the fingerprint that ties saved state to a query).
Renamed settings are still read, with a warning. No Spark is started.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from greta_service.registry import Registry
from greta_service.runner import query_config
from greta_service.schemas import QueryCreate, QueryOptions
from greta_service.settings import Settings
from greta_service.store import SQLiteStore
from greta_stream.cli import app
from greta_stream.errors import ConfigError
from greta_stream.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig
from greta_stream.runtime.queryset import run_fingerprint

Q1 = Path("configs/q1_stock.greta").read_text()
CET = "RETURN TRENDS PATTERN SEQ(Stock A, Stock B+) WHERE [company] AND B.price > NEXT(B).price WITHIN 60 s SLIDE 30 s"

# (query text, options as the file and the service name them, the same as `run`'s flags)
CASES = {
    "aggregate": (Q1, {"lateness_s": 30.0, "engine": "general"}, ["--lateness", "30", "--engine", "general"]),
    "cet": (CET, {"mode": "cet", "trends": "all", "max_trends": 5, "with_events": True, "distribute_over": 100},
            ["--mode", "cet", "--trends", "all", "--max-trends", "5", "--with-events", "--distribute-over", "100"]),
}
FIELDS = {"type": "kind", "time": "ts", "id": "eid"}


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    settings = Settings(data_dir=tmp_path)
    settings.checkpoint_dir.mkdir(parents=True)
    store = SQLiteStore(settings.resolved_store_url.removeprefix("sqlite:///"))
    store.close()
    return Registry(settings, store)


def run_flags(monkeypatch: pytest.MonkeyPatch, *flags: str) -> PipelineConfig:
    """The pipeline `greta-stream run` builds of its flags (the run itself left out: no Spark)."""
    import greta_stream.spark.pipeline as spark_pipeline

    built: list[PipelineConfig] = []
    monkeypatch.setattr(spark_pipeline, "run", lambda cfg, echo: built.append(cfg) or {})
    done = CliRunner().invoke(app, ["run", *flags])
    assert done.exit_code == 0, done.output
    return built[0]


def described(q: QueryConfig, source: SourceConfig) -> tuple[Any, ...]:
    """What a query is, wherever it was described: its model, its source's and its compiled run (its
    lateness and mode as the run has them: a model leaves them unset where the pipeline or the text decides)."""
    assert q.spec is not None
    return (q.model_dump(exclude={"source", "lateness_s", "mode"}), source.model_dump(), run_fingerprint(q.spec),
            q.spec.lateness_s, q.spec.mode)


@pytest.mark.parametrize("case", sorted(CASES))
def test_flags_a_config_file_and_a_request_build_equal_models(case: str, tmp_path: Path, registry: Registry,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    text, options, flag_options = CASES[case]
    (tmp_path / "in").mkdir()
    (tmp_path / "q1.greta").write_text(text)
    out, chk = str(tmp_path / "out"), str(tmp_path / "chk")
    sinks = [{"format": "jsonl", "path": out}]
    dead = {"format": "jsonl", "path": f"{out}/dead_letters"}

    flags = run_flags(monkeypatch, "-q", str(tmp_path / "q1.greta"), "-i", str(tmp_path / "in"), "-o", out,
                      "--checkpoint", chk, "--max-files-per-trigger", "2", "--type-field", "kind", "--time-field", "ts",
                      "--id-field", "eid", *flag_options)

    query_options = {k: v for k, v in options.items() if k != "lateness_s"}
    doc = {"source": {"format": "jsonl", "path": "in", "max_files_per_trigger": 2}, "checkpoint": "chk",
           "fields": FIELDS, "lateness_s": options.get("lateness_s", 0.0),
           "queries": [{"name": "q1", "file": "q1.greta", "sinks": [{"format": "jsonl", "path": "out"}],
                        "dead_letter": {"format": "jsonl", "path": "out/dead_letters"}, **query_options}]}
    (tmp_path / "pipeline.yaml").write_text(yaml.safe_dump(doc))
    file = PipelineConfig.from_file(tmp_path / "pipeline.yaml")

    request = QueryCreate.model_validate({
        "name": "q1", "text": text, "mode": options.get("mode"), "sinks": sinks, "dead_letter": dead,
        "source": {"format": "jsonl", "path": str(tmp_path / "in"), "max_files_per_trigger": 2},
        "options": {**{k: v for k, v in options.items() if k != "mode"}, "fields": FIELDS}})
    rec, spec = registry.prepare(request)
    served = query_config(rec).compiled_as(spec)

    (from_flags,), (from_file,) = flags.queries, file.queries
    assert described(from_flags, flags.source) == described(from_file, file.source) == described(served, served.source)
    unset = {"lateness_s": None, "mode": None, "source": None}
    assert from_flags.model_copy(update=unset) == from_file.model_copy(update=unset) == served.model_copy(update=unset)
    assert flags.model_dump(exclude={"queries"}) == file.model_dump(exclude={"queries"})
    assert from_file.spec is not None and from_file.spec.fields.type == "kind"


def test_a_query_may_set_its_own_lateness_and_otherwise_carries_the_pipelines(tmp_path: Path) -> None:
    doc = {"source": {"path": "in"}, "checkpoint": "chk", "lateness_s": 20,
           "queries": [{"name": "own", "text": Q1, "lateness_s": 5, "sinks": [{"format": "console"}]},
                       {"name": "pipeline", "text": Q1, "sinks": [{"format": "console"}]}]}
    own, default = PipelineConfig.from_dict(doc, tmp_path).queries
    assert (own.lateness_s, default.lateness_s) == (5, None)  # the models as given: frozen
    assert own.spec is not None and default.spec is not None
    assert (own.spec.lateness_s, default.spec.lateness_s) == (5, 20)


def test_renamed_settings_are_read_with_a_warning_and_never_twice(tmp_path: Path) -> None:
    doc = {"source": {"path": "in"}, "checkpoint": "chk", "watermark_delay_s": 7,
           "queries": [{"name": "q", "text": Q1, "sinks": [{"format": "console"}]}]}
    with pytest.warns(FutureWarning, match="watermark_delay_s is deprecated: use lateness_s"):
        cfg = PipelineConfig.from_dict(doc, tmp_path, origin="old.yaml")
    assert cfg.lateness_s == 7 and cfg.queries[0].spec is not None and cfg.queries[0].spec.lateness_s == 7
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ConfigError, match="watermark_delay_s is the old name of lateness_s: give lateness_s only"):
            PipelineConfig.from_dict({**doc, "lateness_s": 7}, tmp_path)
        assert QueryOptions.model_validate({"watermark_delay_s": 3}).lateness_s == 3


def test_the_services_models_are_the_pipeline_models_with_limits() -> None:
    from greta_service.schemas import SinkSpec, SourceSpec

    assert issubclass(SourceSpec, SourceConfig) and issubclass(SinkSpec, SinkConfig)
    # every query option of the pipeline is a query option of the service
    assert set(QueryConfig.model_fields) - {"name", "text", "file", "mode", "sinks", "dead_letter", "source"} <= set(
        QueryOptions.model_fields)
    with pytest.raises(ValueError, match="a kafka source needs a topic"):
        SourceSpec.model_validate({"format": "kafka"})
    with pytest.raises(ValueError, match="less than or equal to 86400"):
        QueryOptions.model_validate({"trigger_interval_s": 100_000})


@pytest.mark.parametrize("lateness", [-1, float("nan"), float("inf"), True])
def test_a_lateness_is_checked_by_one_rule_with_one_message_on_every_path(lateness: Any, tmp_path: Path) -> None:
    """A config file's pipeline or query, a request's options and `RunSpec.create` refuse a bad lateness
    (negative, not finite, a bool) with the same message, each with its place where it has one."""
    from greta_stream import RunSpec

    said = f"lateness must be a finite number of seconds >= 0, got {lateness!r}"
    doc = {"source": {"path": "in"}, "checkpoint": "chk", "queries": [{"name": "q", "text": Q1, "sinks": [{"format": "console"}]}]}
    with pytest.raises(ConfigError) as pipeline:
        PipelineConfig.from_dict({**doc, "lateness_s": lateness}, tmp_path)
    assert str(pipeline.value) == f"pipeline config: lateness_s: {said}"
    with pytest.raises(ConfigError) as query:
        PipelineConfig.from_dict({**doc, "queries": [{**doc["queries"][0], "lateness_s": lateness}]}, tmp_path)
    assert str(query.value) == f"pipeline config: queries[0].lateness_s: {said}"
    with pytest.raises(ValueError, match="lateness must be a finite number of seconds >= 0"):
        QueryOptions.model_validate({"lateness_s": lateness})
    with pytest.raises(ConfigError) as spec:
        RunSpec.create(Q1, lateness_s=lateness)
    assert str(spec.value) == said
