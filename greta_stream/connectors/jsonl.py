"""JSON lines in and out, safe for counts of any size.

Python refuses to convert ints of more than 4,300 digits to or from text by
default (a guard against untrusted input). Trend counts routinely pass that
(a million events give counts of ~27,000 digits), so this module converts
big ints by splitting them in halves: exact, no global switch flipped.

`loads` parses with orjson (about 4x the json module on event records) and
gives exactly what the json module gives: lines orjson would read
differently (ints past 64 bits, which it turns into floats) or refuses
(NaN, Infinity, lone surrogates, malformed text) go to the json module.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import orjson

from greta_stream.engine.ingest import DeadLetter

_SAFE_DIGITS = 4000
_SAFE_BITS = int(_SAFE_DIGITS * math.log2(10))


def int_to_text(n: int) -> str:
    """Decimal text of any int, however long."""
    if n.bit_length() <= _SAFE_BITS:
        return str(n)
    if n < 0:
        return "-" + int_to_text(-n)
    digits = int(n.bit_length() * math.log10(2)) // 2
    hi, lo = divmod(n, 10**digits)
    return int_to_text(hi) + int_to_text(lo).rjust(digits, "0")


def text_to_int(s: str) -> int:
    """The int of a decimal text, however long."""
    if len(s) <= _SAFE_DIGITS:
        return int(s)
    if s[0] in "+-":
        return -text_to_int(s[1:]) if s[0] == "-" else text_to_int(s[1:])
    half = len(s) // 2
    return text_to_int(s[:half]) * 10 ** (len(s) - half) + text_to_int(s[half:])


def encode_value(v: Any, compact: bool = False) -> str:
    """JSON text of one value: big ints exact, datetimes as ISO-8601, inf as null
    (`compact`: no space after `,` and `:`)."""
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int):
        return int_to_text(v)
    if isinstance(v, float):
        return json.dumps(v) if math.isfinite(v) else "null"
    if isinstance(v, datetime):
        return json.dumps(v.isoformat().replace("+00:00", "Z"))
    sep, kv = (",", ":") if compact else (", ", ": ")
    if isinstance(v, dict):
        return "{" + sep.join(f"{json.dumps(str(k))}{kv}{encode_value(x, compact)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + sep.join(encode_value(x, compact) for x in v) + "]"
    if hasattr(v, "item"):  # numpy scalar
        return encode_value(v.item(), compact)
    return json.dumps(v, default=str)


def dumps(value: Any) -> str:
    """One JSON value (an object, a list, ...) on one line."""
    return encode_value(value)


def dumps_row(row: Any) -> str:
    """`dumps` of a result row or its group values (text keys): the json module's C encoder writes
    the same text for plain values and refuses the rest (non-finite floats,
    ints past its digit limit, datetimes, numpy scalars), which `dumps` writes."""
    try:
        return _STRICT.encode(row)
    except (TypeError, ValueError):
        return encode_value(row)


_STRICT = json.JSONEncoder(allow_nan=False)  # what json.dumps(x, allow_nan=False) builds at every call


def dumps_payload(row: Any) -> str:
    """A result row as compact JSON, as the operator ships it: orjson's encoder
    (several times the json module's), and for what it refuses (ints past 64
    bits, numpy scalars, keys that are not text) `encode_value`, compact too.
    Non-finite floats are null and UTC times end in Z either way; text other
    than ASCII is escaped as the json module does (orjson would write U+2028
    raw, which line readers take for a line break)."""
    try:
        text = orjson.dumps(row, option=orjson.OPT_UTC_Z).decode()
    except TypeError:
        return encode_value(row, compact=True)
    return text if text.isascii() else encode_value(row, compact=True)


_BIG = 2.0**63  # orjson reads an int outside [-2**63, 2**64) as a float of at least this size


def loads(line: str, *, long_ints: bool = True) -> Any:
    """Parse one JSON value, accepting ints of any length (and NaN and Infinity, as json does).
    `long_ints=False`: the caller knows the line holds no int past 64 bits (no check for one)."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        pass  # NaN, Infinity, a lone surrogate, or malformed: the json module has the last word
    else:
        if not (long_ints and _maybe_long_int(value)):
            return value
    return json.loads(line, parse_int=text_to_int)


# An int of 2**63 or more has at least 19 digits: with every digit mapped to "9"
# and every other byte to " ", a batch holds one only if it holds 19 nines in a row.
_DIGITS = bytes(57 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_RUN = b"9" * 19


def loads_many(lines: list[str | None], unique: tuple[str, ...] = ()) -> list[Any]:
    """`loads` of every line (None stays None). A line that is not JSON, or
    nests too deeply, or holds an object that gives one of the `unique` keys
    twice, becomes a `malformed` dead letter (`checked`). The check for ints
    orjson read as floats runs only when some line holds a run of 19 digits:
    one scan of the batch's bytes instead of a walk over every record."""
    text = "\n".join(v for v in lines if v is not None).encode("utf-8", "surrogatepass")
    suspect = text.translate(_DIGITS).find(_LONG_RUN) >= 0
    quoted = [f'"{k}"' for k in unique]
    return [None if v is None else checked(v, suspect, quoted) for v in lines]


def checked(line: str, long_ints: bool = True, quoted: list[str] | tuple[str, ...] = ()) -> Any:
    """The value of one JSON line, or a `malformed` dead letter saying why it is none.

    An object that gives a key of `quoted` (keys in quotes) twice is refused:
    readers disagree on which of the two counts (Spark's JSON functions take
    the first, Python's parsers the last), so its time or group would be read
    differently where the stream is keyed and where it is evaluated."""
    try:
        value = loads(line, long_ints=long_ints)
    except RecursionError:
        return DeadLetter("malformed", line, "JSON nested too deeply")
    except ValueError as exc:
        return DeadLetter("malformed", line, f"not JSON: {exc}")
    if quoted and type(value) is dict and any(line.count(q) > 1 for q in quoted):
        twice = _repeated_keys(line, [q[1:-1] for q in quoted])
        if twice:
            return DeadLetter("malformed", line, f"the object gives key {twice[0]!r} more than once")
    return value


def _repeated_keys(line: str, keys: list[str]) -> list[str]:
    """Which of `keys` the top-level object of `line` gives more than once."""
    objects: list[list[tuple[str, Any]]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        objects.append(items)  # innermost first: the top-level object comes last
        return dict(items)

    json.loads(line, object_pairs_hook=pairs, parse_int=text_to_int)
    names = [k for k, _ in objects[-1]]
    return [k for k in keys if names.count(k) > 1]


def _maybe_long_int(value: Any) -> bool:
    """A float as large as an int orjson turned into one (in lists and objects too)."""
    t = type(value)
    items = value.values() if t is dict else value if t is list else (value,)
    for x in items:
        t = type(x)
        if t is float:
            if not -_BIG < x < _BIG:
                return True
        elif (t is dict or t is list) and _maybe_long_int(x):
            return True
    return False


def read_events(source: TextIO | Path | str, unique: tuple[str, ...] = ()) -> Iterator[dict[str, Any] | DeadLetter]:
    """Records of a JSON lines file; a line that is not JSON, not UTF-8 text,
    nested too deeply or gives a `unique` key twice becomes a DeadLetter (`checked`)."""
    handle = (open(source, encoding="utf-8", errors="surrogateescape") if isinstance(source, (str, Path))  # noqa: SIM115
              else source)
    quoted = [f'"{k}"' for k in unique]
    try:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            text = line.rstrip("\n")
            if not _utf8(text):
                yield DeadLetter("malformed", _repaired(text), f"line {lineno}: the line is not valid UTF-8 text")
                continue
            value = checked(text, True, quoted)
            if isinstance(value, DeadLetter):
                value.detail = f"line {lineno}: {value.detail}"
            yield value
    finally:
        if handle is not source:
            handle.close()


def _utf8(text: str) -> bool:
    """False for text read with errors="surrogateescape" from bytes that are not UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _repaired(text: str) -> str:
    """The text with each byte that was not UTF-8 replaced by U+FFFD (as Spark's make_valid_utf8)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
