"""The buffered calls' own connections (proxy/shell/upstream/direct.py), against a loopback
server that answers with scripted bytes: each call sends the bytes urllib3 sent and ends as
it ended (the same reply, or the same ProxyError), checked by making it both ways; connections
are kept alive, replaced when stale, and never reused after an answer that was not read to
its end or that closed them."""

from __future__ import annotations

import gzip
import http.client
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
import urllib3
from hypothesis import given, settings
from hypothesis import strategies as st
from urllib3.exceptions import InvalidHeader

from proxy.base.errors import ProxyError
from proxy.shell.upstream import direct
from proxy.shell.upstream.client import (
    Timeouts,
    Upstream,
    UpstreamCall,
    disconnect,
    response_headers,
)
from proxy.shell.upstream.direct import PIECE, HeaderLines, framing, header_block
from proxy.shell.upstream.head import expected_length, joined

TIMEOUTS = Timeouts(2.0, 2.0)
JSON = b'{"ok":true}'


def ok(body: bytes = JSON, *extra: bytes) -> bytes:
    """A 200 answer with a Content-Length, `extra` header lines added."""
    head = [b"HTTP/1.1 200 OK", b"Content-Type: application/json",
            b"Content-Length: %d" % len(body), *extra]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


# What the server does with one request: the bytes to answer (then keep the connection),
# or a function of the connection (which does as it likes).
Script = bytes | Callable[[socket.socket], None]


@dataclass
class RawServer:
    """A loopback HTTP/1.1 server answering request i with script i (the last one again
    after), recording each request's bytes and each connection it accepted."""

    scripts: list[Script]
    requests: list[bytes] = field(default_factory=list)
    accepted: int = 0

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            while (request := _read_request(connection)) is not None:
                self.requests.append(request)
                script = self.scripts[min(len(self.requests), len(self.scripts)) - 1]
                if callable(script):
                    script(connection)
                    return
                connection.sendall(script)

    def close(self) -> None:
        self._listener.close()


def _read_request(connection: socket.socket) -> bytes | None:
    """One request's bytes (head and Content-Length body); None once the client closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            more = connection.recv(65536)
        except OSError:
            return None
        if not more:
            return None
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += connection.recv(65536)
    return head + b"\r\n\r\n" + body


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(*scripts: Script) -> RawServer:
        servers.append(server := RawServer(list(scripts)))
        return server
    yield start
    for server in servers:
        server.close()


def pooled(url: str) -> Upstream:
    """An Upstream that goes urllib3's way for every call, as before the direct pool."""
    upstream = Upstream(url)
    upstream._direct = None
    return upstream


def outcome(call: Callable[[], object]) -> object:
    """What a call ends with: its reply, or its error's status, code and message."""
    try:
        return call()
    except ProxyError as exc:
        return (type(exc).__name__, exc.status, exc.code, exc.message,
                getattr(exc, "connecting", None))


def both_ways(serve: Callable[..., RawServer], call: Callable[[Upstream], object],
              *scripts: Script) -> tuple[object, list[bytes]]:
    """`call`'s outcome and the requests sent, made directly and urllib3's way (each on a
    server of its own, scripted alike), which must agree."""
    seen = []
    shown = []
    for make in (Upstream, pooled):
        server = serve(*scripts)
        upstream = make(server.url)
        ended = outcome(lambda upstream=upstream: call(upstream))
        seen.append((ended, server.requests))
        port = server.url.rsplit(":", 1)[1]  # (each server its own port)
        shown.append(repr((ended, server.requests)).replace(port, "PORT"))
    assert shown[0] == shown[1]
    return seen[0]


def post(upstream: Upstream, headers: dict[str, str] | None = None,
         max_bytes: int = 0) -> object:
    return upstream.complete("/v1/chat/completions", b'{"model":"m"}',
                             headers if headers is not None else {"X-Key": "1"}, TIMEOUTS,
                             max_bytes=max_bytes)


def get(upstream: Upstream) -> object:
    return upstream.complete_get("/v1/models", {"Authorization": "Bearer k"}, TIMEOUTS, 0)


@pytest.mark.parametrize("headers", [
    {"Content-Type": "application/json", "Accept": "application/json", "X-Spaced": "a  b"},
    {"User-Agent": "agent/1", "Accept-Encoding": "gzip", "X-Last": "z"},
    {},
])
def test_a_post_sends_the_bytes_urllib3_sent(serve, headers):
    reply, requests = both_ways(serve, lambda u: post(u, headers), ok())
    assert reply.status == 200
    assert reply.body == JSON
    assert requests[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")


def test_a_get_sends_no_content_length_as_before(serve):
    reply, requests = both_ways(serve, get, ok())
    assert reply.body == JSON
    assert b"content-length" not in requests[0].lower()


def like(upstream: Upstream, url: str) -> Upstream:
    """An Upstream for `url` that goes the way `upstream` goes."""
    return Upstream(url) if upstream._direct is not None else pooled(url)


def test_a_base_path_and_a_target_to_quote_go_as_urllib3_sent_them(serve):
    def call(upstream: Upstream) -> object:
        prefixed = like(upstream, upstream.base + "/pre fix")
        return prefixed.complete_get("/v1/models?q=a b#frag", {}, TIMEOUTS, 0)
    _, requests = both_ways(serve, call, ok())
    assert requests[0].startswith(b"GET /pre%20fix/v1/models?q=a%20b HTTP/1.1\r\n")


def test_credentials_in_the_url_win_on_both_ways(serve):
    def call(upstream: Upstream) -> object:
        keyed = like(upstream, upstream.base.replace("http://", "http://us%40er:p%3Aw@"))
        return post(keyed, {"Authorization": "Bearer client"})
    _, requests = both_ways(serve, call, ok())
    assert b"authorization: Basic dXNAZXI6cDp3" in requests[0]  # (make_headers spells it so)


def test_repeated_answer_headers_are_joined_as_urllib3_joined_them(serve):
    reply, _ = both_ways(serve, post, ok(JSON, b"Set-Cookie: a=1", b"set-cookie: b=2",
                                         b"X-Seen: 1"))
    assert reply.headers["Set-Cookie"] == "a=1, b=2"
    assert joined([("A", "1"), ("a", "2"), ("B", "3")]) == (
        {"A": "1, 2", "B": "3"}, {"a": "1, 2", "b": "3"})


def test_a_kept_alive_connection_is_reused(serve):
    server = serve(ok())
    upstream = Upstream(server.url)
    for _ in range(3):
        assert post(upstream).status == 200
    assert server.accepted == 1
    assert len(server.requests) == 3


def test_an_answer_that_closes_its_connection_is_not_reused(serve):
    server = serve(ok(JSON, b"Connection: close"), ok())
    upstream = Upstream(server.url)
    assert post(upstream).status == 200
    assert post(upstream).status == 200
    assert server.accepted == 2


def test_a_connection_the_upstream_closed_while_idle_is_replaced_without_an_error(serve):
    def answer_then_close(connection: socket.socket) -> None:
        connection.sendall(ok())
        connection.shutdown(socket.SHUT_RDWR)
    server = serve(answer_then_close, ok())
    upstream = Upstream(server.url)
    assert post(upstream).status == 200
    time.sleep(0.1)  # the close has arrived
    assert post(upstream).status == 200
    assert server.accepted == 2


def test_a_body_cut_short_ends_as_before(serve):
    def cut(connection: socket.socket) -> None:
        connection.sendall(ok(b"x" * 100)[:-60])
    failed, _ = both_ways(serve, post, cut)
    assert failed == ("ProxyError", 502, "upstream_cut",
                      "The upstream's answer broke off before its end (ProtocolError).", None)


def test_a_chunked_body_cut_short_ends_as_before(serve):
    def cut(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab")
    failed, _ = both_ways(serve, post, cut)
    assert failed[2] == "upstream_cut"


def test_a_chunked_body_is_read_whole(serve):
    chunked = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"ok\"\r\n6\r\n:true}\r\n0\r\n\r\n")
    reply, _ = both_ways(serve, post, chunked)
    assert reply.body == JSON


def test_a_reset_before_the_answer_is_unreached_but_connected(serve):
    def reset(connection: socket.socket) -> None:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00"
                              b"\x00\x00")
        connection.close()
    failed, _ = both_ways(serve, post, reset)
    assert failed[:3] == ("Unreached", 502, "upstream_unreachable")
    assert failed[3].endswith("could not be reached: ProtocolError.")
    assert failed[4] is False  # not while connecting: no other replica is asked


def test_a_close_before_the_answer_ends_as_before(serve):
    failed, _ = both_ways(serve, get, lambda connection: None)
    assert failed[0] == "Unreached"
    assert failed[3].endswith("ProtocolError.")


def test_an_answer_too_large_is_refused_and_its_connection_not_reused(serve):
    failed, _ = both_ways(serve, lambda u: post(u, max_bytes=5), ok())
    assert failed[2] == "upstream_too_large"
    server = serve(ok(), ok())
    upstream = Upstream(server.url)
    outcome(lambda: post(upstream, max_bytes=5))
    assert post(upstream).status == 200
    assert server.accepted == 2


def test_a_gzipped_answer_is_decoded_as_before(serve):
    packed = gzip.compress(JSON)
    reply, _ = both_ways(serve, post, ok(packed, b"Content-Encoding: gzip"))
    assert reply.body == JSON


def test_a_broken_gzipped_answer_ends_as_before(serve):
    failed, _ = both_ways(serve, post, ok(b"not gzip", b"Content-Encoding: gzip"))
    assert failed[3].endswith("(DecodeError).")


def test_two_content_lengths_that_disagree_end_as_before(serve):
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nContent-Length: 12\r\n\r\n" + JSON
    failed, _ = both_ways(serve, post, answer)
    assert failed[3].endswith("InvalidHeader.")


def test_a_silent_upstream_is_a_read_timeout(serve):
    def silent(connection: socket.socket) -> None:
        time.sleep(1.0)
    quick = Timeouts(2.0, 0.3)
    failed, _ = both_ways(serve, lambda u: u.complete("/v1/chat/completions", b"{}", {}, quick),
                          silent)
    assert failed[1:3] == (504, "upstream_timeout")


def test_a_refused_connection_is_unreached_while_connecting():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    failed = [outcome(lambda make=make: post(make(url))) for make in (Upstream, pooled)]
    assert failed[0] == failed[1]
    assert failed[0][0] == "Unreached"
    assert failed[0][4] is True
    assert failed[0][3].endswith("NewConnectionError.")


def test_a_cancelled_call_cuts_its_connection_and_ends_as_the_client_leaving(serve):
    gone = threading.Event()

    def hold(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")
        connection.settimeout(5)
        gone.set() if connection.recv(1) == b"" else None
    server = serve(hold)
    call = UpstreamCall.complete(Upstream(server.url), "/v1/chat/completions", b"{}", {},
                                 TIMEOUTS)
    time.sleep(0.2)
    call.cancel()
    assert call.wait(3)
    failed = call.outcome()
    assert isinstance(failed, ProxyError)
    assert failed.code == "client_disconnected"
    assert gone.wait(3)


def relayed(upstream: Upstream, read: Timeouts = TIMEOUTS) -> object:
    """A passthrough's view of a relayed answer: its status, the headers it relays, its body
    as relay_body gives it, or the type of what broke it off."""
    response = upstream.open_whole("POST", "/v1/chat/completions", b'{"stream":false}',
                                   {"Content-Type": "application/json"}, read)
    pieces: list[bytes] = []
    try:
        pieces.extend(upstream.relay_body(response))
    except Exception as exc:
        pieces.append(type(exc).__name__.encode())
    return (response.status, response_headers(response.headers, keep_length=True),
            response.headers.get("content-type"), b"".join(pieces))


def test_a_relayed_answer_is_relayed_as_before(serve):
    ended, requests = both_ways(serve, relayed, ok(JSON, b"Set-Cookie: a=1",
                                                   b"Set-Cookie: b=2"))
    assert ended[3] == JSON
    assert ("Set-Cookie", "b=2") in ended[1]  # each line its own
    assert requests[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")


def test_a_relayed_chunked_answer_is_relayed_as_before(serve):
    chunked = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n6\r\ndata: \r\n3\r\n1\n\n\r\n0\r\n\r\n")
    ended, _ = both_ways(serve, relayed, chunked)
    assert ended[3] == b"data: 1\n\n"


def test_a_relayed_answer_cut_short_breaks_off_as_before(serve):
    def cut(connection: socket.socket) -> None:
        connection.sendall(ok(b"x" * 100)[:-60])
    ended, _ = both_ways(serve, relayed, cut)
    assert ended[3].endswith(b"ProtocolError")


def test_a_relayed_answer_gone_silent_times_out_as_before(serve):
    def silent_after_head(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{")
        time.sleep(1.0)
    ended, _ = both_ways(serve, lambda u: relayed(u, Timeouts(2.0, 0.3)), silent_after_head)
    assert ended[3] == b"{ReadTimeoutError"


def test_a_relayed_answer_gives_its_connection_back_and_a_late_disconnect_spares_it(serve):
    server = serve(ok())
    upstream = Upstream(server.url)
    response = upstream.open_whole("POST", "/v1/chat/completions", b"{}", {}, TIMEOUTS)
    assert b"".join(upstream.relay_body(response)) == JSON
    disconnect(response)  # (the client watcher, late)
    assert relayed(upstream)[3] == JSON
    assert server.accepted == 1


def test_headers_the_direct_path_leaves_to_urllib3():
    assert framing({"X-A": "1"}) is not None
    assert framing({"Host": "elsewhere"}) is None
    assert framing({"content-length": "3"}) is None
    assert framing({"Transfer-Encoding": "chunked"}) is None
    assert framing({"User-Agent": "@@@SKIP_HEADER@@@"}) is None


def test_the_length_urllib3_expects():
    assert expected_length({"content-length": "12"}, 200, "POST") == 12
    assert expected_length({"content-length": "12, 12"}, 200, "POST") == 12
    assert expected_length({"content-length": "x"}, 200, "POST") is None
    assert expected_length({"content-length": "-1"}, 200, "POST") is None
    assert expected_length({"content-length": "12", "transfer-encoding": "chunked"}, 200,
                           "POST") is None
    assert expected_length({"content-length": "12"}, 204, "POST") == 0
    assert expected_length({}, 200, "HEAD") == 0
    assert expected_length({}, 200, "GET") is None


def test_an_https_upstream_keeps_urllib3():
    assert Upstream("https://example.invalid")._direct is None
    assert Upstream("http://example.invalid.")._direct is None
    assert Upstream("http://example.invalid")._direct is not None


@pytest.mark.parametrize(("body", "chunked", "yields"), [
    (JSON, False, 0), (JSON, True, 0),
    (b"x" * (PIECE + 10), False, 1), (b"x" * (2 * PIECE), False, 1),
    (b"x" * (2 * PIECE + 1), False, 2)])
def test_the_body_is_read_whole_with_a_yield_between_two_pieces_only(serve, monkeypatch,
                                                                     body, chunked, yields):
    if chunked:
        answer = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
    else:
        answer = ok(body)
    slept: list[float] = []
    monkeypatch.setattr(direct.time, "sleep", slept.append)
    server = serve(answer, answer)
    upstream = Upstream(server.url)
    for _ in range(2):  # (the connection given back, and reused)
        assert post(upstream).body == body
    assert slept == [0] * (2 * yields)
    assert server.accepted == 1


_NAMES = st.sampled_from(["Content-Type", "content-type", "CONTENT-TYPE", "Set-Cookie",
                          "set-cookie", "Connection", "X-A", "x-a", "Content-Encoding"])
_VALUES = st.text(st.sampled_from("ab ,=;"), max_size=5)
_ASKED = ["Content-Type", "content-type", "Set-Cookie", "connection", "X-A", "x-b",
          "Content-Encoding", "Transfer-Encoding"]


def _item(headers: object, name: str) -> object:
    try:
        return headers[name]  # type: ignore[index]
    except KeyError:
        return KeyError


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(_NAMES, _VALUES), max_size=7))
def test_a_relayed_answers_header_lines_read_as_urllib3s_dict_of_them(lines):
    by_lowered = joined(lines)[1]
    ours, theirs = HeaderLines(lines, by_lowered), urllib3.HTTPHeaderDict(lines)
    assert list(ours.items()) == list(theirs.items())
    for name in _ASKED:
        assert (name in ours) == (name in theirs)
        assert ours.get(name) == theirs.get(name)
        assert ours.get(name, "") == theirs.get(name, "")
        assert _item(ours, name) == _item(theirs, name)
    for keep_length in (False, True):
        assert (response_headers(ours, keep_length=keep_length)
                == response_headers(theirs, keep_length=keep_length))


def _urllib3s_length(by_lowered, status, method):
    """The body length urllib3's own response holds an answer of these headers to."""
    return urllib3.HTTPResponse(body=b"", headers=by_lowered, status=status,
                                request_method=method, preload_content=False).length_remaining


def _length_or_error(by_lowered, status, method, function):
    try:
        return function(by_lowered, status, method)
    except InvalidHeader as exc:
        return str(exc)


_LENGTHS = st.one_of(st.none(), st.text(st.sampled_from("0123 ,-+x_"), max_size=7),
                     st.sampled_from(["12", "12, 12", "12,13", " 5", "-1", "0", ""]))
_ENCODINGS = st.one_of(st.none(), st.text(st.sampled_from("chunkedCHUNKED ,gzip"), max_size=12),
                       st.sampled_from(["chunked", "gzip, chunked", " Chunked ", "identity"]))


@settings(max_examples=800, deadline=None)
@given(_LENGTHS, _ENCODINGS, st.sampled_from([100, 101, 199, 200, 204, 206, 304, 404, 502]),
       st.sampled_from(["POST", "GET", "HEAD"]))
def test_the_expected_length_is_urllib3s(length, encoding, status, method):
    by_lowered = {k: v for k, v in (("content-length", length),
                                     ("transfer-encoding", encoding)) if v is not None}
    assert (_length_or_error(by_lowered, status, method, expected_length)
            == _length_or_error(by_lowered, status, method, _urllib3s_length))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.text(st.sampled_from("Ab-:\r\n é"), max_size=5),
                          st.text(st.sampled_from("ab \r\n\té"), max_size=4)), max_size=4))
def test_a_header_block_is_written_as_putheader_writes_it_names_seen_or_not(pairs):
    first = header_block([], dict(pairs))
    assert header_block([], dict(pairs)) == first  # (its names kept as legal once seen)
    if first is not None:
        connection = http.client.HTTPConnection("127.0.0.1", 9)
        connection.putrequest("GET", "/", skip_host=True, skip_accept_encoding=True)
        for name, value in dict(pairs).items():
            connection.putheader(name, value)
        assert b"\r\n".join(connection._buffer[1:]) == first


def test_a_body_larger_than_a_send_buffer_goes_whole_on_a_reused_connection(serve):
    big = b'{"model":"m","pad":"' + b"x" * (8 << 20) + b'"}'
    server = serve(ok(), ok())
    upstream = Upstream(server.url)
    for _ in range(2):  # a fresh connection, then the same one again
        reply = upstream.complete("/v1/chat/completions", big, {"X-Key": "1"}, TIMEOUTS)
        assert reply.body == JSON
    assert server.accepted == 1
    assert [request.endswith(b"\r\n\r\n" + big) for request in server.requests] == [True, True]
