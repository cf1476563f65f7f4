"""The events a columnar stream keeps between micro-batches, compact.

A stream keeps the valid events whose windows are not all reported. They
are kept only as the kernels read them (`Prepared`: typed arrays, windows,
states), one chunk per micro-batch (`KeptChunk`), never as per-event Python
objects: numbers in int64/float64 arrays, text and other values as object
arrays whose equal values share one object, the pattern state as int8. What
a record said, where only its words keep it (an int beside floats in one
field), is kept too, for that field alone (`spelled`). Not its windows:
`joined` computes them from the times. About 40 bytes per event for Q1
where per-event objects took about 300.

Records are built back from the chunks where one is needed, and only then:
the rows of a few events (the spelling of group values), every kept event
when a stream hands over to the general engine or types its events again
(`raw`).

A chunk is a unit of state too: it never changes once written, its
`content_key` names it (the digest of its encoding), and a stream's
snapshot refers to its chunks by that key where a chunk store is open
(`greta_stream.engine.chunks`): the state of a stream is then a small part
that changes every micro-batch and chunks that are written once and dropped
when their windows are reported (docs/DESIGN.md, "Incremental state").
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from greta_stream.compiler.expressions import format_expr
from greta_stream.engine.chunks import ChunkStore, chunk_store, content_key, dumps, loads, register, tracked
from greta_stream.engine.columnar.columns import MIXES, OTHER, Column
from greta_stream.engine.columnar.plan import KernelPlan
from greta_stream.engine.columnar.prepare import Prepared, local_mask, window_in
from greta_stream.engine.plan import Metrics
from greta_stream.engine.timebase import TIMESTAMP, window_bounds

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


_NO_WINDOWS = np.zeros(0, np.int64)
_NO_WINDOWS.flags.writeable = False


@dataclass(eq=False)
class KeptChunk:
    """The kept events of one micro-batch: their prepared arrays (`prep`, its
    `good` empty: rows are positions in the chunk) and, per field whose kind
    does not keep how the records wrote it, the values as written. Its
    `kmin` and `kmax` are empty: an event's first and last windows follow
    from its time and the plan's window, and `joined` computes them for the
    events together when windows close (16 of a Q1 event's 55 bytes)."""

    prep: Prepared
    spelled: dict[str, np.ndarray] = field(default_factory=dict)
    _key: str | None = field(default=None, repr=False)
    _size: int = field(default=0, repr=False)

    def __len__(self) -> int:
        return len(self.prep.t)

    @property
    def nbytes(self) -> int:
        """Bytes the chunk's arrays take in memory."""
        p = self.prep
        n = p.state.nbytes + p.t.nbytes
        n += sum(c.values.nbytes + c.null.nbytes + c.number.nbytes for c in p.cols.values())
        return n + sum(a.nbytes for a in self.spelled.values())

    def encode(self) -> bytes:
        return encode(self)

    def subset(self, sel: np.ndarray) -> KeptChunk:
        """A new chunk of the events of `sel`."""
        p = self.prep
        cols = {a: Column(c.kind, c.values[sel], c.null[sel], c.number[sel]) for a, c in p.cols.items()}
        prep = Prepared(p.good, p.state[sel], p.t[sel], _NO_WINDOWS, _NO_WINDOWS, cols, p.int_time, [], p.metrics,
                        p.time_kind)
        return KeptChunk(prep, {f: v[sel] for f, v in self.spelled.items()})

    # ------------------------------------------------------------ records
    def raw(self, name: str, types: list[str], fields: Any, rows: np.ndarray | None = None) -> np.ndarray:
        """Field `name` of the chunk's events (of `rows`) as the records held it: an object array."""
        p = self.prep
        sel = slice(None) if rows is None else rows
        if name in self.spelled:
            return self.spelled[name][sel]
        if name == fields.type:
            return np.asarray(types, dtype=object)[p.state[sel]]
        if name == fields.time:
            t = p.t[sel]
            if p.time_kind == TIMESTAMP:
                return _objects([_EPOCH + timedelta(microseconds=int(us)) for us in t.tolist()])
            return _objects(t.tolist())
        col = p.cols.get(name)
        if col is None:
            return _objects([None] * (len(self) if rows is None else len(rows)))
        values = col.values[sel]
        out = _objects(values.tolist()) if col.kind != OTHER else values.copy()
        null = col.null[sel]
        if null.any():
            out[null] = None
        return out


def compact(prep: Prepared, raw_of: Any, names: list[str], *, int_times: bool = True) -> KeptChunk:
    """A batch's prepared good events as a kept chunk: `good` dropped, the state
    as int8, equal values of object columns sharing one object; `raw_of(name)`
    gives a field's values as written (over the good events) for the fields
    whose typed kind loses the spelling (ints among floats). `int_times` False:
    the input holds no int time at all (nothing to look for)."""
    cols = {a: _shared(c) for a, c in prep.cols.items()}
    spelled: dict[str, np.ndarray] = {}
    for name in names:
        col = prep.cols.get(name)
        if (col is not None and col.kind in MIXES) or (name == names[1] and not prep.int_time
                                                       and prep.time_kind != TIMESTAMP and int_times
                                                       and _has_ints(raw_of(name))):
            spelled[name] = _shared_objects(raw_of(name))
    small = Prepared(np.zeros(0, np.int64), prep.state.astype(np.int8), prep.t, _NO_WINDOWS, _NO_WINDOWS, cols,
                     prep.int_time, [], Metrics(), prep.time_kind)
    return KeptChunk(small, spelled)


def joined(chunks: list[KeptChunk], plan: KernelPlan) -> Prepared:
    """The chunks' prepared events as one (rows numbered 0.. across chunks),
    with their first and last windows in `plan`'s window."""
    first = chunks[0].prep
    if len(chunks) == 1:
        t, state, cols = first.t, first.state.astype(np.int64), first.cols
    else:
        preps = [c.prep for c in chunks]
        t = np.concatenate([p.t for p in preps])
        state = np.concatenate([p.state for p in preps]).astype(np.int64)  # the kernels' type (compiled once)
        cols = {a: Column(c.kind, *(np.concatenate([getattr(p.cols[a], f) for p in preps])
                                    for f in ("values", "null", "number")))
                for a, c in first.cols.items()}
    kmin, kmax = window_bounds(t, window_in(plan, first.time_kind), first.int_time)
    return Prepared(np.arange(len(t)), state, t, kmin, kmax, cols, first.int_time, [], first.metrics,
                    first.time_kind)


def same_kinds(a: Prepared, b: Prepared) -> bool:
    """Whether two chunks' columns are typed alike (they join without typing again)."""
    return (a.int_time, a.time_kind) == (b.int_time, b.time_kind) and all(
        c.kind == b.cols[n].kind for n, c in a.cols.items())


class KeptView:
    """The kept events' fields as records held them, read row by row on demand
    (`Input.raw`'s signature): what the kernel driver asks for the spelling of
    group values, without building every record."""

    def __init__(self, chunks: list[KeptChunk], types: list[str], fields: Any) -> None:
        self.chunks, self.types, self.fields = chunks, types, fields
        self.starts = np.cumsum([0, *(len(c) for c in chunks)])

    def raw(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        if rows is None:
            parts = [c.raw(name, self.types, self.fields) for c in self.chunks]
            return np.concatenate(parts) if parts else _objects([])
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty(len(rows), dtype=object)
        which = np.searchsorted(self.starts, rows, side="right") - 1
        for i in np.unique(which).tolist():
            at = which == i
            out[at] = self.chunks[i].raw(name, self.types, self.fields, rows[at] - self.starts[i])
        return out


# ------------------------------------------------------------------ state store
# A chunk's bytes: this mark, the length of a pickle of its fields with each typed array in it replaced by
# (_SLOT, dtype, shape, offset), that pickle, then every typed array's bytes (each at a multiple of 8),
# compressed (fast level). Decoded, the arrays are views of one buffer: one array object each, no
# bytes object of its own. Chunks written before this layout are one pickle of the same fields.
_PACKED = b"GKC2"
_SLOT = "\x00array"
_HEAD = struct.Struct("<4sQ")


def encode(chunk: KeptChunk) -> bytes:
    """A chunk's bytes (the layout above)."""
    p = chunk.prep
    fields = {"state": p.state, "t": p.t, "int_time": p.int_time,
              "time_kind": p.time_kind, "spelled": chunk.spelled,
              "cols": {a: (c.kind, c.values, c.null, c.number) for a, c in p.cols.items()}}
    body: list[bytes] = []
    size = 0

    def slot(a: np.ndarray) -> tuple[Any, ...]:
        nonlocal size
        raw = np.ascontiguousarray(a).tobytes()
        at, size = size, size + -(-len(raw) // 8) * 8
        body.append(raw.ljust(size - at, b"\0"))
        return (_SLOT, a.dtype.str, a.shape, at)

    meta = pickle.dumps(_mapped(fields, _typed, slot), protocol=pickle.HIGHEST_PROTOCOL)
    meta = meta.ljust(-(-len(meta) // 8) * 8, b"\0")  # pickle.loads stops at its STOP opcode
    return zlib.compress(_HEAD.pack(_PACKED, len(meta)) + meta + b"".join(body), 1)


def decode(data: bytes) -> KeptChunk:
    raw = zlib.decompress(data)
    if raw[:4] != _PACKED:
        a = pickle.loads(raw)  # noqa: S301 - our own state store's bytes (written before the packed layout)
    else:
        n = _HEAD.unpack_from(raw)[1]
        start = _HEAD.size + n
        # writable, as arrays made in the run are; one buffer for all of them
        buf = np.frombuffer(bytearray(memoryview(raw)[start:]), np.uint8)
        meta = pickle.loads(memoryview(raw)[_HEAD.size:start])  # noqa: S301 - our own state store's bytes
        a = _mapped(meta, _slot, lambda s: np.ndarray(s[2], np.dtype(s[1]), buffer=buf, offset=s[3]))
    cols = {n: Column(kind, _shared_objects(values) if values.dtype.hasobject else values, null, number)
            for n, (kind, values, null, number) in a["cols"].items()}  # text: the worker's one object per value
    # chunks written before `joined` computed the windows hold them too: not kept
    prep = Prepared(np.zeros(0, np.int64), a["state"], a["t"], _NO_WINDOWS, _NO_WINDOWS, cols, a["int_time"], [],
                    Metrics(), a["time_kind"])
    return KeptChunk(prep, a["spelled"])


def _mapped(obj: Any, leaf: Callable[[Any], bool], call: Callable[[Any], Any]) -> Any:
    """`obj` (dicts and tuples of values) with each value `leaf` picks replaced by `call(it)`."""
    if leaf(obj):
        return call(obj)
    if type(obj) is dict:
        return {k: _mapped(v, leaf, call) for k, v in obj.items()}
    if type(obj) is tuple:
        return tuple(_mapped(v, leaf, call) for v in obj)
    return obj


def _typed(obj: Any) -> bool:
    """A typed array: one the packed layout holds as its bytes."""
    return isinstance(obj, np.ndarray) and not obj.dtype.hasobject


def _slot(obj: Any) -> bool:
    """A typed array's slot in a packed chunk's fields."""
    return type(obj) is tuple and len(obj) == 4 and obj[0] == _SLOT


register(KeptChunk, "", decode)  # keyed by the key alone, as snapshots have always held them


# ------------------------------------------------------------------ helpers
def release_memory() -> None:
    """Give the heap memory freed since the last call back to the system (glibc's
    malloc_trim): a window's computation allocates several times the kept events
    for a moment; without this the process keeps that peak as its size.

    The first call also fixes glibc's mmap threshold at its initial 128 KiB (unless
    MALLOC_MMAP_THRESHOLD_ sets one): glibc raises it to the size of every mapped
    block freed, so that after the first window's arrays (the kept events joined)
    those come from the heap, and the kept chunks allocated between them hold the
    heap's pages once they are freed. On the operator's steps over two worker
    processes (a nested Kleene at 40 against 5 minutes) it took the memory per
    kept event from 341 to 204 bytes (docs/DESIGN.md, "A worker's memory")."""
    global _SETTLED
    if _LIBC is None:
        return
    if not _SETTLED:
        _SETTLED = True
        if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
            _LIBC.mallopt(_M_MMAP_THRESHOLD, 128 << 10)
    _LIBC.malloc_trim(0)


def _glibc() -> Any:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 - both there, or neither is used
    except (OSError, AttributeError):  # not glibc
        return None
    return libc


_LIBC = _glibc()
_M_MMAP_THRESHOLD = -3  # mallopt's parameter
_SETTLED = False



def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


# Text a worker's chunks hold, one object per value across chunks and runners (each micro-batch brings
# its own string objects: a company's name would be one object per chunk). Emptied when it holds more
# than `_TEXTS_MAX` values, so that values that left every window do not stay.
_TEXTS: dict[str, str] = {}
_TEXTS_MAX = 1 << 16


def _shared_objects(values: Any) -> np.ndarray:
    """An object array whose equal (hashable) values are one object each: text across chunks (`_TEXTS`),
    other values within the chunk."""
    values = values.tolist() if isinstance(values, np.ndarray) else list(values)
    if len(_TEXTS) > _TEXTS_MAX:
        _TEXTS.clear()
    seen: dict[Any, Any] = {}
    texts = _TEXTS
    with contextlib.suppress(TypeError):  # an unhashable value (a list): left as it is
        values = [texts.setdefault(v, v) if type(v) is str else
                  seen.setdefault((type(v), v), v) if v is not None else None for v in values]
    return _objects(values)


def _shared(col: Column) -> Column:
    return Column(col.kind, _shared_objects(col.values), col.null, col.number) if col.kind == OTHER else col


def _has_ints(values: Any) -> bool:
    return any(type(v) is int for v in (values.tolist() if isinstance(values, np.ndarray) else values))


__all__ = ["ChunkStore", "KeptChunk", "KeptView", "chunk_store", "compact", "content_key", "decode", "dumps",
           "encode", "joined", "loads", "same_kinds", "tracked"]


# ------------------------------------------------------------ kept under another plan
def kept_as(plan: KernelPlan) -> dict[str, Any]:
    """What a stream's kept events were prepared with (saved beside them): the
    plan's types (the slots) and the local predicates its
    preparation dropped events by."""
    return {"types": list(plan.types), "local": _local_key(plan)}


def kept_for(plan: KernelPlan, chunks: list[KeptChunk], saved: dict[str, Any]) -> list[KeptChunk]:
    """Chunks kept under another plan (`kept_as` says which: a family or union of
    more queries, or other ones) as `plan`'s preparation would have kept them:
    each event's slot among its types (events of no type of it left out),
    filtered by its local predicates, the columns it reads."""
    types = tuple(saved.get("types", plan.types))
    if types != plan.types:  # kept by a union of other types
        chunks = [KeptChunk(reslotted(c.prep, types, plan.types), c.spelled) for c in chunks]
        chunks = [c if (c.prep.state >= 0).all() else c.subset(c.prep.state >= 0) for c in chunks
                  if (c.prep.state >= 0).any()]
    if plan.local and saved.get("local", _local_key(plan)) != _local_key(plan):
        # kept by a union (which keeps what any query's predicates take): keep what this plan's take
        chunks = [c.subset(keep) for c in chunks if (keep := local_mask(plan, c.prep.cols, c.prep.state)).any()]
    needed = set().union(*(plan.cq.needed_by_type[t] for t in plan.types))
    chunks = [c if set(c.prep.cols) <= needed else  # kept for queries that read more attributes
              KeptChunk(replace(c.prep, cols={a: v for a, v in c.prep.cols.items() if a in needed}), c.spelled)
              for c in chunks]
    return chunks  # their windows: `joined`'s, in this plan's window


def _local_key(plan: KernelPlan) -> list[tuple[str, str]]:
    """The local predicates a preparation drops events by, per event type (none under contiguous)."""
    if plan.contiguous:
        return []
    states = [*plan.states, *plan.negs]
    return sorted((states[i].type, format_expr(e)) for i, e in plan.local)


def reslotted(prep: Prepared, types: tuple[str, ...], to: tuple[str, ...]) -> Prepared:
    """The prepared events (slots of `types`) with the slots of the types `to` (-1: none of them)."""
    if types == to:
        return prep
    slot = np.array([to.index(t) if t in to else -1 for t in types], np.int64)
    return replace(prep, state=slot[prep.state])


def rewindowed(prep: Prepared, plan: KernelPlan) -> Prepared:
    """The prepared events with the first and last windows of `plan`'s window spec."""
    kmin, kmax = window_bounds(prep.t, window_in(plan, prep.time_kind), prep.int_time)
    return replace(prep, kmin=kmin, kmax=kmax)
