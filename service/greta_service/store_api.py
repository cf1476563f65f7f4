"""The store's two interfaces, `RegistryStore` and `ResultStore` (`Store`: both), and the records they
keep: `QueryRecord`, `ResultRow`, `ResultCounts`, with the `Retention` of result rows. Part of
`greta_service.store`, which names them too (see there for exactly once and retention).

Imports nothing from Spark or the engine.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("starting", "running", "stopped", "failed")  # `Registry.status`: starting until Spark is up


@dataclass(frozen=True)
class Retention:
    """How many result rows a store keeps per query (None: no bound)."""

    max_rows: int | None = None
    max_age_s: float | None = None


@dataclass
class QueryRecord:
    """One registered query as the registry persists it."""

    id: str
    name: str
    text: str
    mode: str = "aggregate"
    source: dict[str, Any] = field(default_factory=dict)
    sinks: list[dict[str, Any]] = field(default_factory=list)
    dead_letter: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    desired: str = "running"  # what a restarted service does: running -> resume
    status: str = "running"
    error: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class ResultRow:
    """One result row of a micro-batch; `payload` is the row as JSON text (big ints exact)."""

    window_start: float
    window_end: float
    grp: str
    payload: str


@dataclass
class ResultCounts:
    rows: int = 0
    batches: int = 0
    last_batch_id: int | None = None
    dead_by_reason: dict[str, int] = field(default_factory=dict)

    @property
    def dead_letters(self) -> int:
        return sum(self.dead_by_reason.values())


class RegistryStore(ABC):
    @abstractmethod
    def save_query(self, rec: QueryRecord) -> None: ...

    @abstractmethod
    def get_query(self, query_id: str) -> QueryRecord | None: ...

    @abstractmethod
    def list_queries(self) -> list[QueryRecord]: ...

    @property
    def version(self) -> int | None:
        """A number that changes with each change of the records (a cache of what they say is good while it
        stays), or None when the store cannot say (then nothing is cached)."""
        return None

    def records(self) -> list[QueryRecord]:
        """The records in registration order, to read only (a caller that changes one copies it first):
        `list_queries` without a copy of each, for the checks that read every record at each change."""
        return self.list_queries()

    @abstractmethod
    def delete_query(self, query_id: str) -> None:
        """Forget the query and every result it wrote."""


class ResultStore(ABC):
    @abstractmethod
    def write_batch(self, query_id: str, batch_id: int, rows: Sequence[ResultRow], dead: dict[str, int],
                    state_bytes: int | None = None) -> None:
        """Replace whatever (query_id, batch_id) held with these rows and dead-letter counts;
        `state_bytes`: the query's state size after the batch (kept as the last known)."""

    @abstractmethod
    def page(
        self, query_id: str, *, start_min: float | None = None, start_max: float | None = None,
        grp: str | None = None, limit: int = 100, offset: int = 0,
    ) -> tuple[int, list[str]]:
        """(total matching, payloads of one page) ordered by window, group."""

    @abstractmethod
    def after(self, query_id: str, seq: int, limit: int = 500) -> list[tuple[int, str]]:
        """(seq, payload) of rows stored after `seq`, in store order."""

    @abstractmethod
    def state_bytes(self) -> dict[str, int]:
        """The last known state size of each query (bytes), as its latest batch reported it."""

    @abstractmethod
    def clear_results(self, query_id: str) -> None:
        """Forget every row and batch count the query stored (its record stays)."""

    @abstractmethod
    def latest(self, query_id: str) -> list[str]:
        """Payloads of each group's row of its latest window, ordered by group."""

    @abstractmethod
    def last_seq(self, query_id: str) -> int: ...

    @abstractmethod
    def counts(self, query_id: str) -> ResultCounts: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class Store(RegistryStore, ResultStore, ABC):
    """Both interfaces; what `open_store` returns."""
