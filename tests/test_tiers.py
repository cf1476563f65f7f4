"""The test tiers (tests/conftest.py): a test's markers come from the fixtures it uses, `make test-fast`
leaves out what the suite says it leaves out, and a test of the fast tier that starts a process fails."""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiers(request: pytest.FixtureRequest) -> ModuleType:
    """The suite's conftest (tests/conftest.py), as pytest loaded it."""
    path = str(Path(__file__).with_name("conftest.py"))
    return next(p for p in request.config.pluginmanager.get_plugins() if getattr(p, "__file__", None) == path)


def test_make_test_fast_leaves_out_the_markers_of_the_fast_tier(tiers: ModuleType, request: pytest.FixtureRequest) -> None:
    (line,) = [line for line in (ROOT / "Makefile").read_text().splitlines() if "-m \"not spark" in line]
    expression = re.search(r'-m "([^"]+)"', line).group(1)  # type: ignore[union-attr]
    assert expression.split(" and ") == [f"not {m}" for m in tiers.FAST_TIER_LEAVES_OUT]
    registered = {line.split(":")[0] for line in request.config.getini("markers")}
    assert {m for markers in tiers.MARKERS_OF_FIXTURES.values() for m in markers} | set(tiers.FAST_TIER_LEAVES_OUT) <= registered


class Item:
    """What `marked_by_use` reads of a collected test."""

    def __init__(self, *fixtures: str, marked: tuple[str, ...] = ()) -> None:
        self.fixturenames = list(fixtures)
        self.markers = list(marked)

    def get_closest_marker(self, name: str) -> Any:  # noqa: ANN401
        return name if name in self.markers else None

    def add_marker(self, name: str) -> None:
        self.markers.append(name)


def test_the_fixtures_a_test_uses_set_its_markers(tiers: ModuleType) -> None:
    items = [Item("tmp_path"), Item("subprocesses", "tmp_path"), Item("spark"), Item("main_job", "subprocesses"),
             Item("standalone_cluster", "subprocesses"), Item("spark", marked=("spark",))]
    tiers.marked_by_use(items)
    assert [item.markers for item in items] == [[], ["subprocess"], ["spark"], ["subprocess", "spark"],
                                                ["subprocess", "spark"], ["spark"]]


@pytest.fixture
def starts_a_process(subprocesses: None) -> str:
    return subprocess.run([sys.executable, "-c", "print('started')"], capture_output=True, text=True, check=True).stdout


def test_a_fixture_that_starts_a_process_marks_the_test_that_uses_it(starts_a_process: str,
                                                                     request: pytest.FixtureRequest) -> None:
    assert starts_a_process == "started\n"
    assert request.node.get_closest_marker("subprocess") is not None


def test_a_fast_test_that_starts_a_process_fails_saying_how_to_mark_it(tiers: ModuleType,
                                                                       request: pytest.FixtureRequest) -> None:
    assert tiers.in_fast_tier(request.node)  # this test: it runs with processes refused
    with pytest.raises(tiers.ProcessInFastTier, match=r"test_tiers.py::.*started a process.*usefixtures\(\"subprocesses\"\)"):
        subprocess.run([sys.executable, "--version"], capture_output=True)
    with pytest.raises(tiers.ProcessInFastTier, match="os.system"):
        os.system("true")  # noqa: S605
    with pytest.raises(tiers.ProcessInFastTier):
        multiprocessing.get_context("spawn").Process(target=print).start()
    with pytest.raises(tiers.ProcessInFastTier):
        multiprocessing.get_context("fork").Process(target=print).start()


def test_the_nightly_tier_is_skipped_saying_how_to_run_it(tiers: ModuleType) -> None:
    items = [Item("tmp_path"), Item("bench", marked=("nightly", "slow"))]
    tiers.skip_nightly(items)
    assert items[0].markers == []
    assert items[1].markers == ["nightly", "slow", tiers.NIGHTLY_SKIP]
    assert "make test-nightly" in tiers.NIGHTLY_SKIP.kwargs["reason"]
    (line,) = [line for line in (ROOT / "Makefile").read_text().splitlines() if "GRETA_NIGHTLY=1" in line]
    assert line.strip().endswith('pytest -q -m nightly')


def test_make_test_runs_two_processes_a_module_in_one(tiers: ModuleType, request: pytest.FixtureRequest) -> None:
    """`make test` runs pytest-xdist's `--dist loadgroup`: a test's group is its module (its module fixtures
    start once), and the modules that use the main job's output share one."""
    recipe = (ROOT / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "pytest -q -n 2 --dist loadgroup" in recipe
    ids = ["tests/engine/test_a.py::test_x", "tests/engine/test_a.py::test_y[1-2]", "tests/spark/test_b.py::T::test_z",
           "tests/test_cli.py::t", "tests/test_readme.py::t[a::b]"]
    assert [tiers.group_of(n) for n in ids] == ["tests/engine/test_a.py", "tests/engine/test_a.py",
                                                "tests/spark/test_b.py", "main-job", "main-job"]
    users = {i.nodeid.split("::")[0] for i in request.session.items if "main_job" in getattr(i, "fixturenames", ())}
    assert users <= set(tiers.SHARED_GROUPS)  # every module of the main job's output in its group


@pytest.mark.usefixtures("subprocesses")
def test_under_two_workers_every_module_runs_on_one() -> None:
    """The grouping takes effect: `-n 2 --dist loadgroup` over a folder of several modules runs each
    module's tests on one worker (and both workers get some)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider",
                           "tests/query"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    ran = re.findall(r"^\[(gw\d)\] .*?PASSED (tests/[^:]+)::", done.stdout, re.MULTILINE)
    workers: dict[str, set[str]] = {}
    for worker, module in ran:
        workers.setdefault(module, set()).add(worker)
    assert len(workers) >= 3 and all(len(w) == 1 for w in workers.values()), workers
    assert {w for ws in workers.values() for w in ws} == {"gw0", "gw1"}, workers
