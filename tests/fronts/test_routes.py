"""Fronts bring their own routes: the registry answers which front (and which of its routes)
serves a request, from what each front declares; the shell names no particular front."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from proxy.base.config import Config
from proxy.base.errors import ProxyError
from proxy.fronts import (
    CATALOG,
    COUNT,
    EXCHANGE,
    STORED_DELETE,
    STORED_GET,
    TURN,
    Front,
    Incoming,
    Route,
    chat,
)
from proxy.fronts.registry import DEFAULT, FRONTS, front_for, front_named, key_headers, route_for
from proxy.shell.web.door import Door

ROOT = Path(__file__).resolve().parents[2] / "proxy"
FRONT_MODULES = {"chat", "messages", "ollama", "responses"}
# The passthrough speaks OpenAI's wire (its stream's end and errors): the one exception.
MAY_NAME_A_FRONT = {"passthrough.py"}


def _named_fronts(source: str, package: str) -> set[str]:
    """The particular fronts a module's source imports (`package`: the module's own, for
    relative imports)."""
    named = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            parts = base.split(".")
            if parts[:2] == ["proxy", "fronts"]:
                if len(parts) > 2:
                    named.add(parts[2])
                else:
                    named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[:2] == ["proxy", "fronts"] and len(parts) > 2:
                    named.add(parts[2])
    return named & FRONT_MODULES


def _checked_modules() -> list[tuple[Path, str]]:
    """Every module of the shell (the passthrough aside) and of the operator's tools, with
    the package its relative imports start from."""
    paths = [path for path in sorted((ROOT / "shell").rglob("*.py"))
             if path.name not in MAY_NAME_A_FRONT]
    paths += sorted((ROOT / "diagnose").rglob("*.py"))
    return [(path, ".".join(path.parent.relative_to(ROOT.parent).parts)) for path in paths]


@pytest.mark.parametrize(("path", "package"), _checked_modules(), ids=str)
def test_the_shell_replay_and_doctor_name_no_particular_front(path: Path, package: str):
    assert _named_fronts(path.read_text(encoding="utf-8"), package) == set()


@pytest.mark.parametrize("source", [
    "from ..fronts.messages import COUNT_TOKENS_PATH\n",
    "from ..fronts import messages\n",
    "import proxy.fronts.responses\n",
    "from proxy.fronts.chat import FRONT\n",
])
def test_the_import_check_sees_a_front_named(source: str):
    assert _named_fronts(source, "proxy.shell") != set()


def test_the_import_check_lets_the_registry_and_the_contract_through():
    source = "from ..fronts import Front, Incoming\nfrom ..fronts.registry import route_for\n"
    assert _named_fronts(source, "proxy.shell") == set()


@pytest.mark.parametrize(("method", "path", "front", "action", "params"), [
    ("POST", "/v1/chat/completions", "chat", TURN, {}),
    ("POST", "/v1/chat/completions/", "chat", TURN, {}),
    ("POST", "/v1/responses", "responses", TURN, {}),
    ("POST", "/v1/messages", "messages", TURN, {}),
    ("POST", "/v1/messages/count_tokens", "messages", COUNT, {}),
    ("POST", "/v1/messages/count_tokens//", "messages", COUNT, {}),
    ("GET", "/v1/responses/resp_1", "responses", STORED_GET, {"id": "resp_1"}),
    ("GET", "/v1/responses/resp_1//", "responses", STORED_GET, {"id": "resp_1"}),
    ("DELETE", "/v1/responses/resp_2", "responses", STORED_DELETE, {"id": "resp_2"}),
    ("POST", "/api/chat", "ollama", TURN, {}),
    ("POST", "/api/generate/", "ollama", TURN, {}),
    ("GET", "/api/tags", "ollama", CATALOG, {}),
    ("HEAD", "/api/tags", "ollama", CATALOG, {}),
    ("POST", "/api/show", "ollama", CATALOG, {}),
    ("GET", "/api/ps", "ollama", CATALOG, {}),
    ("GET", "/api/version", "ollama", EXCHANGE, {}),
    ("HEAD", "/", "ollama", EXCHANGE, {}),
    ("POST", "/api/embed", "ollama", EXCHANGE, {}),
    ("POST", "/api/pull", "ollama", CATALOG, {}),
    ("GET", "/api/pull", "ollama", EXCHANGE, {}),
    ("DELETE", "/api/delete", "ollama", EXCHANGE, {}),
    ("POST", "/api/delete", "ollama", EXCHANGE, {}),
    ("HEAD", "/api/blobs/sha256:ab12", "ollama", EXCHANGE, {"digest": "sha256:ab12"}),
    ("POST", "/api/blobs/sha256:ab12", "ollama", EXCHANGE, {"digest": "sha256:ab12"}),
])
def test_a_front_serves_the_paths_it_declares(method, path, front, action, params):
    routed = route_for(method, path, Config())
    assert routed is not None
    assert (routed.front.name, routed.route.action, routed.params) == (front, action, params)


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/v1/chat/completions"),  # only a POST is a turn
    ("POST", "/v1/models"),
    ("GET", "/v1/models"),
    ("GET", "/v1/responses/"),  # no id
    ("GET", "/v1/responses//"),
    ("GET", "/v1/responses/a/b"),  # not one segment
    ("POST", "/v1/responses/resp_1"),
    ("PUT", "/v1/responses/resp_1"),
    ("POST", "/v1/chat/completionsx"),
    ("POST", "/prefix/v1/messages"),
    ("GET", "/api/chat"),
    ("POST", "/api/tags"),
    ("POST", "/api/unknown"),
])
def test_what_no_front_declares_is_relayed(method, path):
    assert route_for(method, path, Config()) is None


def test_the_settings_relay_a_route_they_turn_off():
    relaying = Config(responses_mode="relay")
    assert route_for("GET", "/v1/responses/resp_1", relaying) is None
    assert route_for("DELETE", "/v1/responses/resp_1", relaying) is None
    turn = route_for("POST", "/v1/responses", relaying)  # the front relays it in its plan
    assert turn is not None
    assert turn.route.action == TURN


def test_each_front_is_found_by_its_turn_path_and_its_name():
    for front in FRONTS:
        assert front_for("POST", front.path) is front
        assert front_named(front.name) is front
    assert front_for("POST", "/v1/messages/count_tokens") is None
    assert front_named("nope") is None
    assert DEFAULT is chat.FRONT


def _toy_parse(incoming: Incoming, config: Config):
    raise ProxyError(400, f"{incoming.method} {incoming.path} {dict(incoming.params)}")


TOY = Front("toy", (Route("POST", "/v2/generate"), Route("POST", "/v2/models/{model}/generate")),
            _toy_parse, chat.render_json, chat.ChatStream.for_plan, chat.error_response,
            key_headers=("X-Toy-Key",))


def test_a_new_front_is_its_declaration_and_one_registry_entry():
    fronts = (*FRONTS, TOY)
    routed = route_for("POST", "/v2/models/qwen/generate", Config(), fronts)
    assert routed is not None
    assert routed.front is TOY
    assert routed.params == {"model": "qwen"}
    assert route_for("POST", "/v2/models/qwen/generate", Config()) is None  # not registered
    assert route_for("POST", "/v1/messages", Config(), fronts).front.name == "messages"
    with pytest.raises(ProxyError) as caught:
        routed.front.parse(Incoming("POST", "/v2/models/qwen/generate", b"{}",
                                    params=routed.params), Config())
    assert caught.value.message == "POST /v2/models/qwen/generate {'model': 'qwen'}"
    assert key_headers(fronts)[-1] == "X-Toy-Key"
    assert "X-Toy-Key" not in key_headers()


def test_the_door_takes_a_key_from_the_headers_the_fronts_declare():
    assert key_headers()[0] == "Authorization"
    assert {"x-api-key", "api-key"} <= {name.lower() for name in key_headers()}
    door = Door(["k1"], key_headers((*FRONTS, TOY)))
    assert door.authorize("POST", {"X-Toy-Key": "k1"}) == "k1"
    assert door.authorize("POST", {"X-Api-Key": "k1"}) == "k1"
    assert door.authorize("POST", {"Authorization": "Bearer k1", "X-Toy-Key": "no"}) == "k1"
    with pytest.raises(ProxyError) as caught:
        Door(["k1"], key_headers()).authorize("POST", {"X-Toy-Key": "k1"})
    assert caught.value.status == 401


def test_the_door_strips_every_declared_key_header_upstream():
    door = Door(["k1"], key_headers((*FRONTS, TOY)))
    sent = door.upstream_headers([("X-Toy-Key", "k1"), ("X-Api-Key", "k1"), ("Accept", "*/*")],
                                 Config(), None, buffered=True)
    assert "accept" in {name.lower() for name in sent}
    assert not {"x-toy-key", "x-api-key"} & {name.lower() for name in sent}
