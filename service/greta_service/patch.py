"""JSON Merge Patch (RFC 7396) for `PATCH /queries/{id}`: the merge, and request models that take a patch.

A patch names only what changes. A member given replaces the document's; an
object given is merged into the document's object key by key, at any depth;
a null removes the member, so its default applies again; an array replaces
the array whole. `patch_model` derives a patch's request model from the model
of the whole document, so a new field of that model is patchable with no
change here. Imports pydantic only (the schemas import it).
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Iterable
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, create_model


def merge_patch(target: Any, patch: Any) -> Any:
    """`patch` applied to `target` (RFC 7396, section 2); neither is changed."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def patch_model(model: type[BaseModel], exclude: Iterable[str] = ()) -> type[BaseModel]:
    """`model` as the body of a merge patch, named `<model>Patch`: every field optional and nullable (null:
    back to its default), with its constraints and description; a nested model's fields, and a mapping's
    values, the same way; unknown keys refused. The model's own validators do not run on a patch, whose
    objects may be partial: the document the patch makes is validated whole (as `model`)."""
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if name in exclude:
            continue
        field = copy.copy(info)
        field.default, field.default_factory = None, None
        fields[name] = (_patched(info.annotation) | None, field)
    return create_model(f"{model.__name__}Patch", __config__=ConfigDict(extra="forbid"),  # type: ignore[call-overload, no-any-return]
                        __doc__=model.__doc__, **fields)


def _patched(annotation: Any) -> Any:
    """A field's type in a patch: a model as its patch model, a mapping's values nullable, a list as it is."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return patch_model(annotation)
    origin = typing.get_origin(annotation)
    if origin is dict:
        key, value = typing.get_args(annotation)
        return dict[key, value | None]  # type: ignore[valid-type]
    if origin in (Union, types.UnionType):
        return Union[tuple(_patched(arg) for arg in typing.get_args(annotation))]  # noqa: UP007
    return annotation
