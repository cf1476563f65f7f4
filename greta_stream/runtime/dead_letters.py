"""What the dead letters of a run say, in a line a user reads: reasons with counts, and the mistake
they point to.

A query whose attribute is misspelled (`S.prize` for `S.price`) runs, and
every event of its type is dead-lettered as `missing_attribute`: the run
gives no row and no error unless someone reads the dead letters. A tally
(`DeadLetters`) counts the reasons, keeps the first detail of each, and
when every event of a pattern type was dead-lettered for one missing
attribute, says so (`suspect`): which attribute, and which ones the events
do have. `evaluate`, `run` and the service print or report the same text.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from greta_stream.engine.ingest import DeadLetter

_ATTRS_KEPT = 50  # attribute names remembered per type (what the events have)


@dataclass
class DeadLetters:
    """A running tally of dead letters (`add`), worded by `summary` and `suspect`."""

    by_reason: Counter[str] = field(default_factory=Counter)
    first_detail: dict[str, str] = field(default_factory=dict)
    missing: Counter[tuple[str, str]] = field(default_factory=Counter)  # (type, attribute) -> events
    have: dict[str, set[str]] = field(default_factory=dict)  # type -> attributes its dead events have

    def add(self, dl: DeadLetter) -> None:
        self.by_reason[dl.reason] += 1
        self.first_detail.setdefault(dl.reason, dl.detail)
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
        self.missing.update(other.missing)
        for etype, attrs in other.have.items():
            self.have.setdefault(etype, set()).update(attrs)
        return self

    @property
    def total(self) -> int:
        return sum(self.by_reason.values())

    def summary(self) -> str:
        """`12 dead letters: 10 missing_attribute (Stock events need attribute 'prize'), 2 malformed (...)`; "" for none."""
        if not self.total:
            return ""
        parts = [f"{n:,} {reason}" + (f" ({self.first_detail[reason]})" if self.first_detail.get(reason) else "")
                 for reason, n in self.by_reason.most_common()]
        return f"{self.total:,} dead letter{'s' if self.total != 1 else ''}: " + ", ".join(parts)

    def suspect(self, processed: int) -> str | None:
        """When no event was processed and the events of a type were all dead-lettered for one missing
        attribute: that, as an error to show (a misspelled attribute, most likely)."""
        if processed or not self.missing:
            return None
        (etype, attr), n = self.missing.most_common(1)[0]
        if n < sum(c for (t, _), c in self.missing.items() if t == etype):
            return None  # the events of that type lack different attributes: no one name to point at
        have = sorted(self.have.get(etype, set()))
        return (f"every {etype} event ({n:,}) was dead-lettered: they have no attribute {attr!r} "
                f"(they have {', '.join(have) if have else 'no attributes'}); is {attr!r} misspelled in the query?")


def type_problem(types: Iterable[str], processed: int, other_types: Mapping[str, int]) -> str | None:
    """When no event was of a type of the query but events of other types came: that, with the types
    the events have and the closest one to each of the query's (a misspelled or miscased type, most likely)."""
    if processed or not other_types:
        return None
    wanted = sorted(set(types))
    seen = ", ".join(f"{t} ({n:,})" for t, n in Counter(other_types).most_common(8))
    more = len(other_types) - 8
    guesses = []
    for t in wanted:
        by_case = {o.lower(): o for o in other_types}
        close = by_case.get(t.lower()) or next(iter(difflib.get_close_matches(t, list(other_types), n=1)), None)
        if close:
            guesses.append(f"{close!r} for {t!r}")
    return (f"no event is of a type of the query ({', '.join(wanted)}); the events' types are {seen}"
            + (f" and {more} more" if more > 0 else "") + (f"; did you mean {', '.join(guesses)}?" if guesses else ""))


def tally(dead: list[DeadLetter]) -> DeadLetters:
    out = DeadLetters()
    for dl in dead:
        out.add(dl)
    return out


__all__ = ["DeadLetters", "tally", "type_problem"]
