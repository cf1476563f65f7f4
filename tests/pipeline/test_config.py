"""Pipeline configs: the samples in configs/ load, paths resolve, mistakes are clear."""

from __future__ import annotations

from pathlib import Path

import pytest

from greta_stream.errors import ConfigError, QueryError
from greta_stream.pipeline import PipelineConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["pipeline.yaml", "pipeline.toml"])
def test_sample_configs_load_with_paths_relative_to_the_file(name: str) -> None:
    cfg = PipelineConfig.from_file(ROOT / "configs" / name)
    assert Path(cfg.source.path).resolve().parent == (ROOT / "samples").resolve()  # samples/ links into the package
    assert Path(cfg.checkpoint).resolve().parent == ROOT / "out" / "checkpoints"
    assert cfg.queries and all(q.text.strip() for q in cfg.queries)
    for q in cfg.queries:
        for s in q.sinks:
            if s.path:
                assert Path(s.path).resolve().is_relative_to(ROOT / "out")


def test_yaml_sample_has_everything() -> None:
    cfg = PipelineConfig.from_file(ROOT / "configs" / "pipeline.yaml")
    assert [q.name for q in cfg.queries] == ["stock_downtrends", "stock_peaks"]
    assert cfg.lateness_s == 30 and cfg.trigger_interval_s == 5 and cfg.shards == 4 and not cfg.once
    assert [s.format for s in cfg.queries[0].sinks] == ["jsonl", "console"]
    assert cfg.queries[1].dead_letter is None


def test_missing_key_is_a_config_error(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("source: {format: jsonl, path: x}\nqueries: []\n")
    with pytest.raises(ConfigError, match="checkpoint"):
        PipelineConfig.from_file(p)


def test_bad_query_fails_before_anything_starts(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text('checkpoint = "c"\n[source]\npath = "in"\n[[queries]]\nname = "q"\nsinks = [{format = "console"}]\ntext = "RETURN COUNT(*) PATTERN A+ WITHIN"\n')
    with pytest.raises(QueryError) as err:
        PipelineConfig.from_file(p)
    assert err.value.problems[0].line == 1


def test_engine_is_auto_or_general(tmp_path: Path) -> None:
    body = 'checkpoint = "c"\n[source]\npath = "in"\n[[queries]]\nname = "q"\nsinks = [{format = "console"}]\ntext = "RETURN COUNT(*) PATTERN A+ WITHIN 5 s"\n'
    p = tmp_path / "ok.toml"
    p.write_text(body + 'engine = "general"\n')
    assert PipelineConfig.from_file(p).queries[0].engine == "general"
    p.write_text(body)
    assert PipelineConfig.from_file(p).queries[0].engine == "auto"
    p.write_text(body + 'engine = "columnar"\n')
    with pytest.raises(ConfigError, match="engine"):
        PipelineConfig.from_file(p)


def test_files_that_share_a_modification_time_are_counted(tmp_path: Path) -> None:
    """Spark reads new files in modification-time order; ties come in any order, so
    the pipeline warns (docs/SECURITY.md) when max_files_per_trigger splits them."""
    import os

    from greta_stream.spark.pipeline import tied_files

    for i, stamp in enumerate([100, 100, 100, 200, 300, 300]):
        (tmp_path / f"e{i}.jsonl").write_text("{}\n")
        os.utime(tmp_path / f"e{i}.jsonl", (stamp, stamp))
    (tmp_path / ".hidden").write_text("")
    assert tied_files(str(tmp_path)) == 5
    assert tied_files(str(tmp_path / "nope")) == 0


def test_future_bound_and_window_caps_are_pipeline_settings(tmp_path: Path) -> None:
    head = 'checkpoint = "c"\n'
    query = '[source]\npath = "in"\n[[queries]]\nname = "q"\nsinks = [{format = "console"}]\ntext = "RETURN COUNT(*) PATTERN A+ WITHIN 60 s SLIDE 1 s"\n'
    p = tmp_path / "p.toml"
    p.write_text(head + query)
    spec = PipelineConfig.from_file(p).queries[0].spec
    assert spec is not None and spec.max_future_s == 30 * 86_400
    p.write_text(head + "max_future_s = 60\nmax_windows_per_event = 59\n" + query)
    with pytest.raises(QueryError, match="max_windows_per_event = 59"):
        PipelineConfig.from_file(p)
    p.write_text(head + "max_future_s = 60\nmax_windows_per_event = 60\n" + query)
    spec = PipelineConfig.from_file(p).queries[0].spec
    assert spec is not None and spec.max_future_s == 60


def test_typos_and_missing_sinks_are_refused_with_their_place_and_the_known_keys(tmp_path: Path) -> None:
    p = tmp_path / "typo.yaml"
    p.write_text("source: {format: jsonl, path: in}\ncheckpoint: c\nlateness: 30\nqueries:\n"
                 "  - {name: q, text: 'RETURN COUNT(*) PATTERN A+ WITHIN 5 s', sink: {format: console}}\n"
                 "  - {name: r, text: 'RETURN COUNT(*) PATTERN A+ WITHIN 5 s', sinks: [{format: csv, path: o}]}\n")
    with pytest.raises(ConfigError) as err:
        PipelineConfig.from_file(p)
    message = str(err.value)
    assert "unknown key 'lateness' (did you mean 'lateness_s'?" in message
    assert "unknown key 'sink' in queries[0] (did you mean 'sinks'?" in message
    assert "queries[0].sinks is required" in message
    assert "queries[1].sinks[0].format" in message and "'jsonl'" in message


def test_a_query_needs_one_text_and_unique_names(tmp_path: Path) -> None:
    p = tmp_path / "two.toml"
    q = '[[queries]]\nname = "q"\nsinks = [{format = "console"}]\ntext = "RETURN COUNT(*) PATTERN A+ WITHIN 5 s"\n'
    p.write_text('checkpoint = "c"\n[source]\npath = "in"\n' + q + q)
    with pytest.raises(ConfigError, match="query names must be unique: q"):
        PipelineConfig.from_file(p)
    p.write_text('checkpoint = "c"\n[source]\npath = "in"\n[[queries]]\nname = "q"\nsinks = [{format = "console"}]\n')
    with pytest.raises(ConfigError, match="as text or as file"):
        PipelineConfig.from_file(p)


def test_unreadable_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the pipeline config"):
        PipelineConfig.from_file(tmp_path / "absent.yaml")
    p = tmp_path / "broken.yaml"
    p.write_text("source: [unclosed\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        PipelineConfig.from_file(p)
    p.write_text("source: {format: jsonl, path: in}\ncheckpoint: c\nqueries:\n"
                 "  - {name: q, file: absent.greta, sinks: [{format: console}]}\n")
    with pytest.raises(ConfigError, match="query 'q': cannot read its file"):
        PipelineConfig.from_file(p)


def test_distribute_over_reaches_the_run_spec_and_is_checked() -> None:
    doc = {"source": {"format": "jsonl", "path": "in"}, "checkpoint": "chk",
           "queries": [{"name": "q", "text": "RETURN TRENDS PATTERN Check C+ WHERE C.src = NEXT(C).dest WITHIN 1 hour",
                        "distribute_over": 5000, "sinks": [{"format": "jsonl", "path": "out"}]}]}
    cfg = PipelineConfig.from_dict(doc)
    assert cfg.queries[0].spec is not None and cfg.queries[0].spec.cet.distribute_over == 5000
    doc["queries"][0]["distribute_over"] = -1
    with pytest.raises(ConfigError, match="distribute_over"):
        PipelineConfig.from_dict(doc)
    doc["queries"][0].update(distribute_over=10, text="RETURN COUNT(*) PATTERN Check C+ WITHIN 1 hour")
    with pytest.raises(ConfigError, match="distribute_over"):
        PipelineConfig.from_dict(doc)
