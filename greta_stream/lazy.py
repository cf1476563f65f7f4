"""Names of a package loaded from their modules on first use (PEP 562): a process that needs one
module of greta-stream (pyspark's driver-side worker loading `spark.processor`; `greta-stream
--help`) loads that one only, not the engine, pandas and numba beneath the package's other names."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, tuple[str, ...]], space: dict[str, Any]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package` (whose globals are `space`): each name of `homes`
    (module -> its names) imported from its module when first read, then kept in `space`."""
    home = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home[name]), name)
        space[name] = value
        return value

    return __getattr__
