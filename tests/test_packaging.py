"""The wheel works on its own: built from this checkout, installed into a fresh
virtualenv, run from a folder outside the checkout.

The fresh virtualenv gets the package from the wheel only (`--no-deps`); its
dependencies come from the project's virtualenv through a `.pth` file, so
nothing is downloaded. The commands of a newcomer's first minutes must work
there: `--version`, `evaluate` on a small file, `demo --help`, and the
package data they need (the grammar, the demo's queries and pipeline, the
Spark log config).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from greta_stream import __version__, evaluate

ROOT = Path(__file__).resolve().parents[1]
BUILD_BACKEND = (77,)  # [build-system] requires setuptools>=77 (PEP 639 license)


def _setuptools_version() -> tuple[int, ...]:
    out = subprocess.run([sys.executable, "-c", "import setuptools; print(setuptools.__version__)"],
                         capture_output=True, text=True, timeout=60)
    return tuple(int(p) for p in out.stdout.strip().split(".")[:2] if p.isdigit())


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, subprocesses: None) -> Path:
    """A fresh virtualenv with the wheel of this checkout; returns its bin folder."""
    if _setuptools_version() < BUILD_BACKEND:
        pytest.skip(f"the project venv's setuptools {_setuptools_version()} cannot build the wheel (needs >=77): "
                    "`make install` brings it (dev extra)")
    tmp = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp / "dist"), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp / "dist").glob("greta_stream-*.whl")
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, timeout=60, check=True).stdout.strip())
    # installed before the .pth exists: pip must not see the project venv's (editable) greta-stream
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                              "--no-index", str(wheel)], capture_output=True, text=True, timeout=300, env=_clean_env())
    assert install.returncode == 0, install.stdout + install.stderr
    assert (site / "greta_stream" / "__init__.py").is_file(), install.stdout
    # the project's dependencies, after the venv's own site-packages (the wheel's package comes first)
    (site / "_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env_dir / "bin"


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "GRETA_JVM_CACHE")}


def run_in(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A command of the fresh virtualenv, from `cwd`, with nothing of the checkout on its path."""
    env = _clean_env()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["XDG_CACHE_HOME"] = str(cwd / "cache")
    return subprocess.run(list(args), capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_the_package_comes_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    res = run_in(installed, tmp_path, "python", "-c", (
        "import greta_stream, greta_stream.demo as d, greta_stream.jvm as j, pathlib;"
        "print(greta_stream.__file__); print(d.DEFAULT_CONFIG.is_file(), sorted(p.name for p in d.CONFIGS.glob('*.greta')));"
        "print(pathlib.Path(greta_stream.__file__).with_name('spark').joinpath('log4j2.properties').is_file());"
        "from greta_stream.demo.producer import DEFAULT_SAMPLES as s;"
        "print(sorted(p.parent.name for p in s.glob('*/events.jsonl')));"
        "print(j.cache_dir())"))
    assert res.returncode == 0, res.stderr
    where, data, log_config, samples, jvm_cache = res.stdout.splitlines()
    assert samples == "['cluster', 'stock', 'traffic']"  # what the demo's producer replays
    assert Path(where).is_relative_to(installed.parent) and not Path(where).is_relative_to(ROOT)
    assert data == "True ['q1_stock.greta', 'q2_cluster.greta', 'q3_traffic.greta']" and log_config == "True"
    assert jvm_cache == str(tmp_path / "cache" / "greta-stream" / "jvm")  # no checkout beside an installed wheel


def test_version_evaluate_and_demo_help_run_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    res = run_in(installed, tmp_path, "greta-stream", "--version")
    assert res.returncode == 0 and res.stdout.strip() == f"greta-stream {__version__}", res.stderr
    events = [{"type": "A", "time": 1, "attr": 5}, {"type": "B", "time": 2}, {"type": "A", "time": 3, "attr": 6},
              {"type": "A", "time": 4, "attr": 4}, {"type": "B", "time": 7}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    query = "RETURN COUNT(*), AVG(A.attr) PATTERN (SEQ(A+, B))+ WITHIN 100 seconds"
    res = run_in(installed, tmp_path, "greta-stream", "evaluate", "-q", query, "-e", "events.jsonl", "--no-progress")
    assert res.returncode == 0, res.stderr
    assert [json.loads(line) for line in res.stdout.splitlines()] == evaluate(query, events)
    assert json.loads(res.stdout)["count"] == 11
    res = run_in(installed, tmp_path, "greta-stream", "demo", "--help")
    assert res.returncode == 0 and "--workdir" in res.stdout, res.stderr


def test_jvm_jars_are_found_in_the_user_cache_without_a_checkout_cache(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    from greta_stream import jvm

    monkeypatch.delenv("GRETA_JVM_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    checkout = tmp_path / "checkout" / ".cache" / "jvm"
    monkeypatch.setattr(jvm, "CHECKOUT_CACHE", checkout)
    user = tmp_path / "xdg" / "greta-stream" / "jvm"
    assert jvm.cache_dir() == user and jvm.jars("kafka") == []
    (user / "kafka").mkdir(parents=True)
    (user / "kafka" / "kafka-clients.jar").write_bytes(b"")
    assert jvm.jars("kafka") == []  # no .stamp: a fetch did not finish
    (user / "kafka" / ".stamp").write_text("x")
    assert jvm.jars("kafka") == [user / "kafka" / "kafka-clients.jar"]
    (tmp_path / "checkout" / "pyproject.toml").parent.mkdir(parents=True)
    (tmp_path / "checkout" / "pyproject.toml").write_text("")
    assert jvm.cache_dir() == checkout  # a checkout's own cache first (made by its install)
    assert jvm.spark_kafka_jars("4.2.0") == []
    connector = checkout / "spark-kafka" / "4.2.0"
    (connector / "jars").mkdir(parents=True)
    (connector / "jars" / "spark-sql-kafka.jar").write_bytes(b"")
    assert jvm.spark_kafka_jars("4.2.0") == []  # no .stamp: Spark's fetch did not finish
    (connector / ".stamp").write_text("4.2.0")
    assert jvm.spark_kafka_jars("4.2.0") == [connector / "jars" / "spark-sql-kafka.jar"]
    monkeypatch.setenv("GRETA_JVM_CACHE", str(tmp_path / "elsewhere"))
    assert jvm.cache_dir() == tmp_path / "elsewhere"  # the environment over both


@pytest.mark.usefixtures("subprocesses")
def test_make_run_installs_no_system_package() -> None:
    """The main job needs no browser and no root: apt belongs to `setup-system`, which only `make test` calls."""
    root = Path(__file__).resolve().parents[1]

    def plan(target: str) -> str:
        return subprocess.run(["make", "-n", "-B", target], cwd=root, capture_output=True, text=True,
                              check=True).stdout

    assert "setup_system" not in plan("run")
    assert "setup_system" not in plan("install")
    assert "setup_system" in plan("test")


_BUILD_EDITABLE = """
import json, sys, warnings
import setuptools.build_meta as backend
wheel_dir, report = sys.argv[1:3]  # read first: the backend rewrites sys.argv
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    backend.build_editable(wheel_dir)
with open(report, "w") as out:
    json.dump([f"{w.category.__name__}: {str(w.message).strip().splitlines()[0]}" for w in caught], out)
"""


@pytest.mark.parametrize("project", [".", "service"])
@pytest.mark.usefixtures("subprocesses")
def test_editable_install_prints_no_banner(project: str, tmp_path: Path) -> None:
    """`make install` (`pip install -e`) shows a newcomer no setuptools banner ("!!" and a box of
    stars): the PEP 517 editable build of each distribution, as pip calls it, issues no warning."""
    if _setuptools_version() < BUILD_BACKEND:
        pytest.skip("the project venv's setuptools cannot build the wheel (needs >=77): `make install` brings it")
    (tmp_path / "dist").mkdir()
    res = subprocess.run([sys.executable, "-c", _BUILD_EDITABLE, str(tmp_path / "dist"), str(tmp_path / "warnings.json")],
                         cwd=ROOT / project, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads((tmp_path / "warnings.json").read_text()) == []
    assert "!!" not in res.stderr and "****" not in res.stderr, res.stderr
