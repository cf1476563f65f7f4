"""Checked arguments of the command line: choices, files that must exist, query text.

Shared by `greta-stream` (cli.py) and `greta-stream queries` (client_cli.py).
A bad argument ends the command with a one-line `error: ...` on stderr and
exit status 2, never a traceback. The choices are those of
`greta_stream.choices`, declared there once for every entry point. Imports
nothing else of the package.
"""

from __future__ import annotations

import difflib
import sys
from enum import StrEnum
from pathlib import Path
from typing import NoReturn

import typer

from greta_stream.choices import Engine, Mode, Operator, StreamEngine, TableFormat, Trends

__all__ = ["Engine", "LogLevel", "Mode", "Operator", "StreamEngine", "TableFormat", "Trends", "existing_file",
           "existing_folder", "fail", "is_file", "lateness_flag", "looks_like_path", "query_text"]


class LogLevel(StrEnum):
    critical = "critical"
    error = "error"
    warning = "warning"
    info = "info"
    debug = "debug"
    trace = "trace"


def fail(message: str) -> NoReturn:
    """End the command: `error: message` on stderr, exit status 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def lateness_flag(lateness: float | None, watermark: float | None) -> float | None:
    """`--lateness`, or `--watermark` (its old name) with a warning; both given is a one-line error."""
    if watermark is None:
        return lateness
    typer.echo("warning: --watermark is deprecated: use --lateness (same meaning)", err=True)
    if lateness is not None:
        fail("--watermark is the old name of --lateness: give --lateness only")
    return watermark


def existing_file(path: Path, what: str) -> Path:
    """`path` when it names a readable file ('-' for stdin passes), else a one-line error (with the
    closest name in its folder, when one is close)."""
    if str(path) != "-" and not path.is_file():
        if path.is_dir():
            fail(f"{what} {str(path)!r}: is a folder, not a file")
        fail(f"{what} {str(path)!r}: no such file{_near(path)}")
    return path


def _near(path: Path, folder: bool = False) -> str:
    """"; did you mean '<path>'?" for the closest existing path (a file, or with `folder` a folder),
    each missing part of `path` taken as the closest name where it is; else ""."""
    close = _closest(path, folder)
    return f"; did you mean {str(close)!r}?" if close is not None and close != path else ""


def _closest(path: Path, folder: bool) -> Path | None:
    parent = path.parent
    if parent != path and not parent.is_dir():
        fixed = _closest(parent, True) if parent.parent != parent else None
        if fixed is None:
            return None
        parent = fixed
    try:
        names = [p.name for p in parent.iterdir() if (p.is_dir() if folder else p.is_file())][:1000]
    except OSError:
        return None
    close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.6)
    return parent / close[0] if close else None


def existing_folder(path: str, what: str) -> str:
    """`path` when it names a folder (a URL such as s3a://... is not checked), else a one-line error."""
    if "://" not in path and not Path(path).is_dir():
        fail(f"{what} {path!r}: " + ("is a file, not a folder" if Path(path).is_file() else
                                     f"no such folder{_near(Path(path), folder=True)}"))
    return path


def is_file(text: str) -> bool:
    """`text` names an existing file (query text too long for a path name is not one)."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def looks_like_path(text: str) -> bool:
    """A -q value meant as a file: ends in .greta or .txt, or holds a '/' and no whitespace."""
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped):
        return False
    return stripped.endswith((".greta", ".txt")) or "/" in stripped


def query_text(query: str) -> str:
    """The text of a -q value: stdin for '-', a file's content, or the value itself;
    a value that looks like a path to a missing file is a one-line error."""
    if query == "-":
        return sys.stdin.read()
    if is_file(query):
        try:
            return Path(query).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"query file {query!r}: {exc}")
    if looks_like_path(query):
        fail(f"query file {query!r}: no such file (give a file, or the query text itself)")
    return query
