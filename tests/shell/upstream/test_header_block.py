"""The direct path's header lines written in one piece (`direct.header_block`): the bytes
http.client's `putheader` writes one header at a time, or None where it would refuse one or
write it its own way (and then `putheader` itself writes them, or raises)."""

from __future__ import annotations

import http.client

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.shell.upstream.direct import header_block, standard_lines

# names and values near every edge putheader knows: CR, LF, continuations, colons, spaces,
# controls, non-ASCII and past latin-1
_TEXT = st.text(st.sampled_from([*"aZ-_:;0 \t\r\n\x0b\x0c\x1c\x00\x7f", "é", "ÿ", "Ā", "€"]),
                max_size=8)
_NAMES = st.one_of(st.sampled_from(["Content-Type", "Authorization", "X-Request-Id", "A"]),
                   _TEXT)
_HEADERS = st.dictionaries(_NAMES, st.one_of(_TEXT, st.sampled_from(["", "x\r\n y"])),
                           max_size=5)


def _put_one_by_one(first: list[tuple[str, str]], headers: dict[str, str]) -> bytes | None:
    """What putheader writes of them (the buffer's pieces joined as it sends them), or None
    when it raises."""
    connection = http.client.HTTPConnection("127.0.0.1", 9)
    connection.putrequest("POST", "/v1/chat/completions")
    before = len(connection._buffer)  # type: ignore[attr-defined]
    try:
        for name, value in [*first, *headers.items()]:
            connection.putheader(name, value)
    except (ValueError, UnicodeEncodeError):
        return None
    return b"\r\n".join(connection._buffer[before:])  # type: ignore[attr-defined]


@settings(max_examples=400, deadline=None)
@given(_HEADERS, st.booleans())
def test_the_block_is_what_putheader_writes(headers: dict[str, str], framed: bool) -> None:
    first = [("Content-Length", "17"), ("User-Agent", "python-urllib3/2")] if framed else []
    block = header_block(first, headers)
    one_by_one = _put_one_by_one(first, headers)
    if block is None:  # (left to putheader: it refuses it, or writes a continued line)
        return
    assert block == one_by_one


def test_plain_headers_are_written_in_one_piece() -> None:
    headers = {"Content-Type": "application/json", "X-Request-Id": "abc", "Authorization":
               "Bearer é"}
    assert header_block([("Content-Length", "2")], headers) == _put_one_by_one(
        [("Content-Length", "2")], headers)
    assert header_block([], {}) == b""


def test_what_putheader_refuses_or_continues_is_left_to_it() -> None:
    for headers in ({"Bad Name:": "x"}, {"X": "a\nb"}, {"X": "a\r\n b"}, {"X": "€"},
                    {"é": "x"}, {" X": "x"}):
        assert header_block([], headers) is None


def test_the_standard_lines_are_putrequests() -> None:
    for host, port in (("127.0.0.1", 8000), ("vllm", 80), ("::1", 8000), ("bücher.de", 80)):
        connection = http.client.HTTPConnection(host, port)
        connection.putrequest("POST", "/v1/chat/completions")
        host_line, both = standard_lines(connection.host, connection.port)
        assert [host_line] == connection._buffer[1:2]  # type: ignore[attr-defined]
        assert both == b"\r\n".join(connection._buffer[1:])  # type: ignore[attr-defined]
