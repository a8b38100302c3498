"""A frozen value with fields changed: the same value `dataclasses.replace` makes, by copy
where that is the same, by `replace` where the constructor must run."""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field
from typing import ClassVar

import pytest

from proxy.base.config import Config
from proxy.base.frozen import replaced
from proxy.turn.plan import TurnPlan, plan_chat


@dataclass(frozen=True)
class Plain:
    name: str
    count: int = 0
    tags: tuple[str, ...] = ()
    kind: ClassVar[str] = "plain"


@dataclass(frozen=True)
class Normalised:
    name: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.name.lower())


@dataclass(frozen=True)
class Derived:
    name: str
    size: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", len(self.name))


@dataclass(frozen=True)
class WithInitVar:
    name: str
    scale: InitVar[int] = 1


@dataclass(frozen=True, slots=True)
class Slotted:
    name: str
    count: int = 0


def test_a_copy_is_the_value_replace_makes_and_the_original_stays():
    original = Plain("a", 1, ("x",))
    changed = replaced(original, count=2)
    assert changed == dataclasses.replace(original, count=2) == Plain("a", 2, ("x",))
    assert type(changed) is Plain
    assert original == Plain("a", 1, ("x",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        changed.count = 3  # type: ignore[misc]


def test_no_change_is_an_equal_value_of_its_own():
    original = Plain("a")
    copy = replaced(original)
    assert copy == original
    assert copy is not original


def test_a_change_naming_no_field_is_refused():
    with pytest.raises(TypeError, match="no field colour"):
        replaced(Plain("a"), colour="red")
    with pytest.raises(TypeError, match="kind"):
        replaced(Plain("a"), kind="other")  # a class variable is no field


def test_a_class_whose_constructor_must_run_goes_through_replace():
    assert replaced(Normalised("A"), name="B") == Normalised("b")
    assert replaced(Derived("ab"), name="abc").size == 3
    assert replaced(Slotted("a"), count=4) == Slotted("a", 4)
    assert replaced(WithInitVar("a"), name="b") == WithInitVar("b")


def test_a_plan_and_the_settings_copy_as_replace_makes_them():
    config = Config()
    plan = plan_chat(b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], '
                     b'"tools": [{"type": "function", "function": {"name": "f"}}]}', config)
    assert isinstance(plan, TurnPlan)
    assert replaced(plan, model="n") == dataclasses.replace(plan, model="n")
    assert replaced(config, port=9) == dataclasses.replace(config, port=9)
