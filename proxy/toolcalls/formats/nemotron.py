"""NVIDIA Nemotron (Nano 2, Nemotron-H) calls: a JSON list between `<TOOLCALL>` tags.

    <TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</TOOLCALL>

(vLLM's `nemotron_json`/`nemotron_nano_v2`, llama.cpp's "Nemotron V2"; a single object in
place of the list is read too.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import json_frames
from ..scan import Document
from ..types import Frame

NAME = "nemotron"
_OPEN = "<TOOLCALL>"
MARKERS = (_OPEN,)
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\[\s*+[{\]]|\{\s*+["}]))')
_CLOSE = re.compile(r"\s*+</TOOLCALL>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<TOOLCALL>` whose payload is JSON, to its close tag."""
    yield from json_frames(doc, NAME, _OPENER, _OPEN, close=_CLOSE, listed=True)
