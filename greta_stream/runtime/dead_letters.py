"""What the dead letters of a run say, in a line a user reads: reasons with counts, and the mistake
they point to.

A query whose attribute is misspelled (`S.prize` for `S.price`) runs, and
every event of its type is dead-lettered as `missing_attribute`; a type
misspelled under a NOT (`NOT end X`) matches nothing, and the negation never
applies: the numbers change without a word unless someone reads the dead
letters. A tally (`DeadLetters`) counts the reasons and keeps the first
detail of each and the attribute names the refused events do have;
`name_problems` reads it with the events seen per type and names each name
of the query that the input shows to be a mistake, part by part, with the
closest name the input has. `evaluate`, `run` and the service print or
report the same text.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.ingest import DeadLetter

_ATTRS_KEPT = 500  # attribute names remembered per type (what the events have); past it, no guess
_DETAILS_KEPT = 20  # distinct details counted per reason; later new ones count as "other"
_DETAILS_SHOWN = 3  # the most common details a summary names per reason


@dataclass
class DeadLetters:
    """A running tally of dead letters (`add`), worded by `summary`; read by `name_problems`."""

    by_reason: Counter[str] = field(default_factory=Counter)
    first_detail: dict[str, str] = field(default_factory=dict)
    details: dict[str, Counter[str]] = field(default_factory=dict)  # reason -> detail -> letters (bounded)
    missing: Counter[tuple[str, str]] = field(default_factory=Counter)  # (type, attribute) -> events
    have: dict[str, set[str]] = field(default_factory=dict)  # type -> attributes its dead events have

    def add(self, dl: DeadLetter) -> None:
        self.by_reason[dl.reason] += 1
        self.first_detail.setdefault(dl.reason, dl.detail)
        self._count_detail(dl.reason, dl.detail, 1)
        if dl.reason == "missing_attribute" and dl.event_type is not None and dl.attribute is not None:
            self.missing[(dl.event_type, dl.attribute)] += 1
            if isinstance(dl.record, dict):
                seen = self.have.setdefault(dl.event_type, set())
                if len(seen) < _ATTRS_KEPT:
                    seen.update(str(k) for k in dl.record)

    def merge(self, other: DeadLetters) -> DeadLetters:
        """Another tally added to this one (two runs of one query)."""
        self.by_reason.update(other.by_reason)
        for reason, detail in other.first_detail.items():
            self.first_detail.setdefault(reason, detail)
        for reason, counted in other.details.items():
            for detail, n in counted.items():
                self._count_detail(reason, detail, n)
        self.missing.update(other.missing)
        for etype, attrs in other.have.items():
            self.have.setdefault(etype, set()).update(attrs)
        return self

    @property
    def total(self) -> int:
        return sum(self.by_reason.values())

    def _count_detail(self, reason: str, detail: str, n: int) -> None:
        counted = self.details.setdefault(reason, Counter())
        if detail in counted or len(counted) < _DETAILS_KEPT:
            counted[detail] += n

    def summary(self) -> str:
        """`12 dead letters: 10 missing_attribute (Stock events need attribute 'prize'), 2 malformed (...)`; "" for none.
        A reason whose letters say different things names its most common details with their counts:
        `2 missing_attribute (1: attribute 'price' is null ...; 1: attribute 'company' is missing ...)`."""
        if not self.total:
            return ""
        parts = [f"{n:,} {reason}" + self._said(reason, n) for reason, n in self.by_reason.most_common()]
        return f"{self.total:,} dead letter{'s' if self.total != 1 else ''}: " + ", ".join(parts)

    def _said(self, reason: str, n: int) -> str:
        counted = self.details.get(reason, Counter())
        if len(counted) <= 1 or len(counted) >= _DETAILS_KEPT:  # one wording, or one per letter (`late`): the first
            return f" ({self.first_detail[reason]})" if self.first_detail.get(reason) else ""
        shown = counted.most_common(_DETAILS_SHOWN)
        said = [f"{k:,}: {detail}" for detail, k in shown]
        rest = n - sum(k for _, k in shown)
        if rest:
            said.append(f"{rest:,} other")
        return f" ({'; '.join(said)})"

    def carried(self, etype: str, typed: int) -> set[str] | None:
        """The attributes the `typed` events of `etype` carry, as far as the dead letters tell:
        None when some event of the type was not refused for a missing attribute (it carried every
        attribute the query needs) or when the names kept are too many to be sure of."""
        refused = sum(c for (t, _), c in self.missing.items() if t == etype)
        have = self.have.get(etype, set())
        if typed > refused or len(have) >= _ATTRS_KEPT:
            return None
        return have


def name_problems(query: CompiledQuery, typed: Mapping[str, int], other_types: Mapping[str, int],
                  carried: Callable[[str, int], set[str] | None]) -> list[str]:
    """Every name of `query` the input shows to be a mistake, one line each (with the closest name
    the input has): the query's types when no event is of any of them; else, part by part, a type
    (positive or negated) no event has while a close one came, and an attribute (of a predicate,
    partition, GROUP-BY or aggregate) that no event of its alias's type carries. `typed`: events of
    the query's types by type; `other_types`: events of other types by type (some names);
    `carried(type, events)`: the attribute names those events of the type carry, None when not
    known (`DeadLetters.carried`, `Census.carried`). An attribute a record holds as null is
    carried (a null is no misspelling)."""
    if not any(typed.get(t) for t in query.by_type):
        return [_no_type_problem(query.by_type, other_types)] if other_types else []
    problems = []
    for etype, aliases in query.by_type.items():
        if typed.get(etype, 0):
            continue
        close = _close(etype, other_types)
        if close:
            problems.append(f"type {etype!r} of {_parts(query, aliases)} matches no event; "
                            f"did you mean {close!r}? (events of other types: {_most(other_types)})")
            continue
        own = _close(etype, [t for t, n in typed.items() if n])  # another part's type (`NOT SEQ(halt C, Halt D)`)
        if own:
            problems.append(f"type {etype!r} of {_parts(query, aliases)} matches no event; did you mean {own!r}? "
                            f"({typed[own]:,} events of {own}, the type of {_parts(query, query.by_type[own])})")
    for etype, aliases in query.by_type.items():
        have = carried(etype, typed.get(etype, 0)) if typed.get(etype, 0) else None
        if have is None:
            continue
        for attr in sorted(query.needed_by_type[etype] - have):
            readers = [a for a in aliases if attr in query.aliases[a].needed]
            close = _close(attr, have)
            problems.append(
                f"attribute {attr!r} of {_parts(query, readers)} is on no {etype} event (they have "
                f"{', '.join(sorted(have)) if have else 'no attributes'})"
                + (f"; did you mean {close!r}?" if close else f"; is {attr!r} misspelled in the query?"))
    return problems


@dataclass
class Census:
    """What a sample of an input says of any query's names, read once for every query: events by
    type and the attribute names each type's events carry (null values included; past
    _ATTRS_KEPT names a type, none is said to be missing)."""

    types: Counter[str] = field(default_factory=Counter)
    keys: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, records: Iterable[Any], type_field: str) -> Census:
        out = cls()
        for record in records:
            etype = record.get(type_field) if isinstance(record, dict) else None
            if isinstance(etype, str) and etype:
                out.types[etype] += 1
                seen = out.keys.setdefault(etype, set())
                if len(seen) < _ATTRS_KEPT:
                    seen.update(str(k) for k in record)
        return out

    def problems(self, query: CompiledQuery) -> list[str]:
        """`name_problems` of `query` over these records."""
        typed = {t: self.types[t] for t in query.by_type if t in self.types}
        others = {t: n for t, n in self.types.items() if t not in query.by_type}
        return name_problems(query, typed, others, self.carried)

    def carried(self, etype: str, typed: int) -> set[str] | None:
        have = self.keys.get(etype, set())
        return None if len(have) >= _ATTRS_KEPT else have


def _parts(query: CompiledQuery, aliases: Iterable[str]) -> str:
    """`S` or `X (under NOT)`, for the aliases named (an unrolled copy is its alias)."""
    specs = {query.aliases[a].name: query.aliases[a] for a in aliases}
    return ", ".join(a if spec.positive else f"{a} (under NOT)" for a, spec in specs.items())


def _close(name: str, known: Iterable[str], cutoff: float = 0.75) -> str | None:
    """The name of `known` that `name` most likely meant: the same but for case, else a close spelling
    (a name of one part is named only when close: an absent type may be no mistake at all)."""
    known = list(known)
    by_case = {k.lower(): k for k in known}
    return by_case.get(name.lower()) or next(iter(difflib.get_close_matches(name, known, n=1, cutoff=cutoff)), None)


def _most(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{t} ({n:,})" for t, n in Counter(counts).most_common(8)) + (
        f" and {len(counts) - 8} more" if len(counts) > 8 else "")


def _no_type_problem(types: Iterable[str], other_types: Mapping[str, int]) -> str:
    """No event was of a type of the query but events of other types came: that, with the types the
    events have and the closest one to each of the query's (a misspelled or miscased type, most likely)."""
    wanted = sorted(set(types))
    guesses = [f"{close!r} for {t!r}" for t in wanted if (close := _close(t, other_types, cutoff=0.6))]
    return (f"no event is of a type of the query ({', '.join(wanted)}); the events' types are {_most(other_types)}"
            + (f"; did you mean {', '.join(guesses)}?" if guesses else ""))


def tally(dead: list[DeadLetter]) -> DeadLetters:
    out = DeadLetters()
    for dl in dead:
        out.add(dl)
    return out


__all__ = ["Census", "DeadLetters", "name_problems", "tally"]
