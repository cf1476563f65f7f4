"""Helpers shared by the benchmark scripts (run as scripts: this folder is on sys.path).

Child-process measurements, machine description and row comparison, kept in
one place so that every benchmark measures and reports the same way.
"""

from __future__ import annotations

import importlib.util
import math
import os
import platform
import resource
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def load_generators() -> Any:
    """``benchmarks/generators.py`` loaded from its path (it is not a package)."""
    spec = importlib.util.spec_from_file_location("greta_bench_generators", HERE / "generators.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peak_rss_bytes() -> int:
    """High-water mark of this process's RSS (``ru_maxrss`` is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def current_rss_bytes() -> int:
    """Current RSS from /proc (Linux); elsewhere the high-water mark so far."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return peak_rss_bytes()


def count_column(text: str) -> str:
    """The result column of the query's ``COUNT(*)``."""
    from greta_stream.query import parse
    from greta_stream.query.ast import Aggregate

    for item in parse(text).returns:
        if isinstance(item, Aggregate) and item.alias is None and item.func.upper() == "COUNT":
            return item.column
    raise ValueError("the query has no COUNT(*)")


def stop(proc: subprocess.Popen) -> None:
    """Kill the child if it still runs, reap it and close its pipe."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    proc.stdout.close()


def seconds(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:,.1f}"


def same_value(expected: Any, got: Any) -> bool:
    """As in tests/engine/test_differential.py: floats (AVG, float SUM) close, all else exact and same type."""
    if isinstance(expected, float):
        is_number = isinstance(got, (int, float)) and not isinstance(got, bool)
        return is_number and math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12)
    return type(expected) is type(got) and expected == got


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None



class Table:
    """A fixed-width text table printed row by row, as results arrive."""

    def __init__(self, columns: list[tuple[str, int]]) -> None:
        self.columns = columns

    def header(self) -> None:
        self._line([name for name, _ in self.columns])
        print("  ".join("-" * width for _, width in self.columns), flush=True)

    def row(self, cells: list[str]) -> None:
        self._line(cells)

    def _line(self, cells: list[str]) -> None:
        widths = [width for _, width in self.columns]
        parts = [cells[0].ljust(widths[0])]
        parts += [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        print("  ".join(parts).rstrip(), flush=True)



@dataclass
class Outcome:
    """What one child measurement gave: status "ok", "budget", "memory" (killed
    past the RSS limit), "skipped" or "error"."""

    status: str
    data: dict[str, Any] = field(default_factory=dict)
    message: str = ""


def git_state(root: Path = HERE.parent) -> str:
    """HEAD of the checkout at `root` and the files that differ from it (read-only git commands), for a
    benchmark's header."""
    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], cwd=root, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    changed = git("diff", "--name-only", "HEAD").split()
    return git("rev-parse", "--short", "HEAD") + (f" + uncommitted changes in {', '.join(changed)}" if changed else "")
