"""A frozen dataclass's value with some fields changed, made without running its constructor
again. `dataclasses.replace` reads every field's definition, checks each, then calls
`__init__`, which sets each field through `object.__setattr__`: some ten times what a copy of
the instance's dictionary costs (a `TurnPlan`'s, 17 fields, about 9 µs; a `Config`'s, 70,
some 25 µs). A turn makes such copies on every request (its thinking rule learned, its
front's settings, the wait's phase): they are made here."""

from __future__ import annotations

import dataclasses
import inspect
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


def replaced(value: T, **changes: Any) -> T:
    """`dataclasses.replace(value, **changes)`, the same value made by copying: for a
    dataclass whose every field is set by its `__init__` and that has no `__post_init__`
    and no slots (any other goes through `dataclasses.replace`). A change that names no
    field is refused, as there."""
    cls: type = type(value)
    names = _copied_fields(cls)
    if names is None:
        # (mypy sees any T here; a value that is no dataclass is refused there, as ever)
        return dataclasses.replace(value, **changes)  # type: ignore[type-var]
    if not names.issuperset(changes):
        unknown = ", ".join(sorted(set(changes) - names))
        raise TypeError(f"{cls.__name__} has no field {unknown}")
    copy: T = object.__new__(cls)
    copy.__dict__.update(value.__dict__)
    copy.__dict__.update(changes)
    return copy


@cache
def _copied_fields(cls: type) -> frozenset[str] | None:
    """The field names of a dataclass whose value a copy of its dictionary makes (None: one
    whose `__init__` must run: with a `__post_init__`, an init-only or non-init field, or
    instances without a dictionary)."""
    if (not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__")
            or not cls.__dictoffset__):
        return None
    names = frozenset(f.name for f in dataclasses.fields(cls))
    parameters = set(inspect.signature(cls.__init__).parameters) - {"self"}
    return names if parameters == names else None
