"""The queries of one stream: `QuerySet` (name -> `RunSpec`), and what a
query's saved state is tied to (`run_fingerprint`).

A stream read once serves every query registered on it. `QuerySet` names
the queries and derives what the stream needs of them all: one set of
field names, the tightest bound on future event times and the GROUP-BY
attributes every query groups by. Its sharing plan is
`greta_stream.runtime.plan.plan_units(queries)`; `MultiRunner`
(`greta_stream.runtime.multi`) runs it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from greta_stream.engine import FieldNames
from greta_stream.engine.ingest import future_step_s
from greta_stream.errors import ConfigError
from greta_stream.runtime.spec import RunSpec

QueryWatermarkOf = Callable[[RunSpec, str | None], Any]  # a query's watermark in its stream's time unit


@dataclass(frozen=True, eq=False)
class QuerySet:
    """The queries of one stream, by name, in registration order; `paused`
    names queries that do not run now but whose saved state the stream keeps
    (a stopped query that may start again)."""

    specs: tuple[tuple[str, RunSpec], ...]
    paused: frozenset[str] = frozenset()
    sharing: bool = True  # False: every query on a runner of its own (no shared families)
    # Which run of the stream this is (a driver's start): a query that failed in an
    # earlier run is tried again; one that failed in this run stays out of it.
    epoch: int = 0
    held_fields: FieldNames | None = None  # a set of paused queries only (`holding`): the fields they read

    @classmethod
    def holding(cls, paused: Iterable[str], fields: FieldNames) -> QuerySet:
        """No query running, the saved state of `paused` kept: a stream that goes
        on reading its source (so that a stopped query, started again, goes on
        with the input that arrives from then on) and evaluates nothing."""
        return cls((), frozenset(paused), True, 0, fields)

    @classmethod
    def of(cls, specs: Mapping[str, RunSpec] | Iterable[tuple[str, RunSpec]],
           paused: Iterable[str] = (), sharing: bool = True, epoch: int = 0) -> QuerySet:
        items = tuple(specs.items()) if isinstance(specs, Mapping) else tuple(specs)
        names = [n for n, _ in items]
        if not items:
            raise ConfigError("a stream needs at least one query")
        if len(set(names)) != len(names):
            raise ConfigError(f"query names must be unique in a stream: {names}")
        fields = {s.fields for _, s in items}
        if len(fields) > 1:
            raise ConfigError("the queries of one stream must read the same type, time and id fields")
        return cls(items, frozenset(paused) - set(names), sharing, epoch)

    def __iter__(self) -> Any:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.specs)

    def __getitem__(self, name: str) -> RunSpec:
        for n, spec in self.specs:
            if n == name:
                return spec
        raise KeyError(name)

    @property
    def fields(self) -> FieldNames:
        if not self.specs and self.held_fields is not None:
            return self.held_fields
        return self.specs[0][1].fields

    @property
    def max_future_s(self) -> float | None:
        """The tightest bound on event times ahead of the watermark any query sets (None: no query sets one)."""
        bounds = [s.max_future_s for _, s in self.specs if s.max_future_s is not None]
        return min(bounds) if bounds else None

    @property
    def future_step_s(self) -> float | None:
        """The tightest step ahead of the newest time any query allows (`ingest.future_step_s`: its
        `max_future_s`, or its lateness when longer); None: no query bounds event times."""
        steps = [future_step_s(s.max_future_s, s.lateness_s) for _, s in self.specs if s.max_future_s is not None]
        return min(steps) if steps else None

    @cached_property
    def shard_attrs(self) -> tuple[str, ...]:
        """The GROUP-BY attributes every query groups by (in the first query's
        order): a shard keyed by them holds whole groups of every query, and
        so whole partitions (a partition lies inside one group)."""
        first = self.specs[0][1].query.group_by
        common = set(first).intersection(*(s.query.group_by for _, s in self.specs))
        return tuple(a for a in first if a in common)

    @property
    def key(self) -> tuple[Any, ...]:
        return (tuple((n, s.key) for n, s in self.specs), tuple(sorted(self.paused)), self.sharing, self.epoch)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QuerySet) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


def run_fingerprint(spec: RunSpec) -> str:
    """What a query's saved state is tied to: its text and the options that change results."""
    text = repr((spec.query.text, spec.mode, spec.fields, spec.cet) + ((spec.life,) if spec.life else ()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
