"""Compiler: AST -> GRETA templates, predicates, partitions, aggregates, panes.

Imports `greta_stream.query` only; knows nothing of the engine or Spark.
"""

from greta_stream.compiler.compiled import CompiledQuery, compile_query, format_query
from greta_stream.compiler.limits import LIMITS, Limits, check_limits

__all__ = ["LIMITS", "CompiledQuery", "Limits", "check_limits", "compile_query", "format_query"]
