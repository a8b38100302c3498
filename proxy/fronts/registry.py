"""Which front answers a request: by method and path. A new front is one line here."""

from __future__ import annotations

from ..config import Config
from . import Front, chat, messages, responses

FRONTS: dict[str, Front] = {
    chat.PATH: chat.FRONT,
    responses.PATH: responses.FRONT,
    messages.PATH: messages.FRONT,
}


def front_for(method: str, path: str) -> Front | None:
    """The front for a request, or None when it is relayed (a trailing slash is the same
    path; only POST asks for a turn)."""
    if method != "POST":
        return None
    return FRONTS.get(path.rstrip("/"))


def front_named(name: str) -> Front | None:
    """The front of that name (as a log line's `front` names it), or None."""
    return next((front for front in FRONTS.values() if front.name == name), None)


def kept_for(method: str, path: str, config: Config) -> tuple[Front, str] | None:
    """The front and answer id of a `GET` or `DELETE {path}/{id}` that a front's keeper
    answers from the store (None: any other request, or one the settings relay)."""
    if method not in ("GET", "DELETE"):
        return None
    for front in FRONTS.values():
        keeper = front.keeper
        if keeper is None or not keeper.active(config) or not path.startswith(keeper.path + "/"):
            continue
        key = path[len(keeper.path) + 1:].rstrip("/")
        if key and "/" not in key:
            return front, key
    return None
