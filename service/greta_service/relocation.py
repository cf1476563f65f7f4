"""A data folder moved or copied elsewhere: what a start rebases so that its streams go on (`relocate`).

A data folder holds absolute paths in three places, each of its own old place:

- the registry: a source, sink or dead-letter path is kept as its real path (`Registry._paths`), so
  one inside the data folder names the old one; and a stream's checkpoint folder is named after its
  source, path included (`runner.stream_key`);
- each file source's metadata log in Spark's checkpoint (`checkpoints/<stream>/sources/<n>/<batch>`,
  and its `.compact` files) names every file the stream read by its URI: the control rows
  (`spark.control`, inside the checkpoint) and the events of a source inside the data folder. Spark
  knows a file it read by that URI only, so a moved source's files would all be read again, and a
  batch replayed after a crash would look for its files at the old place;
- a stateful operator's metadata (`checkpoints/<stream>/state/<op>/_metadata/v2/<batch>`) names its
  state schema files, and Spark copies the list into each new entry: a moved stream fails at its
  first batch (`File file:<old>/checkpoints/.../_stateSchema/... does not exist`).

So the data folder records where it is (`LOCATION_FILE`, in its checkpoint folder), and a start that
finds it elsewhere (or, for a folder an older version wrote, finds its checkpoints naming another
place) rebases, before any stream starts: every registered path inside the old folder to the same
place inside the new one, a stream whose source moved renamed to its new key, and every path of the
old folder in Spark's logs above rewritten to the new one (with its `.crc` checksum), so each file
is known as read, once. Paths outside the data folder are kept as they are (`Relocation.kept`): a
source or sink elsewhere stays where it was given, and a copy of a data folder writes the same
outside sinks as the original. Each step can run again: a start cut short does the rest next time.
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from greta_service.runner import stream_key
from greta_service.settings import Settings
from greta_service.store import QueryRecord, SQLiteStore, Store
from greta_stream.choices import PATH_FORMATS
from greta_stream.pipeline import glob_base

log = logging.getLogger("greta_service")
LOCATION_FILE = "greta-location.json"  # in the checkpoint folder: where the data folder was last served from
_SHOWN = 10  # paths named in a log line or the ready status


@dataclass(frozen=True)
class Place:
    """Where a data folder is: as given, made absolute (as Spark writes it) and with links resolved (as the
    registry keeps paths)."""

    absolute: str
    real: str

    @classmethod
    def of(cls, data_dir: Path) -> Place:
        return cls(os.path.abspath(data_dir), os.path.realpath(data_dir))

    def pairs(self, new: Place, *, spark: bool = False) -> list[tuple[str, str]]:
        """(old, new) prefixes to rebase, from either form of the old place: to the new real one (the
        registry's paths, and the files of a source Spark read at one of them), and first, with
        `spark`, the checkpoint folder to the new one as given (Spark's checkpoint location)."""
        olds = dict.fromkeys([self.absolute, self.real])
        out = [(f"{o}/checkpoints", f"{new.absolute}/checkpoints") for o in olds] if spark else []
        return [(o, n) for o, n in [*out, *((o, new.real) for o in olds)] if o != n]


@dataclass
class Relocation:
    """What a start found moved and rebased."""

    old: Place
    new: Place
    records: int = 0  # query records with a path rebased
    streams: dict[str, str] = field(default_factory=dict)  # checkpoint folders renamed, old key -> new
    files: int = 0  # Spark log files rewritten
    kept: list[str] = field(default_factory=list)  # registered paths outside the data folder, kept as they are
    missing: list[str] = field(default_factory=list)  # of those, the sources that do not exist here

    def summary(self) -> str:
        text = (f"the data folder moved from {self.old.absolute} to {self.new.absolute}: the paths inside it follow "
                f"it (queries rebased: {self.records}, streams renamed: {len(self.streams)}, checkpoint files "
                f"rewritten: {self.files})")
        if self.kept:
            text += f"; paths outside it are kept as they are: {_few(self.kept)}"
        if self.missing:
            text += f"; sources that do not exist here (their queries fail): {_few(self.missing)}"
        return text


def _few(paths: list[str]) -> str:
    return ", ".join(paths) if len(paths) <= _SHOWN else f"{', '.join(paths[:_SHOWN])} and {len(paths) - _SHOWN} more"


def relocate(settings: Settings, store: Store) -> Relocation | None:
    """Rebase a data folder served from elsewhere before (module docstring); None when it did not move.
    Records where it is now, either way."""
    here = Place.of(settings.data_dir)
    checkpoints = settings.checkpoint_dir
    before = _recorded(checkpoints) or _inferred(checkpoints)
    moved = None
    if before is not None and before != here:
        moved = Relocation(before, here)
        _rebase(moved, store, checkpoints)
        log.warning("%s", moved.summary())
    checkpoints.mkdir(parents=True, exist_ok=True)
    _atomic(checkpoints / LOCATION_FILE, json.dumps({"absolute": here.absolute, "real": here.real}).encode())
    return moved


def _recorded(checkpoints: Path) -> Place | None:
    try:
        data = json.loads((checkpoints / LOCATION_FILE).read_text(encoding="utf-8"))
        return Place(str(data["absolute"]), str(data["real"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("%s cannot be read (%s): where the data folder was is read from its checkpoints",
                    checkpoints / LOCATION_FILE, exc)
        return None


def _inferred(checkpoints: Path) -> Place | None:
    """Where a data folder without `LOCATION_FILE` (an older version's) was: the folder above
    `checkpoints/<stream>/` in the paths Spark wrote into that stream's logs. None: none found."""
    for stream in _streams(checkpoints):
        pattern = re.compile(rf'"file:(?://)?(/[^"]*?)/checkpoints/{re.escape(stream.name)}/')
        for path in _spark_logs(stream):
            with path.open("rb") as f:
                found = pattern.search(f.read(1 << 20).decode("utf-8", errors="replace"))
            if found:
                old = unquote(found.group(1))
                return Place(old, old)  # the registry's paths are real ones: as Spark wrote it, at best
    return None


def _streams(checkpoints: Path) -> list[Path]:
    return sorted(p for p in checkpoints.iterdir() if p.is_dir()) if checkpoints.is_dir() else []


def _rebase(moved: Relocation, store: Store, checkpoints: Path) -> None:
    """The registry's paths, the streams' folder names, then Spark's logs (each step idempotent)."""
    pairs = moved.old.pairs(moved.new)
    changed: list[QueryRecord] = []
    kept: set[str] = set()
    for rec in store.list_queries():
        new = replace(rec, source=_spec(rec.source, pairs), sinks=[_spec(s, pairs) for s in rec.sinks],
                      dead_letter=_spec(rec.dead_letter, pairs) if rec.dead_letter else None)
        for spec in (new.source, *new.sinks, *([new.dead_letter] if new.dead_letter else [])):
            path = spec.get("path") if spec.get("format") in PATH_FORMATS else None
            if isinstance(path, str) and not _inside(path, moved.new.real) and path not in kept:
                kept.add(path)
                moved.kept.append(path)
                if spec is new.source and not glob_base(Path(path)).exists():
                    moved.missing.append(path)
        if (new.source, new.sinks, new.dead_letter) != (rec.source, rec.sinks, rec.dead_letter):
            changed.append(new)
            old_key, new_key = stream_key(rec), stream_key(new)
            if old_key != new_key:
                moved.streams[old_key] = new_key
    olds = dict.fromkeys([moved.old.absolute, moved.old.real])
    renames: list[tuple[str, str]] = []  # a stream's own paths under its old name, before the others
    for old_key, new_key in moved.streams.items():
        if (checkpoints / old_key).is_dir() and (checkpoints / new_key).exists():
            log.warning("stream %s, renamed %s as its source moved with the data folder, is there already: "
                        "the checkpoint %s is left as it is", new_key, old_key, checkpoints / old_key)
        elif (checkpoints / old_key).is_dir():  # not there: renamed by a start cut short, or never run
            os.replace(checkpoints / old_key, checkpoints / new_key)
        renames += [(f"{o}/checkpoints/{old_key}", f"{moved.new.absolute}/checkpoints/{new_key}") for o in olds]
    for stream in _streams(checkpoints):
        for path in _spark_logs(stream):
            moved.files += _rewrite(path, renames + moved.old.pairs(moved.new, spark=True))
    if changed:
        if isinstance(store, SQLiteStore):  # one transaction, one backup: a thousand records are not a
            store.save_queries(changed)     # thousand backups of a thousand records
        else:
            for rec in changed:
                store.save_query(rec)
    moved.records = len(changed)


def _spec(spec: dict[str, Any] | None, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """A source or sink spec with its path rebased (a path outside the data folder as it is)."""
    spec = dict(spec or {})
    path = spec.get("path")
    if isinstance(path, str) and spec.get("format") in PATH_FORMATS:
        spec["path"] = _rebased(path, pairs)
    return spec


def _rebased(path: str, pairs: list[tuple[str, str]]) -> str:
    for old, new in pairs:
        if _inside(path, old):
            return new + path[len(old):]
    return path


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _spark_logs(stream: Path) -> Iterator[Path]:
    """The files of a stream's checkpoint where Spark writes absolute paths: its file sources'
    metadata logs and its stateful operators' metadata (the module docstring)."""
    for top in (stream / "sources", *sorted((stream / "state").glob("*/_metadata"))):
        if top.is_dir():
            for folder, _, names in os.walk(top):
                for name in sorted(names):
                    if not name.startswith("."):
                        yield Path(folder) / name


def _forms(old: str, new: str) -> list[tuple[str, str]]:
    """How Spark writes a path in its logs, old and new: a URI (`file:///a%20b/c`, as a file source
    lists its files), a Hadoop Path (`file:/a b/c`, a state schema file), plain; JSON-escaped."""
    forms = [(f"file://{_uri_path(old)}", f"file://{_uri_path(new)}"), (f"file:{old}", f"file:{new}"), (old, new)]
    return [(json.dumps(o, ensure_ascii=False)[1:-1], json.dumps(n, ensure_ascii=False)[1:-1])
            for o, n in dict(forms).items()]


def _rewrite(path: Path, pairs: list[tuple[str, str]]) -> int:
    """Rewrite the JSON strings of one log file that start with an old path (the first pair that
    matches, whole path segments only), and its checksum; 1 when it changed."""
    data = path.read_bytes()
    text = data.decode("utf-8", errors="surrogateescape")
    forms = [f for old, new in pairs for f in _forms(old, new)]
    if not any(old in text for old, _ in forms):
        return 0
    pattern = re.compile("|".join(f'"{re.escape(old)}(?=["/])' for old, _ in forms))
    lookup = {f'"{old}': f'"{new}' for old, new in reversed(forms)}  # the first pair wins
    out = pattern.sub(lambda m: lookup[m.group(0)], text).encode("utf-8", errors="surrogateescape")
    if out == data:
        return 0
    _atomic(path, out)
    crc = path.with_name(f".{path.name}.crc")
    if crc.exists():  # Hadoop's local file system checks a file against it: CRC32 per chunk
        _atomic(crc, _checksum(out, crc.read_bytes()))
    return 1


def _checksum(data: bytes, old: bytes) -> bytes:
    """A Hadoop `.crc` file for `data`: `crc\\0`, the bytes per checksum (the old file's), a CRC32 per chunk."""
    per = struct.unpack(">i", old[4:8])[0] if old[:4] == b"crc\x00" and len(old) >= 8 else 512
    sums = b"".join(struct.pack(">I", zlib.crc32(data[i:i + per]) & 0xFFFFFFFF) for i in range(0, len(data), per))
    return b"crc\x00" + struct.pack(">i", per) + sums


def _uri_path(path: str) -> str:
    """`path` as java.net.URI writes it: ASCII other than letters, digits and `-_.!~*'();:@&=+$,/` escaped
    (UTF-8, `%XX`), other characters kept."""
    keep = set("-_.!~*'();:@&=+$,/")
    out = []
    for c in path:
        if c.isascii() and not (c.isalnum() or c in keep) or not c.isascii() and (c.isspace() or not c.isprintable()):
            out.append("".join(f"%{b:02X}" for b in c.encode()))
        else:
            out.append(c)
    return "".join(out)


def _atomic(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}.relocating")  # a hidden name: Spark reads no such file
    temp.write_bytes(data)
    os.replace(temp, path)
