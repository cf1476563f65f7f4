"""Where each query of a stream keeps its state: the stream's shard layout.

The operator groups events by an int key. A key names a *slot* and a shard
of it: a slot holds the queries that shard by the same attributes, and its
shards hold whole groups of each of them (`hash(attribute values) % count`),
so a window's rows are final when a shard emits them. An event goes once
to each slot that some query needs (and so is read and parsed once, and
shuffled once per slot).

A query's slot is fixed when it joins the stream and never depends on the
other queries: it is the slot whose attributes are its own GROUP-BY
attributes (a new slot when there is none yet). So queries joining or
leaving never move another query's state, and its rows never depend on its
neighbours. A checkpoint written before slots existed shards every query
by the GROUP-BY attributes all of them shared: those become slot 0, and the
queries it held stay there.

The layout is a small JSON file in the stream's checkpoint folder
(`greta-layout.json`), written before the stream starts and only ever
extended: slots are never renumbered, and the shard count never changes (a
checkpoint's state is spread over its count of shards; another count would
put partitions in the wrong shard).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from greta_stream.choices import OPERATORS
from greta_stream.errors import ConfigError
from greta_stream.runtime.queryset import QuerySet, run_fingerprint

LAYOUT_FILE = "greta-layout.json"
# The stateful operators: Spark's `transformWithStateInPandas`, each shard's state a small
# value and chunks of kept events written once (`shard.step_incremental`); and
# `applyInPandasWithState`, where the design started, each shard's state one value
# rewritten whole every micro-batch (`shard.step`). A checkpoint keeps its operator.
INCREMENTAL, WHOLE = OPERATORS  # choices.Operator: the default first
DEFAULT_OPERATOR = INCREMENTAL
_FORMAT = 1
_SLOT_SPAN = 1 << 16  # slot j's keys are the smallest ints from j * _SLOT_SPAN that Spark spreads evenly
MAX_SHARDS = 0xFFFF


def spark_partition(key: int, partitions: int) -> int:
    """The shuffle partition Spark's hash partitioning gives an int grouping
    key: pmod(Murmur3_x86_32.hashInt(key, seed 42), partitions)."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    k = rotl((key & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
    h = (rotl(42 ^ k, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= 4  # length in bytes
    h ^= h >> 16
    h = h * 0x85EBCA6B & 0xFFFFFFFF
    h ^= h >> 13
    h = h * 0xC2B2AE35 & 0xFFFFFFFF
    h ^= h >> 16
    return (h - (1 << 32) if h >= 1 << 31 else h) % partitions


@lru_cache(maxsize=256)
def slot_keys(count: int, slot: int = 0) -> tuple[int, ...]:
    """The grouping key of each of `count` shards of `slot`: the smallest ints
    from `slot * 65536` that Spark hashes to partitions 0, 1, ... of `count`.
    So with P shuffle partitions, P a divisor of `count` (the default: 2
    shards per core), shard s runs in partition s mod P and every core gets
    as many shards of each slot. Keying by the shard number itself put 3 of 4
    shards on one core of two."""
    keys: list[int] = []
    for s in range(count):
        k = slot * _SLOT_SPAN
        while spark_partition(k, count) != s or k in keys:
            k += 1
        keys.append(k)
    return tuple(keys)


def shard_keys(count: int) -> tuple[int, ...]:
    """The keys of slot 0 (the only slot of a stream of one query)."""
    return slot_keys(count, 0)


def attrs_id(attrs: Iterable[str]) -> int:
    """A 64-bit digest of a slot's shard attributes, written into each shard's
    state and checked when it is read back."""
    text = json.dumps(list(attrs))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


@dataclass(frozen=True)
class StreamLayout:
    """A stream's shard count, its slots (each a tuple of shard attributes)
    and the slot of each query it has run; see the module docstring."""

    shards: int
    slots: tuple[tuple[str, ...], ...] = ()
    placed: tuple[tuple[str, int], ...] = ()  # query name -> slot, in the order they joined
    legacy: bool = False  # slot 0 is a checkpoint's one shard key from before slots
    operator: str = DEFAULT_OPERATOR
    # query name -> (run fingerprint, life, present): a name's life counts up when it comes back with
    # another text or after it was deleted, and salts its state (`RunSpec.life`), so that a state its
    # earlier life left in shards no batch has visited since is never taken for its own
    lives: tuple[tuple[str, tuple[str, int, bool]], ...] = ()
    control: bool = False  # the stream reads control rows (`spark.control`): fixed when it first runs
    _index: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    _lives: dict[str, tuple[str, int, bool]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.shards <= MAX_SHARDS:
            raise ConfigError(f"shards must be between 1 and {MAX_SHARDS}, got {self.shards}")
        if self.operator not in OPERATORS:
            raise ConfigError(f"unknown operator {self.operator!r}; use {' or '.join(OPERATORS)}")
        self._index.update(self.placed)
        self._lives.update(self.lives)

    # ------------------------------------------------------------ placing
    def slot_of(self, name: str) -> int:
        return self._index[name]

    def with_queries(self, queries: QuerySet) -> StreamLayout:
        """This layout with a slot for every query of `queries` not placed yet
        (and for the paused ones, which keep theirs). A query whose text now
        groups by attributes its slot does not shard by moves to one that fits
        (its state starts afresh anyway: its run fingerprint changed)."""
        slots, placed = list(self.slots), dict(self.placed)
        lives = {name: (fp, life, name in queries.paused) for name, (fp, life, _) in self.lives}
        for name, spec in queries:
            fp = run_fingerprint(spec)
            was = self.life_of(name)
            lives[name] = (fp, 0 if was is None else was[1] + (was[0] != fp or not was[2]), True)
            wanted = tuple(spec.query.group_by)
            at = placed.get(name)
            if at is not None and set(slots[at]) <= set(wanted):
                continue
            if wanted not in slots:
                slots.append(wanted)
            placed[name] = slots.index(wanted)
        if tuple(slots) == self.slots and tuple(placed.items()) == self.placed and tuple(lives.items()) == self.lives:
            return self
        return StreamLayout(self.shards, tuple(slots), tuple(placed.items()), self.legacy, self.operator,
                            tuple(lives.items()), self.control)

    def life_of(self, name: str) -> tuple[str, int, bool] | None:
        return self._lives.get(name)

    def members(self, queries: QuerySet) -> dict[int, QuerySet]:
        """The queries of each slot that has running ones, each slot's set
        keeping the saved state of every paused query it holds."""
        by_slot: dict[int, list[tuple[str, Any]]] = {}
        for name, spec in queries:
            life = self.life_of(name)
            if life is not None and life[1] != spec.life:
                spec = replace(spec, life=life[1])
            by_slot.setdefault(self.slot_of(name), []).append((name, spec))
        return {slot: QuerySet.of(specs, paused=queries.paused, sharing=queries.sharing, epoch=queries.epoch)
                for slot, specs in sorted(by_slot.items())}

    # ------------------------------------------------------------ keys
    def keys(self, slot: int) -> tuple[int, ...]:
        return slot_keys(self.shards, slot)

    def locate(self, key: int) -> tuple[int, int] | None:
        """(slot, shard index) of a grouping key, or None for a key of no slot."""
        slot = key // _SLOT_SPAN
        if not 0 <= slot < len(self.slots):
            return None
        keys = self.keys(slot)
        return (slot, keys.index(key)) if key in keys else None

    # ------------------------------------------------------------ the file
    def to_dict(self) -> dict[str, Any]:
        return {"format": _FORMAT, "shards": self.shards, "slots": [list(s) for s in self.slots],
                "queries": dict(self.placed), "legacy": self.legacy, "operator": self.operator,
                "lives": {name: list(life) for name, life in self.lives}, "control": self.control}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> StreamLayout:
        if doc.get("format") != _FORMAT:
            raise ConfigError(f"unknown stream layout format {doc.get('format')!r}: this checkpoint was written "
                              "by a newer greta-stream")
        return cls(int(doc["shards"]), tuple(tuple(s) for s in doc["slots"]),
                   tuple((str(n), int(s)) for n, s in doc["queries"].items()), bool(doc.get("legacy", False)),
                   str(doc.get("operator", WHOLE)),
                   tuple((str(n), (str(fp), int(life), bool(present)))
                         for n, (fp, life, present) in doc.get("lives", {}).items()),
                   bool(doc.get("control", False)))

    def save(self, checkpoint: str | Path) -> None:
        """Write the layout into the checkpoint folder (atomically)."""
        folder = Path(checkpoint)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{LAYOUT_FILE}.tmp"
        tmp.write_text(json.dumps(self.to_dict(), indent=1))
        os.replace(tmp, folder / LAYOUT_FILE)


def open_layout(checkpoint: str | Path | None, queries: QuerySet, shards: int | None, default_shards: int,
                operator: str | None = None, control: bool = False) -> StreamLayout:
    """The layout of the stream checkpointed in `checkpoint` for `queries`,
    extended with their new queries and saved (None: a stream whose
    checkpoint is not ours to write, e.g. `trend_aggregates`'s; a fresh
    layout). `shards` and `operator` are what the run asks for (None: the
    checkpoint's, or `default_shards` and `DEFAULT_OPERATOR` for a new
    checkpoint); a checkpoint of another count or operator is refused.
    `control`: a new checkpoint's stream reads control rows (`spark.control`)."""
    folder = None if checkpoint is None or "://" in str(checkpoint) else Path(checkpoint)
    saved = read_layout(folder) if folder is not None else None
    if saved is not None:
        layout = saved
        if shards is not None and shards != layout.shards:
            raise ConfigError(f"the checkpoint {folder} was written with {layout.shards} shards, this run asks for "
                              f"{shards}: run with shards = {layout.shards} (or leave shards unset), or start from a "
                              "new checkpoint")
        if operator is not None and operator != layout.operator:
            raise ConfigError(f"the checkpoint {folder} was written by the {layout.operator} operator, this run asks "
                              f"for {operator}: run with operator = {layout.operator} (or leave operator unset), or "
                              "start from a new checkpoint")
    elif folder is not None and (folder / "offsets").is_dir():
        # A checkpoint from before layouts: one slot, keyed by the GROUP-BY attributes its queries shared
        if operator not in (None, WHOLE):
            raise ConfigError(f"the checkpoint {folder} was written by the {WHOLE} operator, this run asks for "
                              f"{operator}: leave operator unset, or start from a new checkpoint")
        layout = StreamLayout(shards or default_shards, (queries.shard_attrs,),
                              tuple((n, 0) for n in (*queries.names, *sorted(queries.paused))), legacy=True,
                              operator=WHOLE)
    else:
        layout = StreamLayout(shards or default_shards, operator=operator or DEFAULT_OPERATOR,
                              control=control and folder is not None)
    extended = layout.with_queries(queries)
    if folder is not None and (extended != layout or saved is None):
        extended.save(folder)
    return extended


def read_layout(checkpoint: str | Path) -> StreamLayout | None:
    """The layout saved in a stream's checkpoint folder, or None (no stream there yet)."""
    path = Path(checkpoint) / LAYOUT_FILE
    try:
        return StreamLayout.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read the stream layout {path}: {exc}") from None
