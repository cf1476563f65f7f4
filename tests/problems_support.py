"""`evaluate` for the suite's tests over generated input (tests are not a package: imported by
name from any folder, tests/ being on sys.path through its conftest.py; tests/cet loads
tests/engine/test_differential.py by path, so a helper beside it would not be found).

`evaluate` is `greta_stream.evaluate` for tests whose input is generated
(hypothesis strategies, seeded random streams). Such input now and then shows
what a user's would show as a mistake: no event of a query's types, or an
attribute that no event of a type carries. `greta_stream.evaluate` then lists
each problem in `rows.problems` and issues it as a `UserWarning` (its
contract; tests/runtime/test_problems.py checks the wording). Here every run
checks that contract and keeps those warnings out of the suite's summary,
where they said nothing about the test; any other warning is issued as it came.
"""

from __future__ import annotations

import warnings
from typing import Any

import greta_stream
from greta_stream.runtime import ResultRows


def evaluate(*args: Any, **kwargs: Any) -> ResultRows:
    """`greta_stream.evaluate(*args, **kwargs)`, each problem it warns of checked against `rows.problems`."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = greta_stream.evaluate(*args, **kwargs)
    problems = [w for w in caught if w.category is UserWarning and str(w.message) in rows.problems]
    assert [str(w.message) for w in problems] == list(rows.problems), [str(w.message) for w in caught]
    for w in caught:
        if not any(w is p for p in problems):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    return rows
