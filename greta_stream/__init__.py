"""greta-stream: real-time event trend aggregation (GRETA) without building trends.

Layers, imports flowing one way:
    query -> compiler -> engine -> cet -> runtime -> connectors -> spark
`errors` may be imported anywhere; the HTTP service (`greta_service`) uses
the public API only. Start with `evaluate` (a finite input) or `open_stream`
(micro-batches); both build a `RunSpec` and run it through one runner
interface (`greta_stream.runtime`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from greta_stream.lazy import lazy_names

if TYPE_CHECKING:
    from greta_stream.api import compile_query, evaluate, open_stream
    from greta_stream.cet import CetConfig, TrendExtractor
    from greta_stream.compiler import Limits
    from greta_stream.engine import DeadLetter, Engine, FieldNames
    from greta_stream.errors import ConfigError, QueryError
    from greta_stream.runtime import ResultRows, Runner, RunSpec
    from greta_stream.runtime.multi import MultiRunner
    from greta_stream.runtime.plan import plan_units
    from greta_stream.runtime.queryset import QuerySet, run_fingerprint

# each name loads its module on first use (`lazy.py`)
__getattr__ = lazy_names(__name__, {
    "greta_stream.api": ("compile_query", "evaluate", "open_stream"),
    "greta_stream.cet": ("CetConfig", "TrendExtractor"),
    "greta_stream.compiler": ("Limits",),
    "greta_stream.engine": ("DeadLetter", "Engine", "FieldNames"),
    "greta_stream.errors": ("ConfigError", "QueryError"),
    "greta_stream.runtime": ("ResultRows", "Runner", "RunSpec"),
    "greta_stream.runtime.multi": ("MultiRunner",),
    "greta_stream.runtime.plan": ("plan_units",),
    "greta_stream.runtime.queryset": ("QuerySet", "run_fingerprint"),
}, globals())

__version__ = "0.1.0"

__all__ = [
    "CetConfig", "ConfigError", "DeadLetter", "Engine", "FieldNames", "Limits", "MultiRunner", "QueryError", "QuerySet",
    "ResultRows", "RunSpec", "Runner",
    "TrendExtractor", "compile_query", "evaluate", "open_stream", "plan_units", "run_fingerprint", "__version__",
]
