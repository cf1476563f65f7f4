"""Hostile input lines that every reader must turn into dead letters, never a failed stream.

Each is a line of a JSON-lines file (bytes: one is not UTF-8), with the
start of the detail its dead letter gives (reason `malformed`):

- an object nested 2,000 deep (Python's parser runs out of stack);
- a line that is not valid UTF-8 text;
- an object that gives its time twice, and one that gives a GROUP-BY
  attribute (`company`) twice: Spark's JSON functions read the first,
  Python's parsers the last, so the stream's keys and the engine would
  disagree.
"""

from __future__ import annotations

POISON_LINES: list[tuple[bytes, str]] = [
    (b'{"type": "Stock", "time": 3, "company": 1, "price": 5, "x": ' + b"[" * 2000 + b"]" * 2000 + b"}",
     "JSON nested too deeply"),
    (b'{"type": "Stock", "time": 4, "company": 1, "price": \xff\xfe 5}', "the line is not valid UTF-8 text"),
    (b'{"type": "Stock", "time": 5, "company": 1, "price": 5, "time": 900}',
     "the object gives key 'time' more than once"),
    (b'{"type": "Stock", "time": 6, "company": 1, "price": 5, "company" : 2}',
     "the object gives key 'company' more than once"),
]
