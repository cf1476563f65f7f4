"""Error types shared by every layer.

`QueryError` carries one or more `QueryProblem`s, each pointing at the query
text (line, column, excerpt). Runtime problems with single events never raise:
they become dead letters (see `greta_stream.engine.ingest`). This module
imports nothing from the package, so any layer may import it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QueryProblem:
    """One problem in a query text, 1-based line and column."""

    msg: str
    line: int
    column: int
    end_column: int | None = None

    def render(self, text: str | None = None) -> str:
        head = f"{self.msg} (line {self.line}, column {self.column})"
        if not text:
            return head
        lines = text.splitlines()
        if not 1 <= self.line <= len(lines):
            return head
        src = lines[self.line - 1]
        width = max(1, (self.end_column or self.column + 1) - self.column)
        width = min(width, max(1, len(src) - self.column + 1))
        return f"{head}\n  {src}\n  {' ' * (self.column - 1)}{'^' * width}"

    def to_dict(self) -> dict[str, object]:
        return {"msg": self.msg, "line": self.line, "column": self.column}


class GretaError(Exception):
    """Base class of every error greta-stream raises on purpose."""


class QueryError(GretaError, ValueError):
    """A query that does not parse or does not make sense. Nothing is run."""

    def __init__(self, problems: list[QueryProblem], text: str | None = None):
        self.problems = list(problems)
        self.text = text
        super().__init__("\n".join(p.render(text) for p in self.problems))

    @property
    def first(self) -> QueryProblem:
        return self.problems[0]


class ConfigError(GretaError, ValueError):
    """A bad option or configuration value."""


class SinkError(GretaError):
    """A sink that cannot take a batch: which sink, where, and the system's own reason."""


class SpoolFull(GretaError):
    """A query whose sinks fail has kept as much of its output as it may
    (`max_spool_mb`): the stream stops, the batch is not committed and nothing is lost."""


class SnapshotError(GretaError):
    """State bytes that cannot be restored (wrong format or version)."""
