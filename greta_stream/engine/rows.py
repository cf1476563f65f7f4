"""Result rows: the one place a window's exact aggregates become a row.

docs/QUERY_LANGUAGE.md section 4: a row per (window, group) with at least one trend:
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
from greta_stream.query.aggregates import function


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


@dataclass(frozen=True)
class SumColumn:
    """The exact sums of one aggregate field, one per row: `nums[i] / 2**scale`
    (`scale` and `is_float` one value for every row, or one per row)."""

    nums: list[int]
    scale: int | list[int] = 0
    is_float: bool | list[bool] = False

    def at(self, i: int) -> ExactSum:
        scale = self.scale if isinstance(self.scale, int) else self.scale[i]
        is_float = self.is_float if isinstance(self.is_float, bool) else self.is_float[i]
        return ExactSum(self.nums[i], scale, is_float)

    def values(self) -> list[int | float]:
        if isinstance(self.scale, int) and isinstance(self.is_float, bool):
            if not self.is_float:
                return list(self.nums)
            den = 1 << self.scale
            return [divide(x, den) for x in self.nums]
        return [self.at(i).value() for i in range(len(self.nums))]

    def means(self, counts: list[int]) -> list[float | None]:
        """AVG per row; None where no trend binds an event to the alias (a part
        that may match nothing, SEMANTICS section 8)."""
        if isinstance(self.scale, int):
            return [divide(x, n << self.scale) if n else None for x, n in zip(self.nums, counts)]
        return [self.at(i).mean(n) if n else None for i, n in enumerate(counts)]


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

    def rows(
        self,
        ks: list[int],
        groups: list[tuple[Any, ...]],
        counts: list[int],
        count_of: Callable[[int], list[int]],
        sum_of: Callable[[int], SumColumn],
        extreme_of: Callable[[int], list[Any]],
    ) -> list[dict[str, Any]]:
        """The rows of windows `ks[i]` and groups `groups[i]` with `counts[i]`
        trends, built column by column; the aggregate fields
        (`CompiledQuery.fields`) read by index: COUNT(X) from `count_of`, SUM
        and AVG from `sum_of`, MIN and MAX from `extreme_of`."""
        tb = self.tb
        bounds = {k: (tb.export(tb.start(k)), tb.export(tb.end(k))) for k in set(ks)}
        names = ["window_start", "window_end", *self.cq.group_columns]
        columns: list[list[Any]] = [[bounds[k][0] for k in ks], [bounds[k][1] for k in ks]]
        columns += [[g[i] for g in groups] for i in range(len(self.cq.group_columns))]
        for out in self.cq.outputs:
            names.append(out.column)
            if out.count_field is None:
                columns.append(counts)
                continue
            n = count_of(out.count_field)
            made = function(out.func).row  # how the function's value is made of its fields
            if made == "count":
                columns.append(n)
            elif made == "sum":
                columns.append(sum_of(out.value_field).values())  # type: ignore[arg-type]
            elif made == "mean":
                columns.append(sum_of(out.value_field).means(n))  # type: ignore[arg-type]
            else:  # MIN/MAX of no event (an alias no trend binds): None, as AVG
                columns.append([v if c else None for v, c in zip(extreme_of(out.value_field), n)])  # type: ignore[arg-type]
        return [dict(zip(names, values)) for values in zip(*columns)]
