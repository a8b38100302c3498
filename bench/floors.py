"""What the stack costs before the proxy adds anything: WSGI apps for `bench.instructions
--app`, served by the same gunicorn, worker class and settings as the proxy.

- `bare`: a WSGI function answering every request with a fixed 1 KB JSON body (gunicorn and
  gevent alone);
- `hello`: the same answer from a Flask view (Flask and Werkzeug added);
- `relay`: a Flask view that sends the request's body to the upstream
  (TOOLCALL_PROXY_UPSTREAM, the bench's fake) over one urllib3 pool and returns its answer,
  read whole (the least a relay over the card's stack does);
- `direct`: the same relay over http.client's own connections, kept (urllib3's layers off);
- `raw`: that relay as a bare WSGI function (Flask's and Werkzeug's layers off too).

    python -m bench.instructions passthrough-json --app bench.floors:bare

Each has `extensions`, empty, as a Flask app has: the deploy hooks look there for the proxy.
"""

from __future__ import annotations

import http.client
import os
from collections.abc import Callable, Iterable
from typing import Any

import urllib3
from flask import Flask, Response, request

_ANSWER = b'{"object":"chat.completion","text":"' + b"x" * 990 + b'"}'
_HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(_ANSWER)))]

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def bare(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """The fixed answer, its body read first (as any handler of a POST would)."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length:
        environ["wsgi.input"].read(length)
    start_response("200 OK", list(_HEADERS))
    return [_ANSWER]


bare.extensions = {}  # type: ignore[attr-defined]  # (what the deploy hooks read of an app)

hello = Flask("floor_hello")


@hello.route("/<path:path>", methods=["GET", "POST"])
def _hello(path: str) -> Response:
    request.get_data()
    return Response(_ANSWER, content_type="application/json")


relay = Flask("floor_relay")
_upstream = urllib3.util.parse_url(os.environ.get("TOOLCALL_PROXY_UPSTREAM",
                                                  "http://127.0.0.1:8000"))
_pool = urllib3.HTTPConnectionPool(_upstream.host or "127.0.0.1", _upstream.port or 80,
                                   maxsize=64, block=False, retries=False)


@relay.route("/<path:path>", methods=["GET", "POST"])
def _relay(path: str) -> Response:
    answer = _pool.urlopen(request.method, "/" + path, body=request.get_data() or None,
                           headers={"Content-Type": "application/json"}, redirect=False)
    return Response(answer.data, status=answer.status,
                    content_type=answer.headers.get("Content-Type", "application/json"))

direct = Flask("floor_direct")
_idle: list[http.client.HTTPConnection] = []


@direct.route("/<path:path>", methods=["GET", "POST"])
def _direct(path: str) -> Response:
    connection = _idle.pop() if _idle else http.client.HTTPConnection(
        _upstream.host or "127.0.0.1", _upstream.port or 80)
    connection.request(request.method, "/" + path, body=request.get_data() or None,
                       headers={"Content-Type": "application/json"})
    answer = connection.getresponse()
    data = answer.read()
    _idle.append(connection)
    return Response(data, status=answer.status,
                    content_type=answer.getheader("Content-Type", "application/json"))


def raw(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """`direct`'s relay as a WSGI function (Flask and Werkzeug off)."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else None
    connection = _idle.pop() if _idle else http.client.HTTPConnection(
        _upstream.host or "127.0.0.1", _upstream.port or 80)
    connection.request(environ["REQUEST_METHOD"], environ["PATH_INFO"], body=body,
                       headers={"Content-Type": "application/json"})
    answer = connection.getresponse()
    data = answer.read()
    _idle.append(connection)
    start_response(f"{answer.status} {answer.reason}",
                   [("Content-Type", answer.getheader("Content-Type", "application/json")),
                    ("Content-Length", str(len(data)))])
    return [data]


raw.extensions = {}  # type: ignore[attr-defined]
