"""Compiler: AST -> GRETA templates, predicates, partitions, aggregates, panes.

Imports `greta_stream.query` only; knows nothing of the engine or Spark.
"""

from greta_stream.compiler.compiled import CompiledQuery, compile_query, format_query

__all__ = ["CompiledQuery", "compile_query", "format_query"]
