"""Suite-wide options.

`GRETA_HYPOTHESIS_SCALE=K` multiplies every property test's `max_examples`
by K (a deeper search than the default suite's, e.g. overnight)::

    GRETA_HYPOTHESIS_SCALE=20 .venv/bin/python -m pytest tests/engine tests/cet -m "not spark"
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import settings

SCALE = os.environ.get("GRETA_HYPOTHESIS_SCALE", "")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    if not SCALE:
        return
    k = float(SCALE)
    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and getattr(test, "is_hypothesis_test", False):
            test._hypothesis_internal_use_settings = settings(own, max_examples=max(1, int(own.max_examples * k)))
