"""Settings checked as users see them: every problem with its place, renamed settings still read.

`validated` turns a document into a model of `greta_stream.pipeline` or a
`ConfigError` that lists each problem with where it is (`queries[0].sinks`):
an unknown key (a typo such as `lateness` or `sink`) names the keys that
place knows and the closest one (`closest`, which the service's "did you
mean" uses too). A setting has one name; `renamed` reads an old name
(`RENAMED`) as its new one, with a FutureWarning.
"""

from __future__ import annotations

import difflib
import typing
import warnings
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from greta_stream.errors import ConfigError

M = TypeVar("M", bound=BaseModel)

# Old name -> current name of renamed settings: still read, with a FutureWarning.
RENAMED = {"watermark_delay_s": "lateness_s"}


def renamed(data: Any) -> Any:
    """`data` with renamed settings under their current names (a FutureWarning names each)."""
    if not isinstance(data, dict):
        return data
    for old, new in RENAMED.items():
        if old in data:
            if new in data:
                raise ValueError(f"{old} is the old name of {new}: give {new} only")
            warnings.warn(f"{old} is deprecated: use {new} (same meaning)", FutureWarning, stacklevel=2)
            data = {(new if k == old else k): v for k, v in data.items()}
    return data


def validated(model: type[M], data: Any, origin: str, context: dict[str, Any] | None = None) -> M:
    """`data` as a `model`, or a `ConfigError` listing every problem with its place."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        problems = [_problem(e, model) for e in exc.errors()]
        listed = f" {problems[0]}" if len(problems) == 1 else "".join(f"\n  - {p}" for p in problems)
        raise ConfigError(f"{origin}:{listed}") from None


def _problem(error: Any, model: type[BaseModel]) -> str:
    loc = [str(p) for p in error["loc"]]
    where = _place(loc)
    if error["type"] == "extra_forbidden":
        return unknown_key(model, loc)
    if error["type"] == "missing":
        return f"{where} is required"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def unknown_key(model: Any, loc: list[str]) -> str:
    """An unknown key at `loc` of a document read as `model`: where it is, the closest known key, the known keys."""
    *path, key = loc or [""]
    known = sorted(_known(model, path))
    close = closest(key, known)
    hint = f"did you mean {close!r}? " if close else ""
    inside = f" in {_place(path)}" if path else ""
    return f"unknown key {key!r}{inside} ({hint}known: {', '.join(known) or 'none'})"


def closest(key: str, known: list[str]) -> str | None:
    """The known key closest to `key` (a renamed setting's old name counts as its new name), or None."""
    names = {k: k for k in known} | {old: new for old, new in RENAMED.items() if new in known}
    close = difflib.get_close_matches(key, list(names), n=1)
    return names[close[0]] if close else None


def _place(loc: list[str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


def _known(model: Any, loc: list[str]) -> list[str]:
    """The keys the mapping at `loc` of a `model` accepts."""
    for part in loc:
        if not part.isdigit():
            field = getattr(model, "model_fields", {}).get(part)
            model = model_in(field.annotation) if field is not None else None
    return list(getattr(model, "model_fields", {}))


def model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model in an annotation (`Model`, `Model | None`, `list[Model]`), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = model_in(arg)
        if found is not None:
            return found
    return None
