"""Which front answers a request: by method and path, as each front's `routes` declare.
Adding a front is one module (or package) and one line in `FRONTS`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..base.config import Config
from . import TURN, Front, Route, chat, messages, ollama, responses

FRONTS: tuple[Front[Any], ...] = (
    chat.FRONT,
    responses.FRONT,
    messages.FRONT,
    ollama.FRONT,
)

DEFAULT = chat.FRONT
"""The front whose envelope answers what no front serves (the relay, the proxy's own
endpoints): OpenAI's, as the upstream speaks it."""


@dataclass(frozen=True)
class Routed:
    """A request a front serves: the front, the route that matched and the ids it holds."""

    front: Front[Any]
    route: Route
    params: dict[str, str]


def route_for(method: str, path: str, config: Config,
              fronts: tuple[Front[Any], ...] = FRONTS) -> Routed | None:
    """The front and route that serve `method path` under `config`, or None: the request is
    relayed (a path no front declares, or one the settings relay)."""
    for front in fronts:
        for route in front.routes:
            params = route.match(method, path)
            if params is not None and route.when(config):
                return Routed(front, route, params)
    return None


def front_for(method: str, path: str) -> Front[Any] | None:
    """The front whose turns `method path` asks for, or None (a trailing slash is the same
    path; only a turn route counts)."""
    return next((front for front in FRONTS for route in front.routes
                 if route.action == TURN and route.match(method, path) is not None), None)


def front_named(name: str) -> Front[Any] | None:
    """The front of that name (as a log line's `front` names it), or None."""
    return next((front for front in FRONTS if front.name == name), None)


def key_headers(fronts: tuple[Front[Any], ...] = FRONTS) -> tuple[str, ...]:
    """Every header a front's clients carry the proxy's key in, each once, `Authorization`
    first (Bearer or Basic auth: the proxy's own endpoints take it too)."""
    names = ["Authorization"]
    for front in fronts:
        names.extend(name for name in front.key_headers
                     if name.lower() not in {n.lower() for n in names})
    return tuple(names)
