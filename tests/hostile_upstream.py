"""A hostile (or broken) vLLM for the tests that attack the proxy's profile probe: the fake
vLLM 0.33 (tests/fakes/vllm.py) whose identity endpoint misbehaves, which may list several
models, and which may sit behind a gateway that wants a key on every path."""

from __future__ import annotations

from tests.fakes.base import Answer, Received
from tests.fakes.vllm import FakeVLLM

DRIP = "drip"  # `/version` answers 200, then one byte a second, for ten minutes
BLOAT = "bloat"  # `/version` answers at once, its `version` 100 MB long
_MB = b"9" * (1 << 20)


class HostileVLLM(FakeVLLM):
    """The fake vLLM with `version_mode` (None: as vLLM), `listed` (the ids `/v1/models`
    lists besides its own model) and `key` (every path answers 401 without
    `Authorization: Bearer {key}`, as a gateway in front of it does)."""

    def __init__(self, version_mode: str | None = None, listed: tuple[str, ...] = (),
                 key: str | None = None, **options) -> None:
        self.version_mode = version_mode
        self.listed = listed
        self.key = key
        super().__init__(**options)

    def _route(self, received: Received) -> Answer:
        path = received.path.split("?")[0]
        if self.key is not None and received.headers.get("Authorization") != (
                f"Bearer {self.key}"):
            return Answer(status=401, body={"error": {"message": "Unauthorized",
                                                      "code": 401}})
        if received.method == "GET" and path == "/version" and self.version_mode == DRIP:
            return Answer(chunks=[b'{"version": "0.33.0'] + [b"9"] * 600 + [b'"}'],
                          chunk_gap=1.0)
        if received.method == "GET" and path == "/version" and self.version_mode == BLOAT:
            return Answer(chunks=[b'{"version": "0.33.0', *([_MB] * 100), b'"}'])
        if received.method == "GET" and path == "/v1/models" and self.listed:
            return Answer(body={"object": "list", "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "vllm",
                 "root": name, "parent": None, "max_model_len": self.max_model_len,
                 "permission": []} for name in (self.model, *self.listed)]})
        return super()._route(received)

    def info_asked(self) -> list[str]:
        """The info endpoints asked so far (every request but a chat completion)."""
        return [r.path for r in self.received if not r.path.startswith(self.chat_path)]
