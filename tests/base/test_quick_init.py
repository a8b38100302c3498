"""Frozen dataclasses made by `frozen.quick_init`'s `__init__`: the same parameters, defaults
and fields, set in the same order, as dataclasses' own `__init__` sets them, and still
frozen; every such class of the proxy's is checked."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field

import pytest

import proxy
from proxy.base.frozen import quick_init, replaced


def _quick_classes() -> list[type]:
    found: dict[str, type] = {}
    for module in pkgutil.walk_packages(proxy.__path__, "proxy."):
        loaded = importlib.import_module(module.name)
        for value in vars(loaded).values():
            if inspect.isclass(value) and "__dataclass_init__" in vars(value):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[name] for name in sorted(found)]


QUICK = _quick_classes()


def test_the_turns_classes_are_made_quickly() -> None:
    names = {cls.__name__ for cls in QUICK}
    assert {"TurnPlan", "ExtractionSettings", "Answer", "AskUpstream", "Waiting",
            "TurnResult", "Choice", "Call", "UpstreamProfile", "Timeouts"} <= names


@pytest.mark.parametrize("cls", QUICK, ids=lambda cls: cls.__qualname__)
def test_quick_init_sets_what_dataclasses_init_sets(cls: type) -> None:
    own = inspect.signature(cls.__dataclass_init__)  # type: ignore[attr-defined]
    quick = inspect.signature(cls.__init__)
    assert [(p.name, p.kind) for p in quick.parameters.values()] == [
        (p.name, p.kind) for p in own.parameters.values()]
    # each required field given a value of its own; the defaults (and factories) left
    required = {p.name: object() for p in own.parameters.values()
                if p.name != "self" and p.default is inspect.Parameter.empty}
    by_quick = object.__new__(cls)
    cls.__init__(by_quick, **required)
    by_own = object.__new__(cls)
    cls.__dataclass_init__(by_own, **required)  # type: ignore[attr-defined]
    assert list(vars(by_quick)) == list(vars(by_own)) == [f.name for f in
                                                          dataclasses.fields(cls)]
    for name, value in vars(by_own).items():
        made = vars(by_quick)[name]
        assert made == value or made is value, name
        if isinstance(value, (list, dict, set)):
            assert made is not value  # a factory's value: a new one each time
    with pytest.raises(dataclasses.FrozenInstanceError):
        by_quick.__setattr__("any_field", None)


@quick_init
@dataclass(frozen=True)
class _Mixed:
    a: int
    b: list[int] = field(default_factory=list)
    c: str = field(default="c", kw_only=True)
    d: int = 4


def test_positional_keyword_only_defaults_and_factories() -> None:
    made = _Mixed(1, [2], 5, c="x")
    assert vars(made) == {"a": 1, "b": [2], "c": "x", "d": 5}
    assert _Mixed(1).b == []
    assert _Mixed(1).b is not _Mixed(1).b
    assert _Mixed(1) == _Mixed(1, [], c="c", d=4)
    assert replaced(_Mixed(1), d=7).d == 7
    with pytest.raises(TypeError):
        _Mixed(1, [2], "x", 5)  # type: ignore[misc]  # (c is keyword-only)
    with pytest.raises(TypeError):
        _Mixed()  # type: ignore[call-arg]


def test_a_class_its_copy_cannot_make_is_refused() -> None:
    @dataclass(frozen=True)
    class Posted:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass
    class Thawed:
        a: int

    for cls in (Posted, Thawed):
        with pytest.raises(TypeError):
            quick_init(cls)


def test_arguments_reach_their_fields() -> None:
    assert vars(_Mixed(a=3, d=9, b=[1])) == {"a": 3, "b": [1], "c": "c", "d": 9}
