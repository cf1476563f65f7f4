"""greta-stream: real-time event trend aggregation (GRETA) without building trends.

Layers, imports flowing one way:
    query -> compiler -> engine -> (cet, connectors, spark) -> service
`errors` may be imported anywhere. Start with `compile_query` and `evaluate`.
"""

from greta_stream.api import ResultRows, compile_query, evaluate
from greta_stream.cet import CetConfig, TrendExtractor
from greta_stream.errors import QueryError

__version__ = "0.1.0"

__all__ = ["CetConfig", "QueryError", "ResultRows", "TrendExtractor", "compile_query", "evaluate", "__version__"]
