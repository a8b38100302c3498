"""Each store backend declares itself beside its code (`StoreBackend`: URL schemes, URL
check, constructor), the package lists the declarations, and the settings check a store URL
through its backend's declaration alone."""

from __future__ import annotations

import importlib
import logging
import re
from pathlib import Path

import pytest

from proxy.shell.config_load import ConfigError, build_config
from proxy.shell.store import BACKENDS, open_store
from proxy.shell.store.interface import StoreBackend, StoreLimits

STORE = Path(__file__).resolve().parents[3] / "proxy" / "shell" / "store"


def test_every_backend_module_declares_itself_and_is_listed():
    names = sorted(path.stem for path in STORE.glob("*.py")
                   if path.stem not in ("__init__", "interface"))
    declared = {importlib.import_module(f"proxy.shell.store.{name}").BACKEND for name in names}
    assert set(BACKENDS.values()) == declared
    for backend in declared:
        assert {scheme for scheme, listed in BACKENDS.items() if listed is backend} == set(
            backend.schemes)


def test_the_settings_name_no_backend():
    source = (STORE.parent / "config_load.py").read_text(encoding="utf-8")
    assert re.findall(r"(?i)sqlite|redis", source) == []


def test_a_store_url_is_checked_and_opened_by_its_backends_declaration(monkeypatch):
    checked, opened = [], []

    def check(url: str) -> str | None:
        checked.append(url)
        return None if url.endswith("/good") else "must end in /good"

    def open_(url: str, limits: StoreLimits, logger: logging.Logger) -> object:
        opened.append((url, limits))
        return "a store"

    monkeypatch.setitem(BACKENDS, "fake", StoreBackend(("fake",), check, open_))
    with pytest.raises(ConfigError) as caught:
        build_config({"responses_store_url": "fake://x/bad"})
    assert str(caught.value) == "'responses_store_url' must end in /good"
    config = build_config({"responses_store_url": "fake://x/good"})
    assert checked == ["fake://x/bad", "fake://x/good"]
    assert open_store(config) == "a store"
    assert opened == [("fake://x/good", StoreLimits.of(config))]


def test_a_scheme_no_backend_serves_is_refused_naming_those_that_are():
    with pytest.raises(ConfigError) as caught:
        build_config({"responses_store_url": "mongodb://host/db"})
    for scheme in BACKENDS:
        assert f"{scheme}://" in str(caught.value)
