"""`SQLiteStore`: the registry and the results in one SQLite file (WAL mode: the API reads while Spark's
foreachBatch thread writes), the registry's backup beside it, and the files it keeps (`own_files`).
Part of `greta_service.store`, which names them too.

Imports nothing from Spark or the engine.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from greta_service.store_api import QueryRecord, ResultCounts, ResultRow, Retention, Store

_SCHEMA = """
CREATE TABLE IF NOT EXISTS queries (
    id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, query_id TEXT NOT NULL, batch_id INTEGER NOT NULL,
    window_start REAL NOT NULL, window_end REAL NOT NULL, grp TEXT NOT NULL, payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_window ON results (query_id, window_start, grp);
CREATE INDEX IF NOT EXISTS results_batch ON results (query_id, batch_id);
CREATE TABLE IF NOT EXISTS batches (
    query_id TEXT NOT NULL, batch_id INTEGER NOT NULL, rows INTEGER NOT NULL, dead TEXT NOT NULL,
    written_at REAL NOT NULL, PRIMARY KEY (query_id, batch_id)
);
CREATE TABLE IF NOT EXISTS query_state (
    query_id TEXT PRIMARY KEY, bytes INTEGER NOT NULL, batch_id INTEGER NOT NULL
);
"""


JOURNALS = ("-wal", "-shm", "-journal")  # the files SQLite keeps beside a database
BACKUP, ASIDE = ".queries.json", ".unreadable-"  # beside the database: the registry's backup, unreadable ones


def own_files(db: Path) -> list[Path]:
    """Every file a SQLite store at `db` writes, as far as they can be known now: the database, SQLite's
    journals, the registry's backup with its temporary file, and registries set aside (`set_aside`)."""
    backup = db.with_name(db.name + BACKUP)
    aside = sorted(db.parent.glob(f"{db.name}{ASIDE}*")) if db.parent.is_dir() else []
    return [db, *(db.with_name(db.name + j) for j in JOURNALS), backup, backup.with_name(backup.name + ".tmp"),
            *aside]


class SQLiteStore(Store):
    """Registry and results in one SQLite file; one connection per thread."""

    def __init__(self, path: str | Path, retention: Retention = Retention()) -> None:
        self.path = Path(path)
        self.retention = retention
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._conn().executescript(_SCHEMA)  # idempotent; executescript manages its own transaction
        # the registry as this process last wrote or read it (id -> record, its JSON text): a service
        # owns its store, so a list or a backup reads memory, not every record's row again
        self._records: dict[str, tuple[QueryRecord, str]] | None = None
        self._order: list[QueryRecord] | None = None  # its records in registration order, kept until a change
        self._version = 0  # one more at each change of the records (`version`)
        self._records_lock = threading.Lock()
        # each query's counts over the batches read so far (and the last batch id read): a read adds
        # the batches written since, so it does not grow with the stream's age (batch records stay)
        self._counts: dict[str, tuple[ResultCounts, int]] = {}
        self._counts_lock = threading.Lock()

    def _conn(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives a process crash
            self._local.db = db
            with self._lock:
                self._all.append(db)
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            self._records = None
            self._changed()  # the registry in memory may hold what was rolled back: read it again
            raise
        db.execute("COMMIT")

    # -- registry --------------------------------------------------------

    def save_query(self, rec: QueryRecord) -> None:
        rec.updated_at = time.time()
        text = json.dumps(asdict(rec))
        with self._records_lock, self._tx() as db:
            db.execute(
                "INSERT INTO queries (id, name, record) VALUES (?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET name = excluded.name, record = excluded.record",
                (rec.id, rec.name, text),
            )
            self._cached(db)[rec.id] = (copy.copy(rec), text)
            self._changed()
            self._back_up(db)

    def _cached(self, db: sqlite3.Connection) -> dict[str, tuple[QueryRecord, str]]:
        """The records by id (read from the table once; under `_records_lock`)."""
        if self._records is None:
            self._records = {r[0]: (QueryRecord(**json.loads(r[1])), r[1])
                             for r in db.execute("SELECT id, record FROM queries").fetchall()}
        return self._records

    def save_queries(self, recs: Sequence[QueryRecord]) -> None:
        """Save the records `recs` as they are, in one transaction: one backup, written after all of them
        (a restore cut short leaves the backup it restores from as it was)."""
        with self._records_lock, self._tx() as db:  # a rollback drops the registry in memory (`_tx`)
            cached = self._cached(db)
            for rec in recs:
                text = json.dumps(asdict(rec))
                db.execute("INSERT INTO queries (id, name, record) VALUES (?, ?, ?) ON CONFLICT (id) DO "
                           "UPDATE SET name = excluded.name, record = excluded.record", (rec.id, rec.name, text))
                cached[rec.id] = (copy.copy(rec), text)
            self._changed()
            self._back_up(db)

    def check(self, *, whole: bool = False) -> None:
        """Raise `sqlite3.DatabaseError` when the file is damaged: its registry (the queries table with its
        indexes, and every record read again), and with `whole` every table (it reads the whole file)."""
        db = self._conn()
        problems = db.execute("PRAGMA quick_check" if whole else "PRAGMA quick_check(queries)").fetchall()
        if problems != [("ok",)]:
            raise sqlite3.DatabaseError("; ".join(str(p[0]) for p in problems[:3]))
        with self._records_lock:
            self._records = None
            self._changed()
            try:
                self._cached(db)
            except (ValueError, TypeError) as exc:
                self._records = None
                self._changed()
                raise sqlite3.DatabaseError(f"a query record cannot be read: {exc}") from exc

    @property
    def backup_path(self) -> Path:
        """The registry's backup: every query record as JSON, written after each change."""
        return self.path.with_name(self.path.name + BACKUP)

    def _back_up(self, db: sqlite3.Connection) -> None:
        """Write the backup within the change's transaction (so backups follow changes in order):
        to a temporary file, then renamed over the old one (never half written)."""
        records = self._cached(db)
        tmp = self.backup_path.with_name(self.backup_path.name + ".tmp")
        texts = ", ".join(records[k][1] for k in sorted(records))  # each record's JSON as stored: not decoded again
        tmp.write_text(f'{{"written_at": {json.dumps(time.time())}, "queries": [{texts}]}}', encoding="utf-8")
        tmp.replace(self.backup_path)

    def get_query(self, query_id: str) -> QueryRecord | None:
        with self._records_lock:
            found = self._cached(self._conn()).get(query_id)
        return copy.copy(found[0]) if found is not None else None

    def list_queries(self) -> list[QueryRecord]:
        return [copy.copy(rec) for rec in self.records()]  # a caller may change its own

    def _changed(self) -> None:
        """The records changed (under `_records_lock`): sorted again when read, and a new `version`."""
        self._order = None
        self._version += 1

    @property
    def version(self) -> int:
        return self._version

    def records(self) -> list[QueryRecord]:
        with self._records_lock:
            if self._order is None:  # none yet, or changed since
                self._order = sorted((rec for rec, _ in self._cached(self._conn()).values()),
                                     key=lambda r: (r.created_at, r.id))
            return list(self._order)

    def delete_query(self, query_id: str) -> None:
        with self._records_lock, self._tx() as db:
            db.execute("DELETE FROM queries WHERE id = ?", (query_id,))
            db.execute("DELETE FROM results WHERE query_id = ?", (query_id,))
            db.execute("DELETE FROM batches WHERE query_id = ?", (query_id,))
            db.execute("DELETE FROM query_state WHERE query_id = ?", (query_id,))
            self._cached(db).pop(query_id, None)
            self._changed()
            self._back_up(db)
        self._recount(query_id)

    # -- results ---------------------------------------------------------

    def write_batch(self, query_id: str, batch_id: int, rows: Sequence[ResultRow], dead: dict[str, int],
                    state_bytes: int | None = None) -> None:
        with self._tx() as db:
            if state_bytes is not None:
                db.execute("INSERT OR REPLACE INTO query_state (query_id, bytes, batch_id) VALUES (?, ?, ?)",
                           (query_id, state_bytes, batch_id))
            db.execute("DELETE FROM results WHERE query_id = ? AND batch_id = ?", (query_id, batch_id))
            db.executemany(
                "INSERT INTO results (query_id, batch_id, window_start, window_end, grp, payload) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(query_id, batch_id, r.window_start, r.window_end, r.grp, r.payload) for r in rows],
            )
            db.execute(
                "INSERT OR REPLACE INTO batches (query_id, batch_id, rows, dead, written_at) VALUES (?, ?, ?, ?, ?)",
                (query_id, batch_id, len(rows), json.dumps(dead), time.time()),
            )
            self._trim(db, query_id)
        self._recount(query_id, batch_id)  # a batch replayed over one already counted

    def _trim(self, db: sqlite3.Connection, query_id: str) -> None:
        """Apply the retention to one query's rows (its batch records stay: counts are of everything)."""
        keep = self.retention
        if keep.max_age_s is not None:
            db.execute("DELETE FROM results WHERE query_id = ? AND batch_id IN "
                       "(SELECT batch_id FROM batches WHERE query_id = ? AND written_at < ?)",
                       (query_id, query_id, time.time() - keep.max_age_s))
        if keep.max_rows is not None:
            db.execute("DELETE FROM results WHERE query_id = ? AND seq <= (SELECT seq FROM results WHERE "
                       "query_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)", (query_id, query_id, keep.max_rows))

    def page(
        self, query_id: str, *, start_min: float | None = None, start_max: float | None = None,
        grp: str | None = None, limit: int = 100, offset: int = 0,
    ) -> tuple[int, list[str]]:
        where, args = ["query_id = ?"], [query_id]
        if start_min is not None:
            where.append("window_start >= ?")
            args.append(start_min)  # type: ignore[arg-type]
        if start_max is not None:
            where.append("window_start <= ?")
            args.append(start_max)  # type: ignore[arg-type]
        if grp is not None:
            where.append("grp = ?")
            args.append(grp)
        cond = " AND ".join(where)
        db = self._conn()
        total = db.execute(f"SELECT COUNT(*) FROM results WHERE {cond}", args).fetchone()[0]
        rows = db.execute(
            f"SELECT payload FROM results WHERE {cond} ORDER BY window_start, grp, seq LIMIT ? OFFSET ?",
            [*args, limit, offset],
        ).fetchall()
        return total, [r[0] for r in rows]

    def after(self, query_id: str, seq: int, limit: int = 500) -> list[tuple[int, str]]:
        return self._conn().execute(
            "SELECT seq, payload FROM results WHERE query_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (query_id, seq, limit),
        ).fetchall()

    def clear_results(self, query_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM results WHERE query_id = ?", (query_id,))
            db.execute("DELETE FROM batches WHERE query_id = ?", (query_id,))
            db.execute("DELETE FROM query_state WHERE query_id = ?", (query_id,))
        self._recount(query_id)

    def state_bytes(self) -> dict[str, int]:
        return dict(self._conn().execute("SELECT query_id, bytes FROM query_state").fetchall())

    def latest(self, query_id: str) -> list[str]:
        rows = self._conn().execute(
            "SELECT payload FROM (SELECT payload, grp, ROW_NUMBER() OVER (PARTITION BY grp "
            "ORDER BY window_start DESC, seq DESC) AS n FROM results WHERE query_id = ?) WHERE n = 1 ORDER BY grp",
            (query_id,),
        ).fetchall()
        return [r[0] for r in rows]

    def last_seq(self, query_id: str) -> int:
        row = self._conn().execute("SELECT MAX(seq) FROM results WHERE query_id = ?", (query_id,)).fetchone()
        return row[0] or 0

    def counts(self, query_id: str) -> ResultCounts:
        with self._counts_lock:
            known, seen = self._counts.get(query_id, (ResultCounts(), -1))
            out = ResultCounts(known.rows, known.batches, known.last_batch_id, dict(known.dead_by_reason))
            for batch_id, rows, dead in self._conn().execute(
                "SELECT batch_id, rows, dead FROM batches WHERE query_id = ? AND batch_id > ?", (query_id, seen)
            ):
                out.rows += rows
                out.batches += 1
                out.last_batch_id = batch_id if out.last_batch_id is None else max(out.last_batch_id, batch_id)
                for reason, n in json.loads(dead).items():
                    out.dead_by_reason[reason] = out.dead_by_reason.get(reason, 0) + n
            self._counts[query_id] = (out, max(seen, out.last_batch_id if out.last_batch_id is not None else -1))
            return ResultCounts(out.rows, out.batches, out.last_batch_id, dict(out.dead_by_reason))

    def _recount(self, query_id: str, batch_id: int | None = None) -> None:
        """Forget the counts of `query_id` read so far when a batch they hold changes (None: all of them)."""
        with self._counts_lock:
            known = self._counts.get(query_id)
            if known is not None and (batch_id is None or batch_id <= known[1]):
                del self._counts[query_id]

    def close(self) -> None:
        with self._lock:
            for db in self._all:
                db.close()
            self._all.clear()
        self._local = threading.local()
