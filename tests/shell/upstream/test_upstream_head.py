"""An upstream answer's header block: read without the email package, the same message."""

from __future__ import annotations

import email.parser
import http.client
import io

import pytest

from proxy.shell.upstream import head


def _by_email(block: bytes) -> http.client.HTTPMessage:
    lines = http.client._read_headers(io.BytesIO(block))  # type: ignore[attr-defined]
    return email.parser.Parser(_class=http.client.HTTPMessage).parsestr(
        b"".join(lines).decode("iso-8859-1"))


def _same(ours: http.client.HTTPMessage, theirs: http.client.HTTPMessage) -> None:
    assert type(ours) is type(theirs)
    assert ours.items() == theirs.items()
    assert ours.as_string() == theirs.as_string()
    assert [type(d) for d in ours.defects] == [type(d) for d in theirs.defects]
    assert ours.get_content_type() == theirs.get_content_type()
    assert ours.is_multipart() == theirs.is_multipart()


PLAIN = [
    b"Content-Type: application/json\r\nContent-Length: 12\r\n\r\n",
    b"content-type:application/json\r\nX-Empty:\r\nX-Spaced:   a b  \r\n\r\n",
    b"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nDate: Tue, 01 Dec 2026 10:00:00 GMT\r\n\r\n",
    b"X-Colons: a:b:c\r\nX-Tab:\tvalue\r\nX-Latin: caf\xe9\r\n\r\n",
    b"Transfer-Encoding: chunked\nConnection: keep-alive\n\n",
    b"\r\n",
]
NOT_PLAIN = [
    b"X-Folded: one\r\n two\r\n\r\n",  # obs-fold: a continuation line
    b"X-Folded: one\r\n\ttwo\r\n\r\n",
    b"no colon here\r\nContent-Length: 3\r\n\r\n",  # the email parser ends the block there
    b": no name\r\n\r\n",
    b"From someone: x\r\n\r\n",  # a name with a space
    b"X-Cr: a\rb\r\n\r\n",  # a lone CR splits the line for the email parser
    b"Content-Type: multipart/mixed; boundary=x\r\n\r\n",  # a body it looks into
    b"Content-Type: message/rfc822\r\n\r\n",
    b"X-A: 1\r\n",  # no blank line: the block ended with the stream
]


@pytest.mark.parametrize("block", PLAIN)
def test_a_plain_block_is_read_here_as_the_email_parser_reads_it(block: bytes) -> None:
    lines = http.client._read_headers(io.BytesIO(block))  # type: ignore[attr-defined]
    assert head.fields(lines) is not None
    _same(head.parse_headers(io.BytesIO(block)), _by_email(block))


@pytest.mark.parametrize("block", NOT_PLAIN)
def test_any_other_block_goes_to_the_email_parser(block: bytes) -> None:
    lines = http.client._read_headers(io.BytesIO(block))  # type: ignore[attr-defined]
    assert head.fields(lines) is None
    _same(head.parse_headers(io.BytesIO(block)), _by_email(block))


def test_the_rest_of_the_stream_is_left_unread() -> None:
    stream = io.BytesIO(b"Content-Length: 5\r\n\r\nhello")
    message = head.parse_headers(stream)
    assert message["content-length"] == "5"
    assert stream.read() == b"hello"


def test_http_client_reads_answers_with_it_once_the_upstream_client_is_loaded() -> None:
    import proxy.shell.upstream.client  # noqa: F401 (installs it)

    assert http.client.parse_headers is head.parse_headers


def test_a_python_without_the_line_reader_keeps_its_own_parser(monkeypatch) -> None:
    def its_own(fp, _class=http.client.HTTPMessage):
        return _class()

    monkeypatch.setattr(http.client, "parse_headers", its_own)
    monkeypatch.delattr(http.client, "_read_headers")
    head.install()
    assert http.client.parse_headers is its_own
