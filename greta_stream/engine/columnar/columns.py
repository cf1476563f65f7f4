"""Input records as columns: typing, nulls and the rows that must be checked.

`Input` wraps a list of dicts or a pandas DataFrame and hands out one field
at a time over a subset of rows, typed as the engine needs it: int64 or
float64 arrays for numbers, object arrays otherwise, with a mask of missing
values. A DataFrame's NaN means "missing", as in `greta_stream.evaluate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import pandas as pd

INT, FLOAT, MIXED, OTHER = "int", "float", "mixed", "other"
# ints beside floats some of which are whole (2 beside 2.0): which value was an int no longer shows
MIXED_WHOLE = "mixed-whole"
MIXES = (MIXED, MIXED_WHOLE)
FLOATING = (FLOAT, *MIXES)  # the kinds held as float64
EXACT_FLOAT = 2.0**53  # ints up to this magnitude are exact as float64


class Unsupported(Exception):
    """The columnar engine cannot take this input or query; use the general one."""


# Every kind of input the columnar engine hands to the general engine (the query aside), in one
# place: `explain` prints it, docs/QUERY_LANGUAGE.md lists it, and the run that meets one says
# which (`ResultRows.engine`, the stream's progress, the service's `progress.engine`). What real
# producers write runs columnar: ints beside floats (39 beside 39.02), nulls (dead letters),
# strings and booleans read by equality, partitions of any scalar, ISO and numeric times.
INPUT_LIMITS = (
    "ints beside whole floats in one field read by SUM, AVG, MIN or MAX (2 beside 2.0: which value was an int "
    "no longer shows)",
    "MIN or MAX over integers beyond 2**53, and values beyond 2**53 in an edge predicate (float64 rounds them)",
    "SUM values spanning more than 1,280 bits (1e-300 beside 1e+300)",
    "an edge predicate whose values are not finite numbers (NaN, or a division by zero; for a divisor of both "
    "events' values, a pair whose divisor is 0 where Python evaluates it: no comparison AND-ed before it false)",
    "a field read by an edge or local predicate holding other than numbers on events it judges (but for "
    "an edge predicate's equality of the two events' values, `X.k = NEXT(Y).k`, which takes any scalar)",
    "a string compared by order with a value that is not a string",
    "times of both kinds (seconds and ISO timestamps) in one input",
)


@dataclass
class Column:
    """One field over some rows: `kind` INT/FLOAT/MIXED/MIXED_WHOLE (numbers in
    `values`, int64 or float64; MIXED: ints beside floats none of which is
    whole, as JSON encoders write numbers, so a whole value was an int) or
    OTHER (`values` is an object array); `null` marks missing values,
    `number` the rows holding a number (not a bool)."""

    kind: str
    values: np.ndarray
    null: np.ndarray
    number: np.ndarray


class Input:
    """Events as columns, and each record as the general engine would see it.

    `events` is a list (or iterable) of records, a pandas DataFrame, or
    (`Input.of_columns`) valid records kept as one list of raw values per
    field, None where absent.

    What it reads of the whole input (a field's raw values and its typed
    column, which records are dicts, `memo`) is read once: a `MultiRunner`
    hands one `Input` of a micro-batch to every query, so a hundred queries
    over one stream parse it once. Callers never write into what it hands out.
    """

    def __init__(self, events: Any) -> None:
        self.frame = events if hasattr(events, "columns") and hasattr(events, "to_dict") else None
        self.fields: dict[str, list[Any]] | None = None
        if self.frame is not None:
            self.records: list[Any] = []
            self.n = len(self.frame)
        else:
            self.records = events if isinstance(events, list) else list(events)
            self.n = len(self.records)
        self._raw: dict[str, np.ndarray] = {}  # records: each field's values, read once
        self._all_dicts: bool | None = None
        self._is_dict: np.ndarray | None = None
        self._columns: dict[str, Column] = {}  # each field typed over every row, once
        self.memo: dict[Any, Any] = {}  # what a reader derives from the whole input, keyed by what it is
        self.readers = 1  # the queries that read this input (`MultiRunner`: its units)

    @classmethod
    def of(cls, events: Any) -> Input:
        """`events` as an `Input` (itself if it is one already)."""
        return events if isinstance(events, Input) else cls(events)

    def plain(self) -> Any:
        """The input as it was given (a DataFrame or a list of records), for a runner that reads records."""
        if self.fields is not None:
            return self.materialized()
        return self.frame if self.frame is not None else self.records

    @classmethod
    def of_columns(cls, fields: dict[str, list[Any]], n: int) -> Input:
        inp = cls([])
        inp.fields, inp.n = fields, n
        return inp

    def is_dict(self) -> np.ndarray:
        if self._is_dict is None:
            if self.frame is not None or self.fields is not None:
                self._is_dict = np.ones(self.n, bool)
            else:
                self._is_dict = np.fromiter((type(r) is dict for r in self.records), bool, self.n)
        return self._is_dict

    def raw(self, name: str, rows: np.ndarray | None = None) -> np.ndarray | list[Any]:
        """The field's values (None where absent) over `rows` (all if None)."""
        if self.frame is not None:
            if name not in self.frame.columns:
                return [None] * (self.n if rows is None else len(rows))
            col = self.frame[name].to_numpy()
            return col if rows is None else col[rows]
        if self.fields is not None:
            values = self.fields.get(name)
            if values is None:
                return [None] * (self.n if rows is None else len(rows))
            return values if rows is None else [values[i] for i in rows.tolist()]
        cached = self._raw.get(name)
        if cached is None:
            if self._all_dicts is None:
                self._all_dicts = all(type(r) is dict for r in self.records)
            cached = np.fromiter(map(dict.get, self.records, repeat(name)) if self._all_dicts else
                                 (r.get(name) if type(r) is dict else None for r in self.records), dtype=object,
                                 count=self.n)
            self._raw[name] = cached
        return cached if rows is None else cached[rows]

    def column(self, name: str, rows: np.ndarray | None = None) -> Column:
        """The field typed over `rows` (all if None): a subset of the whole column when typing the
        rows alone gives the same kind (ints stay ints; floats stay floats where one is there)."""
        if rows is not None:
            whole = self._columns.get(name)
            if whole is None and self.readers > 1:  # many queries read this input: type the field once
                whole = self.column(name)
            if whole is not None and len(rows) and (
                    whole.kind == INT or whole.kind == FLOAT and (self.frame is not None or whole.number[rows].any())):
                return Column(whole.kind, whole.values[rows], whole.null[rows], whole.number[rows])
            return typed(self.raw(name, rows), nan_is_null=self.frame is not None)
        col = self._columns.get(name)
        if col is None:
            col = self._columns[name] = typed(self.raw(name), nan_is_null=self.frame is not None)
        return col

    def record(self, i: int) -> Any:
        """Record i as `evaluate` hands it to the general engine."""
        if self.fields is not None:
            return {k: col[i] for k, col in self.fields.items() if col[i] is not None}
        if self.frame is None:
            return self.records[i]
        rec = self.frame.iloc[[i]].to_dict("records")[0]  # each column's own type (a row Series would upcast)
        return {k: v for k, v in rec.items() if not missing(v)}

    def materialized(self) -> Any:
        """The events for the general engine (a list is not consumed twice)."""
        if self.fields is not None:
            return [self.record(i) for i in range(self.n)]
        return self.frame if self.frame is not None else self.records


def missing(v: Any) -> bool:
    """A DataFrame's missing value: None, NaN or NaT (as `greta_stream.evaluate` reads frames)."""
    return v is None or (isinstance(v, float) and v != v) or v is pd.NaT


def typed(values: np.ndarray | list[Any], *, nan_is_null: bool) -> Column:
    """Type a column: numbers as int64/float64 when every non-missing value
    is one, else an object array."""
    if isinstance(values, np.ndarray) and values.dtype.kind not in "iufO":  # datetimes, bools, strings, ...
        return _other(pd.Series(values).astype(object).tolist(), nan_is_null)
    if isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
        if values.dtype.kind == "f":
            arr = values.astype(np.float64, copy=False)
            null = np.isnan(arr) if nan_is_null else np.zeros(len(arr), bool)
            return Column(FLOAT, arr, null, ~null)
        if values.dtype.kind == "u" and len(values) and values.max() > np.iinfo(np.int64).max:
            return _other(list(values.tolist()), nan_is_null)
        arr = values.astype(np.int64, copy=False)
        return Column(INT, arr, np.zeros(len(arr), bool), np.ones(len(arr), bool))
    seq = values.tolist() if isinstance(values, np.ndarray) else values
    kinds = set(map(type, seq))
    if kinds <= {int, float, type(None)}:
        null = np.fromiter((v is None for v in seq), bool, len(seq)) if type(None) in kinds else np.zeros(len(seq), bool)
        filled = [0 if v is None else v for v in seq] if null.any() else seq
        if float in kinds:
            if nan_is_null:
                arr = np.asarray(filled, dtype=np.float64)
                null = null | np.isnan(arr)
            if int in kinds:
                if any(type(v) is int and abs(v) > EXACT_FLOAT for v in filled):
                    return _other(seq, nan_is_null)
                whole = any(type(v) is float and v.is_integer() for v in filled)
                return Column(MIXED_WHOLE if whole else MIXED, np.asarray(filled, dtype=np.float64), null, ~null)
            return Column(FLOAT, np.asarray(filled, dtype=np.float64), null, ~null)
        try:
            return Column(INT, np.asarray(filled, dtype=np.int64), null, ~null)
        except OverflowError:
            return _other(seq, nan_is_null)
    return _other(seq, nan_is_null)


def _other(seq: list[Any], nan_is_null: bool) -> Column:
    arr = np.empty(len(seq), dtype=object)
    arr[:] = seq
    null = np.fromiter(
        (v is None or (nan_is_null and isinstance(v, float) and math.isnan(v)) for v in seq), bool, len(seq)
    )
    number = np.fromiter((type(v) in (int, float) for v in seq), bool, len(seq)) & ~null
    return Column(OTHER, arr, null, number)


def numeric(col: Column) -> Column:
    """An OTHER column typed again (numbers if every value is one)."""
    return typed(col.values.tolist(), nan_is_null=False)


def frame_values(frame: pd.DataFrame, name: str, rows: np.ndarray) -> list[Any]:
    """A column's values at `rows` as the records of `frame_records` hold
    them: Python scalars, None where missing (NaN, None, NaT)."""
    if name not in frame.columns:
        return [None] * len(rows)
    col = frame[name]
    numpy_dtype = isinstance(col.dtype, np.dtype)  # not a pandas extension type (nullable ints, ...)
    if numpy_dtype and col.dtype.kind in "iub":
        return col.to_numpy()[rows].tolist()
    if numpy_dtype and col.dtype.kind == "f":
        values = col.to_numpy()[rows]
        return [None if v != v else v for v in values.tolist()]
    return [None if missing(v) else v for v in col.iloc[rows].astype(object).tolist()]


def frame_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per row, without its missing values (NaN, None, NaT)."""
    return [{k: v for k, v in rec.items() if not missing(v)} for rec in frame.to_dict("records")]
