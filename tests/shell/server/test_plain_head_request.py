"""`PlainHeadRequest` reads a request as gunicorn's own `Request` does: the same method, target,
version, header list, scheme, Expect and body reader, or the same refusal, for any head (plain
lines, folded ones, bad names, control characters, repeated singletons, Expect, the secure-
scheme and forwarded headers, names with `_`) under any of the settings it reads, from a peer
gunicorn trusts or not, any request line (one read before, with the same settings or
others, too), one settings object serving many requests as a worker's does. It
serves only the gunicorn it was made from (`MADE_FROM`), and is installed in a worker only
there."""

from __future__ import annotations

import inspect
from typing import Any

from gunicorn.config import Config
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser
from gunicorn.http.unreader import IterUnreader
from gunicorn.workers.sync import SyncWorker
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.shell.server import request as plain
from proxy.shell.server.request import MADE_FROM, PlainHeadRequest, copied_sources
from proxy.shell.server.serve import _worker_class
from proxy.shell.server.settled import SettledConfig

_NAMES = st.sampled_from([
    "Host", "host", "Content-Type", "Content-Length", "Expect", "X-Forwarded-Proto",
    "X-Forwarded-Ssl", "X-Forwarded-For", "X_Forwarded_For", "Accept", "User-Agent",
    "Transfer-Encoding", "Connection", "X-Request-Id", "Authorization", "a", "Bad Name",
    "", "Ünï", "X-Forwarded-Protocol", "Host ", "Te"])
_VALUE = st.text(alphabet=st.sampled_from(
    [*"ab09 :/;=,-.*\t", "\x01", "\x7f", "\xe9", "\r", "\n", "\x00"]), max_size=12)
_COMMON = st.sampled_from(["https", "http", "ssl", "on", "100-continue", "Keep-Alive",
                           "close", "chunked", "12", "0", "x"])
_LINE = st.one_of(
    st.builds(lambda n, sp, v, tr: f"{n}:{sp}{v}{tr}", _NAMES,
              st.sampled_from(["", " ", "  ", "\t"]), st.one_of(_COMMON, _VALUE),
              st.sampled_from(["", " ", "\t"])),
    st.builds(lambda lead, v: lead + v, st.sampled_from([" ", "\t"]), _VALUE),  # folded
    _VALUE,  # no colon, most often
)
# Lines gunicorn takes as they are, most of them: the fast path's own ground.
_PLAIN_LINE = st.builds(
    lambda n, sp, v, tr: f"{n}:{sp}{v}{tr}",
    st.sampled_from(["Host", "Content-Type", "content-length", "Expect", "X-Forwarded-Proto",
                     "X-FORWARDED-SSL", "X-Forwarded-For", "X_Forwarded_For", "Accept",
                     "Connection", "Transfer-Encoding", "X-Request-Id", "a", "Te"]),
    st.sampled_from(["", " ", "\t "]),
    st.one_of(_COMMON, st.text(alphabet=st.sampled_from([*"ab09 :/;=,-.*\t\xe9"]),
                               max_size=12)),
    st.sampled_from(["", " ", "\t"]))
_BLOCKS = st.one_of(st.lists(_PLAIN_LINE, min_size=1, max_size=6),
                    st.lists(_PLAIN_LINE, min_size=1, max_size=6),
                    st.lists(st.one_of(_PLAIN_LINE, _LINE), max_size=6))
# Request lines: the same few again (a kept answer served), odd methods, targets, versions.
_REQUEST_LINES = st.one_of(
    st.sampled_from(["POST /v1/chat/completions HTTP/1.1", "GET /v1/models HTTP/1.1",
                     "POST /v1/chat?x=1 HTTP/1.1", "GET //double/slash HTTP/1.0"]),
    st.builds(lambda m, t, v: f"{m} {t} {v}",
              st.sampled_from(["GET", "get", "POST", "M-SEARCH", "OPTIONS", "CONNECT", "PO#T",
                               "AB", "VERYLONGMETHODNAMEHERE"]),
              st.sampled_from(["/", "*", "/a#frag", "/a?k=v", "host:443", "http://h/p",
                               "rel/path", "/\xe9", "/a%20b", "/a b", ""]),
              st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/0.9", "http/1.1",
                               "HTTP/1.10"])))
_PEERS = st.sampled_from([("127.0.0.1", 40000), ("10.1.2.3", 5), ("192.168.9.9", 7),
                          ("::1", 9), "/run/proxy.sock"])


def _config(draw: Any) -> Config:
    config = Config()
    config.set("http_parser", "python")
    config.set("header_map", draw(st.sampled_from(["refuse", "drop", "dangerous"])))
    config.set("strip_header_spaces", draw(st.booleans()))
    config.set("permit_obsolete_folding", draw(st.booleans()))
    config.set("limit_request_fields", draw(st.sampled_from([100, 2, 4])))
    config.set("limit_request_field_size", draw(st.sampled_from([8190, 0, 14])))
    config.set("permit_unconventional_http_method", draw(st.booleans()))
    config.set("permit_unconventional_http_version", draw(st.booleans()))
    config.set("casefold_http_method", draw(st.booleans()))
    config.set("forwarded_allow_ips", draw(st.sampled_from(["127.0.0.1,::1", "*",
                                                            "10.0.0.0/8", ""])))
    return config


def _outcome(kind: type[Request], config: Any, raw: bytes, peer: Any) -> Any:
    try:
        req = kind(config, IterUnreader([raw]), peer, 1)
    except Exception as exc:  # (each of gunicorn's refusals, compared as it raised it)
        return type(exc), str(exc), exc.args
    reader = req.body.reader
    return (req.method, req.uri, req.path, req.query, req.fragment, req.version, req.headers,
            req.scheme, req._expected_100_continue, type(reader).__name__,
            getattr(reader, "length", None))


@settings(max_examples=1500, deadline=None)
@given(data=st.data())
def test_a_request_reads_as_gunicorn_s_own(data):
    config = _config(data.draw)
    settled = SettledConfig(config)
    for _ in range(data.draw(st.integers(1, 4))):  # one worker's settings, several requests
        lines = data.draw(_BLOCKS)
        head = "\r\n".join([data.draw(_REQUEST_LINES), *lines]) + "\r\n\r\n"
        raw = head.encode("latin-1") + b'{"a": 1}'
        peer = data.draw(_PEERS)
        theirs = _outcome(Request, config, raw, peer)
        assert _outcome(PlainHeadRequest, config, raw, peer) == theirs
        assert _outcome(PlainHeadRequest, settled, raw, peer) == theirs


def test_a_peer_is_judged_once_per_address():
    settled = SettledConfig(Config())
    judged: list[str] = []
    for host in ("127.0.0.1", "10.0.0.1", "127.0.0.1", "10.0.0.1"):
        assert settled.trusted_peer(host, lambda h=host: judged.append(h) or h == "127.0.0.1"
                                    ) is (host == "127.0.0.1")
    assert judged == ["127.0.0.1", "10.0.0.1"]


def test_the_installed_gunicorn_is_the_one_it_was_made_from(monkeypatch):
    assert copied_sources() == MADE_FROM
    monkeypatch.setattr(RequestParser, "mesg_class", Request)
    assert plain.install()
    assert RequestParser.mesg_class is PlainHeadRequest


def test_another_gunicorn_keeps_its_own_request(monkeypatch):
    monkeypatch.setattr(RequestParser, "mesg_class", Request)
    monkeypatch.setattr(plain, "MADE_FROM", {**MADE_FROM, "Message.parse_headers": "mended"})
    assert not plain.install()
    assert RequestParser.mesg_class is Request


def test_a_gunicorn_without_its_source_keeps_its_own_request(monkeypatch):
    def unreadable(_method: object) -> str:
        raise OSError("could not get source code")

    monkeypatch.setattr(RequestParser, "mesg_class", Request)
    monkeypatch.setattr(inspect, "getsource", unreadable)
    assert not plain.install()
    assert RequestParser.mesg_class is Request


def test_a_worker_makes_plain_head_requests_once_it_starts(monkeypatch):
    monkeypatch.setattr(RequestParser, "mesg_class", Request)
    monkeypatch.setattr(SyncWorker, "init_process", lambda self: None)
    worker_class = _worker_class("sync")
    worker = worker_class.__new__(worker_class)
    worker.cfg = Config()
    worker.init_process()
    assert RequestParser.mesg_class is PlainHeadRequest


def test_a_request_line_with_a_query_is_never_kept(monkeypatch):
    monkeypatch.setattr(plain, "_LINES", {})
    config = Config()
    for line in ("GET /v1/models?api-key=sk-1 HTTP/1.1", "GET /v1/models HTTP/1.1",
                 "GET /" + "a" * plain.LINE_KEPT_MAX + " HTTP/1.1"):
        PlainHeadRequest(config, IterUnreader([f"{line}\r\nHost: h\r\n\r\n".encode()]),
                         ("127.0.0.1", 1), 1)
    assert [key[0] for key in plain._LINES] == [b"GET /v1/models HTTP/1.1"]
