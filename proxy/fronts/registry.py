"""Which front answers a request: by method and path. A new front is one line here."""

from __future__ import annotations

from . import Front, chat, messages

FRONTS: dict[str, Front] = {
    chat.PATH: chat.FRONT,
    messages.PATH: messages.FRONT,
}


def front_for(method: str, path: str) -> Front | None:
    """The front for a request, or None when it is relayed (a trailing slash is the same
    path; only POST asks for a turn)."""
    if method != "POST":
        return None
    return FRONTS.get(path.rstrip("/"))
