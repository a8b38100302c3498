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


_FACTORY = object()  # a field's default that says: made by its default_factory


def quick_init(cls: type[T]) -> type[T]:
    """A frozen dataclass whose `__init__` sets its fields in one update of the instance's
    dictionary, where dataclasses' sets each through `object.__setattr__` (some 850
    instructions a field more: a turn makes a few hundred such fields, in its plan, its
    events and actions, its result). The same parameters, defaults and default factories,
    the fields set in their order; for a class whose every field its `__init__` sets, with
    no `__post_init__` (`_copied_fields`). Dataclasses' own `__init__` is kept as
    `__dataclass_init__`."""
    made_as: Any = cls  # (a dataclass, checked here: mypy sees any class)
    if _copied_fields(made_as) is None or not made_as.__dataclass_params__.frozen:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass made by a copy")
    fields = dataclasses.fields(made_as)
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    made: list[str] = []
    for field in fields:
        name = field.name
        if field.default is not dataclasses.MISSING:
            namespace[f"_default_{name}"] = field.default
            param = f"{name}=_default_{name}"
        elif field.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{name}"] = field.default_factory
            param = f"{name}=_FACTORY"
            made.append(f"    if {name} is _FACTORY:\n        {name} = _factory_{name}()\n")
        else:
            param = name
        (keyword if field.kw_only else positional).append(param)
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    values = ", ".join(f"{field.name!r}: {field.name}" for field in fields)
    exec(f"def __init__({params}):\n" + "".join(made)  # (as dataclasses makes its own)
         + f"    self.__dict__.update({{{values}}})\n", namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    original = vars(cls)["__init__"]
    if [(p.name, p.kind) for p in inspect.signature(init).parameters.values()] != [
            (p.name, p.kind) for p in inspect.signature(original).parameters.values()]:
        raise TypeError(f"{cls.__name__}: its __init__ could not be made the same")
    made_as.__dataclass_init__ = original
    made_as.__init__ = init
    return cls
