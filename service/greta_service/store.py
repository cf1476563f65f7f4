"""The service's persistent state: the query registry and the results store.

Two interfaces, `RegistryStore` and `ResultStore`, so that a server database
can replace the embedded one; `SQLiteStore` implements both in one file (WAL
mode: the API reads while Spark's foreachBatch thread writes).

Exactly once: `ResultStore.write_batch` replaces every row that an earlier
attempt of the same (query, batch id) wrote, in one transaction. Spark
replays an uncommitted micro-batch after a crash with the same id and the
same outputs, so the store holds each result row once.

Retention (`Retention`): a store may keep, per query, only the newest
`max_rows` rows and only rows stored within `max_age_s` seconds; it trims
when a batch is written. Counts (rows, batches, dead letters) stay those of
everything ever written.

The parts: `store_api` (the interfaces and records) and `sqlite_store` (the
embedded store); this module opens a store from its URL, checks and restores
its registry, and names every one of those parts as before.

Imports nothing from Spark or the engine.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from greta_service.sqlite_store import ASIDE, BACKUP, JOURNALS, SQLiteStore, own_files
from greta_service.store_api import (
    STATUSES,
    QueryRecord,
    RegistryStore,
    ResultCounts,
    ResultRow,
    ResultStore,
    Retention,
    Store,
)
from greta_stream import ConfigError

__all__ = [
    "ASIDE", "BACKUP", "JOURNALS", "STATUSES", "QueryRecord", "RegistryStore", "ResultCounts", "ResultRow",
    "ResultStore", "Retention", "SQLiteStore", "Store", "backed_up_queries", "check_registry",
    "open_store", "own_files", "restore_registry", "set_aside",
]


def backed_up_queries(store: Store) -> tuple[list[QueryRecord], float] | None:
    """The query records of the store's backup and when it was written (None: no backup)."""
    path = getattr(store, "backup_path", None)
    if path is None or not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [QueryRecord(**r) for r in data["queries"]], float(data["written_at"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"the registry's backup {path} cannot be read: {exc}") from exc


def check_registry(store: Store, checkpoint_dir: Path, store_url: str) -> None:
    """Refuse a start whose registry lost its queries: empty while checkpoints of streams exist
    (a registry emptied or replaced, the queries' state orphaned), saying what to do."""
    if store.list_queries():
        return
    streams = sorted(p.name for p in checkpoint_dir.iterdir() if p.is_dir()) if checkpoint_dir.is_dir() else []
    if not streams:
        return
    backup = backed_up_queries(store)
    how = ("restore it from its backup with `greta-stream serve --restore-registry` "
           f"({len(backup[0])} queries, written {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(backup[1]))})"
           if backup and backup[0] else "there is no backup of it to restore")
    raise ConfigError(
        f"the registry ({store_url}) holds no query, yet {checkpoint_dir} holds the checkpoints of "
        f"{len(streams)} stream(s): the registry was emptied or replaced and every query would be lost. "
        f"{how[0].upper() + how[1:]}; or, to start empty, move {checkpoint_dir} away")


def restore_registry(store: Store) -> int:
    """Put the backup's query records back into an empty registry; how many."""
    if store.list_queries():
        raise ConfigError("the registry holds queries: --restore-registry restores only an empty one")
    backup = backed_up_queries(store)
    if not backup or not backup[0]:
        raise ConfigError("no backup of the registry to restore")
    if isinstance(store, SQLiteStore):  # all or nothing: a restore cut short leaves the backup as it was
        store.save_queries(backup[0])
    else:
        for rec in backup[0]:
            store.save_query(rec)
    return len(backup[0])


def open_store(url: str, retention: Retention = Retention(), *, whole: bool = False) -> Store:
    """A store from a URL; `sqlite:///path/to/file.sqlite` is the embedded default. A file that is no
    SQLite database, or whose registry is damaged (`SQLiteStore.check`; with `whole`, any page), is a
    `ConfigError` saying how to restore it."""
    if url.startswith("sqlite:///"):
        store = None
        try:
            store = SQLiteStore(url[len("sqlite:///"):], retention)
            store.check(whole=whole)
            return store
        except sqlite3.DatabaseError as exc:
            if store is not None:
                store.close()
            raise ConfigError(
                f"the registry ({url}) cannot be read ({exc}): restore its queries from the backup with "
                "`greta-stream serve --restore-registry` (the unreadable file is moved aside)") from exc
    raise ConfigError(f"unsupported store URL {url!r}; use sqlite:///<path>")


def set_aside(db: Path) -> Path:
    """Move an unreadable database, with the journals SQLite kept beside it (which would be applied to a
    new database of that name), to `<db>.unreadable-<time>[-wal|-shm|-journal]`; where it went."""
    aside = db.with_name(f"{db.name}{ASIDE}{int(time.time())}")
    for suffix in ("", *JOURNALS):
        if db.with_name(db.name + suffix).exists():
            db.with_name(db.name + suffix).replace(aside.with_name(aside.name + suffix))
    return aside
