"""The benchmark scripts run for real, as a user runs them: `bench(script, *args)` is their stdout (a test
that uses it is marked `subprocess`: tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bench(subprocesses: None) -> Callable[..., str]:
    def run(script: str, *args: str) -> str:
        return subprocess.run([sys.executable, str(BENCHMARKS / script), *args],
                              capture_output=True, text=True, timeout=600, check=True).stdout

    return run
