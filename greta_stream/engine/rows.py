"""Result rows: the one place a window's exact aggregates become a row.

SEMANTICS.md section 4: a row per (window, group) with at least one trend:
`window_start`, `window_end` (in the input's time form: numbers, or UTC
datetimes for timestamps), the GROUP-BY columns, then the RETURN aggregates
in order. Every runner (the general engine, the columnar kernels, CET
records' heads) builds rows here from exact values, so they agree bit for
bit: counts are ints, a SUM over ints an int, a SUM over floats or an AVG
the exact value rounded once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.timebase import Timebase
from greta_stream.engine.values import divide


@dataclass(frozen=True)
class ExactSum:
    """A sum as `num / 2**scale`, exactly; `is_float`: some summed value was a float."""

    num: int
    scale: int = 0
    is_float: bool = False

    def value(self) -> int | float:
        """SUM as reported: the exact int when every value was an int, else the float nearest the sum."""
        return divide(self.num, 1 << self.scale) if self.is_float else self.num

    def mean(self, n: int) -> float:
        """AVG = SUM / n, rounded once from the exact values."""
        return divide(self.num, n << self.scale)


class RowFinisher:
    """Builds the result rows of one query in one time unit."""

    def __init__(self, cq: CompiledQuery, tb: Timebase) -> None:
        self.cq = cq
        self.tb = tb

    def head(self, k: int, group: tuple[Any, ...]) -> dict[str, Any]:
        """Window bounds of window k and the group's columns."""
        tb = self.tb
        row: dict[str, Any] = {"window_start": tb.export(tb.start(k)), "window_end": tb.export(tb.end(k))}
        row.update(zip(self.cq.group_columns, group, strict=True))
        return row

    def row(
        self,
        k: int,
        group: tuple[Any, ...],
        count: int,
        count_of: Callable[[int], int],
        sum_of: Callable[[int], ExactSum],
        extreme_of: Callable[[int], Any],
    ) -> dict[str, Any]:
        """The row of window k and `group` with `count` trends; the aggregate
        fields (`CompiledQuery.fields`) read by index: COUNT(X) from
        `count_of`, SUM and AVG from `sum_of`, MIN and MAX from `extreme_of`."""
        row = self.head(k, group)
        for out in self.cq.outputs:
            if out.count_field is None:
                row[out.column] = count
                continue
            n = count_of(out.count_field)
            if out.func == "COUNT":
                row[out.column] = n
            elif out.func == "SUM":
                row[out.column] = sum_of(out.value_field).value()  # type: ignore[arg-type]
            elif out.func == "AVG":
                row[out.column] = sum_of(out.value_field).mean(n)  # type: ignore[arg-type]
            else:
                row[out.column] = extreme_of(out.value_field)  # type: ignore[arg-type]
        return row
