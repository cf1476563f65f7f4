"""State in chunks: what a runner keeps between micro-batches, written once and referred to by key.

A runner's snapshot is a small part that changes every micro-batch and
*chunks* that never change once written: a chunk's `content_key` names it
(the digest of its encoding), and a snapshot taken while a chunk store is
open (`chunk_store`, the incremental Spark operator's) holds the keys only;
the store collects the chunks encoded for the first time (`written`), and a
state store keeps them under their keys until no snapshot refers to them.
Restoring reads them back from the store (`loads`). Without a store open,
snapshots hold their chunks whole.

Kinds of chunk: the columnar stream's kept events (`columnar.kept.KeptChunk`,
registered under the empty tag), and the general engine's and CET's graph
every few micro-batches (`BaseChunk`) with the events accepted since
(`EventChunk` in an `EventLog`): such a runner snapshots as its latest base
and its log, and a restore loads the base and replays the log, so its
state per micro-batch is that batch's events and a share of a base, not its
whole graph (docs/DESIGN.md, "Incremental state").
"""

from __future__ import annotations

import hashlib
import io
import pickle
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from greta_stream.engine.ingest import Event


class ChunkStore:
    """Chunks kept out of snapshots: `source` holds what a state store holds (by
    key) for restoring; a snapshot taken while the store is open puts the
    chunks it encoded for the first time in `written` and every key it
    referred to in `refs`."""

    def __init__(self, source: dict[str, bytes] | None = None) -> None:
        self.source = source if source is not None else {}
        self.written: dict[str, bytes] = {}
        self.refs: set[str] = set()


_STORE: ContextVar[ChunkStore | None] = ContextVar("greta_chunk_store", default=None)
_TRACKERS: ContextVar[tuple[dict[str, int], ...]] = ContextVar("greta_chunk_trackers", default=())
# chunk class -> (tag, decode); the empty tag keys a chunk by its key alone
_KINDS: dict[type, tuple[str, Callable[[bytes], Any]]] = {}
_DECODERS: dict[str, Callable[[bytes], Any]] = {}


def register(cls: type, tag: str, decode: Callable[[bytes], Any]) -> None:
    """Make `cls` a chunk: kept out of snapshots, `cls.encode(obj)` its bytes, `decode` back."""
    _KINDS[cls] = (tag, decode)
    _DECODERS[tag] = decode


@contextmanager
def chunk_store(source: dict[str, bytes] | None = None) -> Iterator[ChunkStore]:
    """Within it, `dumps` keeps chunks out of snapshots (by key) and `loads`
    reads them from `source` (module docstring)."""
    store = ChunkStore(source)
    token = _STORE.set(store)
    try:
        yield store
    finally:
        _STORE.reset(token)


def store_open() -> bool:
    """Whether snapshots taken now keep their chunks out (an incremental state store)."""
    return _STORE.get() is not None


@contextmanager
def store_closed() -> Iterator[None]:
    """Within it, snapshots are whole (chunks in them), as without a store (a base, below)."""
    token = _STORE.set(None)
    try:
        yield
    finally:
        _STORE.reset(token)


@contextmanager
def tracked() -> Iterator[dict[str, int]]:
    """The chunks the snapshots taken within refer to: key -> bytes in a state store."""
    keys: dict[str, int] = {}
    token = _TRACKERS.set((*_TRACKERS.get(), keys))
    try:
        yield keys
    finally:
        _TRACKERS.reset(token)


def dumps(state: Any) -> bytes:
    """Pickle a snapshot; with a chunk store open, its chunks by key only."""
    store = _STORE.get()
    if store is None:
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    buf = io.BytesIO()
    _ChunkPickler(buf, store).dump(state)
    return buf.getvalue()


def loads(data: bytes) -> Any:
    """Unpickle a snapshot; chunk keys are read from the open chunk store."""
    return _ChunkUnpickler(io.BytesIO(data), _STORE.get()).load()


def content_key(chunk: Any) -> tuple[str, bytes | None]:
    """The chunk's key (the digest of its bytes, computed once) and its bytes when they were computed now."""
    if chunk._key is not None:
        return chunk._key, None
    data = chunk.encode()
    chunk._key, chunk._size = hashlib.blake2b(data, digest_size=8).hexdigest(), len(data)
    return chunk._key, data


class _ChunkPickler(pickle.Pickler):
    def __init__(self, buf: io.BytesIO, store: ChunkStore) -> None:
        super().__init__(buf, protocol=pickle.HIGHEST_PROTOCOL)
        self.store = store

    def persistent_id(self, obj: Any) -> Any:
        kind = _KINDS.get(type(obj))
        if kind is None:
            return None
        key = self._chunk(obj)
        members = getattr(obj, "members", ())
        for member in members:  # a group's chunks are referred to (and written) too
            self._chunk(member)
        for keys in _TRACKERS.get():  # a group as one reference (`referred` finds its members), its bytes all of theirs
            keys[GROUP_TAG + key if members else key] = obj._size + sum(m._size for m in members)
        return key if not kind[0] else (kind[0], key)

    def _chunk(self, obj: Any) -> str:
        """The chunk's key, its bytes written when encoded for the first time, its key referred to."""
        key, data = content_key(obj)
        if data is not None:
            self.store.written[key] = data
        self.store.refs.add(key)
        return key


class _ChunkUnpickler(pickle.Unpickler):
    def __init__(self, buf: io.BytesIO, store: ChunkStore | None) -> None:
        super().__init__(buf)
        self.store = store

    def persistent_load(self, pid: Any) -> Any:
        tag, key = pid if isinstance(pid, tuple) else ("", pid)
        data = self.store.source.get(key) if self.store is not None else None
        if data is None:
            raise pickle.UnpicklingError(f"the state refers to chunk {key}, which the state store does not hold")
        chunk = _DECODERS[tag](data)
        chunk._key, chunk._size = key, len(data)
        return chunk


# ------------------------------------------------------------------ event logs
@dataclass(eq=False)
class EventChunk:
    """The accepted events of one micro-batch, as `Event`s until first encoded,
    then as their compressed bytes only (decoded again when replayed)."""

    last: Any  # the latest event time in it
    events: list[Event] | None = None
    data: bytes | None = None
    _key: str | None = field(default=None, repr=False)
    _size: int = field(default=0, repr=False)

    def encode(self) -> bytes:
        if self.data is None:
            assert self.events is not None
            rows = [(e.time, e.type, e.id, e.attrs) for e in self.events]
            self.data = zlib.compress(pickle.dumps((self.last, rows), protocol=pickle.HIGHEST_PROTOCOL), 1)
            self.events = None  # the bytes are the chunk from now on
        return self.data

    def replayed(self) -> list[Event]:
        if self.events is not None:
            return self.events
        assert self.data is not None
        _, rows = pickle.loads(zlib.decompress(self.data))  # noqa: S301 - our own state store's bytes
        return [Event(t, typ, eid, attrs) for t, typ, eid, attrs in rows]

    @property
    def nbytes(self) -> int:
        return len(self.data) if self.data is not None else 0

    def __getstate__(self) -> dict[str, Any]:  # pickled whole (no store open): as bytes
        return {"last": self.last, "data": self.encode()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.last, self.data, self.events, self._key, self._size = state["last"], state["data"], None, None, 0


def _decode_events(data: bytes) -> EventChunk:
    last, _ = pickle.loads(zlib.decompress(data))  # noqa: S301 - our own state store's bytes
    return EventChunk(last, None, data)


register(EventChunk, "E", _decode_events)


@dataclass(eq=False)
class BaseChunk:
    """A runner's whole snapshot (its graph), taken every few micro-batches: a logged
    snapshot is the latest base and the log of the events accepted since it."""

    whole: bytes
    _key: str | None = field(default=None, repr=False)
    _size: int = field(default=0, repr=False)

    def encode(self) -> bytes:
        return zlib.compress(self.whole, 1)

    def __getstate__(self) -> dict[str, Any]:
        return {"whole": self.whole}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.whole, self._key, self._size = state["whole"], None, 0


register(BaseChunk, "B", lambda data: BaseChunk(zlib.decompress(data)))


class EventLog:
    """A runner's accepted events whose windows are not all reported, one
    chunk per micro-batch: what it snapshots instead of its graph where a
    chunk store is open, and replays to rebuild the graph on restore."""

    def __init__(self) -> None:
        self.chunks: list[EventChunk] = []
        self.fresh: list[Event] = []  # accepted since the last seal

    def seal(self) -> None:
        """The events accepted since the last seal become a chunk."""
        if self.fresh:
            self.chunks.append(EventChunk(max(e.time for e in self.fresh), self.fresh))
            self.fresh = []

    def prune(self, last_window: Callable[[Any], int], target: int | None) -> None:
        """Drop the chunks none of whose events is in a window from `target` on
        (None: every window was reported)."""
        if target is None:
            self.chunks, self.fresh = [], []
            return
        self.chunks = [c for c in self.chunks if last_window(c.last) >= target]

    def events(self) -> list[Event]:
        """Every logged event, chunk by chunk."""
        return [e for c in self.chunks for e in c.replayed()] + self.fresh

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.chunks)


__all__ = ["BaseChunk", "ChunkStore", "EventChunk", "EventLog", "chunk_store", "content_key", "dumps", "loads",
           "register", "store_closed", "store_open", "tracked"]


# ------------------------------------------------------------------ groups
@dataclass(eq=False)
class ChunkGroup:
    """Chunks referred to as one: a snapshot that keeps many chunks (a long window's kept events, a
    chunk per micro-batch) refers to groups of them that do not change (`grouped`), so that what
    it writes per micro-batch stays small whatever the window's length. Its bytes are its members'
    tags and keys; its members are written and referred to as chunks of their own."""

    members: list[Any]
    _key: str | None = field(default=None, repr=False)
    _size: int = field(default=0, repr=False)

    def encode(self) -> bytes:
        return "\n".join(f"{_KINDS[type(m)][0]}:{content_key(m)[0]}" for m in self.members).encode()


def _decode_group(data: bytes) -> ChunkGroup:
    store = _STORE.get()
    members = []
    for tag, key in _member_keys(data):
        raw = store.source.get(key) if store is not None else None
        if raw is None:
            raise pickle.UnpicklingError(f"the state refers to chunk {key}, which the state store does not hold")
        member = _DECODERS[tag](raw)
        member._key, member._size = key, len(raw)
        members.append(member)
    group = ChunkGroup(members)
    _known(content_key(group)[0], tuple(key for _, key in _member_keys(data)))
    return group


def _member_keys(data: bytes) -> list[tuple[str, str]]:
    """(tag, key) of each member of a group's bytes."""
    return [(tag, key) for tag, key in (line.split(":", 1) for line in data.decode().split("\n"))]


register(ChunkGroup, "G", _decode_group)

GROUP_TAG = "G:"  # a group's key as a tracked reference (`tracked`, `referred`)
_GROUPS: dict[str, tuple[str, ...]] = {}  # group key -> member keys, of the groups this process met
MAX_GROUPS_KNOWN = 100_000


def _known(key: str, members: tuple[str, ...]) -> None:
    if len(_GROUPS) >= MAX_GROUPS_KNOWN:  # the oldest half goes: a group met again is read again
        for old in list(_GROUPS)[: MAX_GROUPS_KNOWN // 2]:
            del _GROUPS[old]
    _GROUPS[key] = members


def referred(refs: set[str], stored: Any) -> set[str]:
    """The chunk keys the tracked references `refs` keep in a state store: a group's own key and its
    members'. A group this process has not met is read from `stored` (a ChunkMap: `items()`)."""
    out = {k for k in refs if not k.startswith(GROUP_TAG)}
    groups = [k[len(GROUP_TAG):] for k in refs if k.startswith(GROUP_TAG)]
    unknown = {g for g in groups if g not in _GROUPS}
    if unknown:
        for key, data in stored.items():
            if key in unknown:
                _known(key, tuple(k for _, k in _member_keys(data)))
    for g in groups:
        out.add(g)
        members = _GROUPS.get(g)
        if members is None:
            raise KeyError(f"the state refers to chunk group {g}, which the state store does not hold")
        out.update(members)
    return out

GROUP_EVERY = 16  # a chunk whose key's number is a multiple of it starts a group: about so many per group


def grouped(chunks: list[Any], known: dict[tuple[str, ...], ChunkGroup]) -> list[Any]:
    """`chunks` as groups and the chunks after the last group (the latest, which change as chunks
    come). A group starts at a chunk chosen by its key alone, so that chunks dropped or cut at the
    front change the first group only; `known` (the groups of the last call, by their members'
    keys) keeps a group's key, so that an unchanged group is not written again."""
    store = _STORE.get()
    if store is None:
        return chunks
    keys = []
    for c in chunks:
        key, data = content_key(c)
        if data is not None:  # encoded for the first time: written, as a snapshot referring to it would
            store.written[key] = data
        keys.append(key)
    starts = [i for i, k in enumerate(keys) if i == 0 or int(k[:8], 16) % GROUP_EVERY == 0]
    out: list[Any] = []
    seen: dict[tuple[str, ...], ChunkGroup] = {}
    for a, b in zip(starts, starts[1:]):
        ident = tuple(keys[a:b])
        group = known.get(ident) or ChunkGroup(list(chunks[a:b]))
        seen[ident] = group
        if ident not in known:  # a new group: its bytes written now (a snapshot finds its key known)
            gkey, gdata = content_key(group)
            if gdata is not None:
                store.written[gkey] = gdata
            _known(gkey, ident)
        out.append(group)
    known.clear()
    known.update(seen)
    return out + list(chunks[starts[-1]:] if starts else chunks)


def ungrouped(items: list[Any], known: dict[tuple[str, ...], ChunkGroup] | None = None) -> list[Any]:
    """The chunks of `grouped`'s list, its groups noted in `known`."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, ChunkGroup):
            if known is not None:
                known[tuple(content_key(m)[0] for m in item.members)] = item
            out.extend(item.members)
        else:
            out.append(item)
    return out
