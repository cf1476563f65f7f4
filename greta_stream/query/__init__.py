"""Query language: grammar, parser, AST with spans, semantic analysis.

Imports only `greta_stream.errors`; nothing here knows about the compiler,
the engine or Spark.
"""

from greta_stream.query.analyzer import analyze, parse_and_analyze
from greta_stream.query.ast import Query
from greta_stream.query.parser import parse

__all__ = ["Query", "analyze", "parse", "parse_and_analyze"]
