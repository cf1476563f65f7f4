"""The registered queries as the checks of a change read them: by stream, and their folders and Delta tables.

A change of one query is checked against every other one (`Admission._admit`, `Registry._restart`): its
stream's queries, the folders it may not share, the Delta tables it may not write twice. `Roster` holds
those once per version of the registry (`Store.version`), so a change costs lookups in it and one
rebuild after it, not a pass of each check over the thousands of records. `Folders` finds the folders
near one without a pass over all of them; `recheck` uses it too.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from greta_service.guards import Place, places
from greta_service.runner import stream_key
from greta_service.store import QueryRecord
from greta_stream.pipeline import SinkConfig


@dataclass
class Roster:
    """The records of one version of the registry (read only), by stream key and by name, with `Folders`."""

    version: int | None
    by_stream: dict[str, list[QueryRecord]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # name -> id
    by_id: dict[str, QueryRecord] = field(default_factory=dict)
    folders: Folders = field(default_factory=lambda: Folders())

    @classmethod
    def of(cls, version: int | None, records: list[QueryRecord], data_dir: Path,
           places_of: Any = None) -> Roster:
        """The roster of `records` (in registration order); `places_of(rec)`: a record's places, when known."""
        roster = cls(version)
        for rec in records:
            roster.by_stream.setdefault(stream_key(rec), []).append(rec)
            roster.names[rec.name] = rec.id
            roster.by_id[rec.id] = rec
            roster.folders.put(places_of(rec) if places_of is not None
                               else places(rec.name, rec.source, rec.sinks, rec.dead_letter, data_dir), sort=False)
            roster.folders.delta += delta_of(rec)
        roster.folders.sort()
        return roster


@dataclass
class Folders:
    """The folders and Delta tables of the queries a query is checked against; `near` finds the folders
    that can conflict with one (it, those above it, those below it) without a pass over all of them."""

    places: list[Place] = field(default_factory=list)
    delta: list[tuple[str, Any]] = field(default_factory=list)
    _at: dict[str, list[int]] = field(default_factory=dict)  # folder -> indexes into `places`
    _sorted: list[str] = field(default_factory=list)  # the folders, sorted: those below one are a run

    def add(self, rec: QueryRecord, data_dir: Path) -> None:
        self.put(places(rec.name, rec.source, rec.sinks, rec.dead_letter, data_dir))
        self.delta += delta_of(rec)

    def put(self, new: list[Place], sort: bool = True) -> None:
        """Add the places of one query; `sort=False`: many at once, then `sort`."""
        for place in new:
            if sort and place.folder not in self._at:
                bisect.insort(self._sorted, place.folder)
            self._at.setdefault(place.folder, []).append(len(self.places))
            self.places.append(place)

    def sort(self) -> None:
        self._sorted = sorted(self._at)

    def near(self, new: list[Place], but: frozenset[str] = frozenset()) -> list[Place]:
        """The places that are, lie inside or hold a folder of `new`, in the order they were added, the first
        of each folder, role and format only (a thousand queries of one source: one place), of the queries
        not named in `but`; `check_places` names the same conflict with them as with all of them."""
        found: set[int] = set()
        for place in new:
            folder = place.folder
            above = [folder] + [str(p) for p in PurePosixPath(folder).parents]
            for f in above:
                found.update(self._at.get(f, ()))
            below = folder.rstrip("/") + "/"
            for f in self._sorted[bisect.bisect_left(self._sorted, below):bisect.bisect_left(self._sorted, below[:-1] + "0")]:
                found.update(self._at[f])
        first: dict[tuple[str, str, str], Place] = {}  # one of each: the earliest names the conflict
        for i in sorted(found):
            p = self.places[i]
            if p.query not in but:
                first.setdefault((p.folder, p.role, p.format), p)
        return list(first.values())


def delta_of(rec: QueryRecord) -> list[tuple[str, Any]]:
    """The Delta tables a query writes, as `delta_tables_shared` takes them."""
    return [(rec.name, SinkConfig(format="delta", path=s.get("path"), table=s.get("table")))
            for s in (*rec.sinks, *([rec.dead_letter] if rec.dead_letter else [])) if s.get("format") == "delta"]
