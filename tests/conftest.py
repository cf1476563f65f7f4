"""Suite-wide options, the one Spark fixture, the one run of the main job and the warm-up started early,
and the tiers: what a test uses sets its markers.

A test that starts a process (the CLI, a wheel build, a virtualenv, `make`) asks for the
`subprocesses` fixture, itself or through a fixture that does (`main_job`, `warm_up`, a service,
a broker): it gets the `subprocess` marker, which `make test-fast` leaves out. A test that needs a
JVM (`spark`, `standalone_cluster`, `main_job`) gets `spark`. A test in the fast tier (none of
`FAST_TIER_LEAVES_OUT`) that starts a process anyway fails, saying so (`_no_processes`).

A test marked `nightly` (a benchmark's full run through Spark or the service, minutes each, or a
second look at a topology the default suite already runs) is skipped, saying so, unless
`GRETA_NIGHTLY=1` (`make test-nightly`): the default suite stays the one CI runs, and each of those
benchmark scripts keeps quicker smoke tests in it.

`GRETA_HYPOTHESIS_SCALE=K` multiplies every property test's `max_examples`
by K (a deeper search than the default suite's, e.g. overnight)::

    GRETA_HYPOTHESIS_SCALE=20 .venv/bin/python -m pytest tests/engine tests/cet -m "not spark"
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import settings

# The Spark JVMs that tests start in subprocesses (each `greta-stream run`, service, README command) compile
# with C1 alone: such a JVM lives seconds to a minute, where C2's compiles cost more than they gain (a tiny
# `run --once`: 25-27 s -> 19-21 s, idle machine). The suite's own session (`spark`, below) lives the whole
# run and keeps the JVM's defaults, as a user's runs do. Set SPARK_SUBMIT_OPTS to run the suite otherwise.
_SUBMIT_OPTS = os.environ.get("SPARK_SUBMIT_OPTS")
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")

SCALE = os.environ.get("GRETA_HYPOTHESIS_SCALE", "")
NIGHTLY = os.environ.get("GRETA_NIGHTLY", "") not in ("", "0")
ROOT = Path(__file__).resolve().parents[1]
WARM_UP_TEST = "tests/test_warm_up.py::test_after_warm_up_no_run_compiles_a_kernel"


class WarmUp(NamedTuple):
    """`greta-stream warm-up` into an empty numba cache, started once when the suite starts: it compiles every
    kernel (2.5-3.5 minutes of one core) at a lower priority while the other tests run, and its test, near
    the end, finds it done. Niceness 5: beside the suite's four or so busy processes it gets about a sixth of
    a core, and is done within the suite's first 15 minutes (at 19, the lowest, it got CPU only where the
    suite left some: in a run on a machine loaded by other work, its test waited 222 s for it).

    Under pytest-xdist the controller starts it (`pytest_xdist_node_collection_finished`) in a folder it
    gives every worker (`pytest_configure_node`): the worker that runs the test reads the outcome from
    there, and no other worker compiles the kernels a second time."""

    folder: Path  # `numba` (the cache), `out`, `err`, and `rc` once the command is done

    @property
    def cache(self) -> Path:
        return self.folder / "numba"

    @classmethod
    def start(cls, folder: Path | None = None) -> tuple[WarmUp, subprocess.Popen[bytes]]:
        """Started into `folder` (a new one: None); the process is the caller's to close (`close_warm_up`)."""
        import shlex
        import tempfile

        folder = folder or Path(tempfile.mkdtemp(prefix="greta-warm-up-"))
        env = dict(os.environ, NUMBA_CACHE_DIR=str(folder / "numba"))
        # the kernels only: the class archive is the one `make install` built (tests/spark/test_classes.py)
        at, python = shlex.quote(str(folder)), shlex.quote(sys.executable)
        command = (f"nice -n 5 {python} -m greta_stream warm-up --no-jvm > {at}/out 2> {at}/err; "
                   f"echo $? > {at}/rc.part && mv {at}/rc.part {at}/rc")
        process = subprocess.Popen(["sh", "-c", command], cwd=ROOT, env=env, start_new_session=True)
        return cls(folder), process

    def outcome(self, timeout: float) -> tuple[int, str]:
        """(exit code, stderr) once the command is done; TimeoutError after `timeout` seconds."""
        import time

        rc, deadline = self.folder / "rc", time.monotonic() + timeout
        while not rc.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"greta-stream warm-up not done in {timeout} s ({self.folder})")
            time.sleep(1)
        return int(rc.read_text()), (self.folder / "err").read_text()


def close_warm_up(warm_up: WarmUp, process: subprocess.Popen[bytes] | None) -> None:
    """Stop the warm-up if it still runs (its process group), and remove its folder."""
    import shutil
    import signal

    if process is not None:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    shutil.rmtree(warm_up.folder, ignore_errors=True)


_WARM_UP = pytest.StashKey[tuple[WarmUp, "subprocess.Popen[bytes] | None"]]()  # started by this process
_WARM_UP_FOLDER = "greta_warm_up"  # the key of the controller's folder in each worker's `workerinput`
_WARM_UP_FOLDER_KEY = pytest.StashKey[Path]()  # that folder, on the controller


@pytest.fixture
def warm_up(request: pytest.FixtureRequest, subprocesses: None) -> Iterator[WarmUp]:
    """The warm-up started with the suite (by this process or, under pytest-xdist, by the controller), or
    now, for a test run alone; its folder is removed after."""
    config = request.config
    given = getattr(config, "workerinput", {}).get(_WARM_UP_FOLDER)
    started = config.stash.get(_WARM_UP, None) or ((WarmUp(Path(given)), None) if given else WarmUp.start())
    config.stash[_WARM_UP] = started
    try:
        yield started[0]
    finally:
        close_warm_up(*started)
        del config.stash[_WARM_UP]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # noqa: ANN401  (pytest-xdist, on the controller)
    import tempfile

    config = node.config
    if config.stash.get(_WARM_UP_FOLDER_KEY, None) is None:
        config.stash[_WARM_UP_FOLDER_KEY] = Path(tempfile.mkdtemp(prefix="greta-warm-up-"))
    node.workerinput[_WARM_UP_FOLDER] = str(config.stash[_WARM_UP_FOLDER_KEY])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:  # noqa: ANN401  (on the controller)
    config = node.config
    if WARM_UP_TEST in ids and config.stash.get(_WARM_UP, None) is None:  # selected: started once, for every worker
        config.stash[_WARM_UP] = WarmUp.start(config.stash[_WARM_UP_FOLDER_KEY])


def pytest_collection_finish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: the controller starts it
        return
    if any(item.nodeid == WARM_UP_TEST for item in session.items):  # selected, after every deselection
        session.config.stash[_WARM_UP] = WarmUp.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    started = session.config.stash.get(_WARM_UP, None)
    if started is not None:  # its test did not run (a stop at the first failure, an interrupt): nothing left behind
        close_warm_up(*started)
    folder = session.config.stash.get(_WARM_UP_FOLDER_KEY, None)
    if folder is not None:  # the controller's, started or not
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    if _seconds and not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller, which saw every report
        table = module_seconds()
        table.update({k: max(1, round(v)) for k, v in _seconds.items()})  # a partial run updates its modules
        MODULE_SECONDS.write_text(json.dumps(dict(sorted(table.items())), indent=0) + "\n")


# What `make test-fast` leaves out (its -m expression, Makefile): a test with none of these starts no process.
FAST_TIER_LEAVES_OUT = ("spark", "kafka", "service", "browser", "slow", "subprocess")
# The markers a fixture gives every test that uses it, itself or through another fixture (pytest's closure).
MARKERS_OF_FIXTURES = {
    "subprocesses": ("subprocess",),
    "spark": ("spark",),
    "standalone_cluster": ("spark",),
    "main_job": ("spark",),
}


SUBPROCESS_MARKER = ("subprocess: starts a process (the CLI, a wheel build, a virtualenv, make): set by the "
                     "`subprocesses` fixture, left out of make test-fast")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", SUBPROCESS_MARKER)  # beside the fixture that sets it (the others: pyproject.toml)


@pytest.fixture(scope="session")  # session fixtures that start processes ask for it too
def subprocesses() -> None:
    """Asked for by a test (or a fixture) that starts a process: the CLI, a wheel build, a virtualenv,
    `make`, a JVM. It gives the test the `subprocess` marker (`pytest_collection_modifyitems`), which
    keeps it out of `make test-fast`; without it such a test fails (`_no_processes`). Use it as
    `@pytest.mark.usefixtures("subprocesses")` on the test, or as a parameter of a fixture."""


def marked_by_use(items: list[pytest.Item]) -> None:
    """Each test's markers from the fixtures it uses (`MARKERS_OF_FIXTURES`)."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, markers in MARKERS_OF_FIXTURES.items():
            if fixture in used:
                for marker in markers:
                    if item.get_closest_marker(marker) is None:
                        item.add_marker(marker)


class ProcessInFastTier(RuntimeError):
    """A test of the fast tier started a process."""


@contextlib.contextmanager
def _no_processes(nodeid: str) -> Iterator[None]:
    """Every way of starting a process (subprocess, os.system, os.posix_spawn, fork, multiprocessing's
    spawn) raises `ProcessInFastTier` for the test `nodeid` while in this block."""

    def refuse(how: str) -> Any:
        def refused(*args: Any, **kwargs: Any) -> Any:
            argv = args[1] if how == "subprocess" and len(args) > 1 else args[:1]
            raise ProcessInFastTier(
                f"{nodeid} started a process ({how}: {argv!r}) but is in the fast tier (none of the markers "
                f"{', '.join(FAST_TIER_LEAVES_OUT)}): have it ask for the `subprocesses` fixture "
                "(@pytest.mark.usefixtures(\"subprocesses\")), which marks it `subprocess`, out of `make test-fast`")
        return refused

    import _posixsubprocess

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(subprocess.Popen, "_execute_child", refuse("subprocess"))
        mp.setattr(_posixsubprocess, "fork_exec", refuse("fork_exec"))
        for name in ("system", "posix_spawn", "posix_spawnp", "fork", "forkpty"):
            if hasattr(os, name):
                mp.setattr(os, name, refuse(f"os.{name}"))
        yield


def in_fast_tier(item: pytest.Item) -> bool:
    return not any(item.get_closest_marker(m) for m in FAST_TIER_LEAVES_OUT)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """A test of the fast tier runs (its fixtures' setup and teardown too) with processes refused."""
    if not in_fast_tier(item):
        return (yield)
    with _no_processes(item.nodeid):
        return (yield)


NIGHTLY_SKIP = pytest.mark.skip(reason="nightly tier (a benchmark's full run, a second look at a topology): "
                                        "GRETA_NIGHTLY=1 or make test-nightly")


def skip_nightly(items: list[Any]) -> None:
    """Skip the tests marked `nightly`, saying how to run them."""
    for item in items:
        if item.get_closest_marker("nightly"):
            item.add_marker(NIGHTLY_SKIP)


# modules whose tests share what one process may hold at a time: the main job's output (out/q1_stock, the
# `main_job` fixture) and the README walkthrough's port 8000
SHARED_GROUPS = {"tests/test_cli.py": "main-job", "tests/test_readme.py": "main-job"}


def group_of(nodeid: str) -> str:
    """A test's group under pytest-xdist (`make test` runs `-n 2 --dist loadgroup`): its module, so that its
    module fixtures (a service, a stream) start once, or the group of `SHARED_GROUPS` that holds its module."""
    path = module_of(nodeid)
    return SHARED_GROUPS.get(path, path)


def module_of(nodeid: str) -> str:
    """The test module of a test id (`tests/x/test_y.py`)."""
    return nodeid.split("::")[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:  # noqa: ANN401
    """`--dist loadgroup` by `group_of`, every group's tests on one worker. pytest-xdist's own loadgroup
    reads groups from `xdist_group` marks through test ids it rewrites on the workers, which pytest 9.2's
    structured test ids no longer allow: the marks were set and ignored, a module's tests ran on both workers
    (its module fixtures started twice, `SHARED_GROUPS` at the same time). The grouping here reads the ids
    as they are."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # groups go out in the order of the workers' collection: `by_cost`

    class ByGroup(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return ByGroup(config, log)


# Seconds each test module took in a full run (two workers), `make test`'s order of groups: the costliest first,
# so that the last group to start is a short one (by number of tests, pytest-xdist's own order, a module of one
# long test went last and ran alone at the end). A run with GRETA_MODULE_SECONDS=write updates the modules it ran.
MODULE_SECONDS = ROOT / "tests" / "module_seconds.json"


def module_seconds() -> dict[str, float]:
    """`MODULE_SECONDS` as a dict (empty when the file is not there)."""
    return json.loads(MODULE_SECONDS.read_text()) if MODULE_SECONDS.exists() else {}


def by_cost(items: list[pytest.Item]) -> None:
    """Order `items` by group, the groups by their seconds in `MODULE_SECONDS` (a module not there: 1 s),
    the costliest first; a group's tests keep their order."""
    seconds = module_seconds()
    cost: dict[str, float] = {}
    for path in sorted({module_of(item.nodeid) for item in items}):
        group = group_of(path)
        cost[group] = cost.get(group, 0.0) + seconds.get(path, 1)
    # every worker must order alike (pytest-xdist compares their collections): ties by name
    rank = {g: k for k, g in enumerate(sorted(cost, key=lambda g: (-cost[g], g)))}
    items.sort(key=lambda item: rank[group_of(item.nodeid)])


_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("GRETA_MODULE_SECONDS") == "write":
        path = module_of(report.nodeid)
        _seconds[path] = _seconds.get(path, 0.0) + report.duration


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    marked_by_use(items)
    if os.environ.get("PYTEST_XDIST_WORKER") and config.getvalue("loadgroup"):
        by_cost(items)
    if not NIGHTLY:
        skip_nightly(items)
    if not SCALE:
        return
    k = float(SCALE)
    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and getattr(test, "is_hypothesis_test", False):
            test._hypothesis_internal_use_settings = settings(own, max_examples=max(1, int(own.max_examples * k)))


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for every test that asks (Spark, CET, Kafka), few shuffle partitions."""
    from greta_stream.spark.session import get_session

    started_with = os.environ.pop("SPARK_SUBMIT_OPTS", None)  # this JVM lives the whole run: C2 pays here
    if _SUBMIT_OPTS is not None:
        os.environ["SPARK_SUBMIT_OPTS"] = _SUBMIT_OPTS
    try:
        session = get_session("local[2]", app_name="greta-stream-tests", shuffle_partitions=2)
    finally:
        if started_with is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = started_with
    yield session
    session.stop()



class MainJob(NamedTuple):
    """One run of the main job: how it was started, what it printed, where its rows are."""

    by_make: bool
    stdout: str
    stderr: str
    output: Path


@pytest.fixture(scope="session")
def main_job(tmp_path_factory: pytest.TempPathFactory, subprocesses: None) -> MainJob:
    """The main job (Q1 on local Spark over the bundled sample stream, every window), run once for the tests
    that check it: by `make run` itself when the virtualenv is current (as on a fresh clone after `make
    install`), else by the command `make run` runs (`make` would reinstall the virtualenv under the tests)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    if subprocess.run(["make", "-q", ".venv/bin/greta-stream"], cwd=ROOT).returncode == 0:
        done = subprocess.run(["make", "run"], cwd=ROOT, env=env, text=True, capture_output=True, timeout=600)
        output = ROOT / "out/q1_stock"
    else:
        output = tmp_path_factory.mktemp("main_job") / "out"
        done = subprocess.run([sys.executable, "-m", "greta_stream", "run", "--query", "configs/q1_stock.greta",
                               "--input", "samples/stock", "--output", str(output), "--checkpoint",
                               str(output.parent / "chk"), "--lateness", "10", "--once", "--flush-at-end"],
                              cwd=ROOT, env=env, text=True, capture_output=True, timeout=600)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return MainJob(output == ROOT / "out/q1_stock", done.stdout, done.stderr, output)


@pytest.fixture(scope="session")
def standalone_cluster(subprocesses: None) -> Iterator[Any]:
    """One Spark standalone cluster (a master, two workers on 127.0.0.1) for the tests that run a job on one."""
    from greta_stream.testing.cluster import StandaloneCluster

    with StandaloneCluster(workers=2) as cluster:
        yield cluster
