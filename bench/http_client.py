"""`python -m bench.http_client`: why the upstream client is urllib3, not `requests`.

The CPU one buffered call costs the client, through a kept-alive connection to a loopback
server answering a 1 KB completion at once: a `requests.Session` (as the design card first
named it) against the urllib3 pool the proxy uses (`requests`' own engine, without the
Session's per-request preparation: URL requoting, hooks, cookie and environment merging, the
`iter_content` loop). Measured with the calling thread's CPU clock, so the server's work does
not count. docs/architecture.md's "Dependencies" section quotes the result.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests
import urllib3

ANSWER = (b'{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":'
          b'[{"index":0,"message":{"role":"assistant","content":"' + b"a" * 900
          + b'"},"finish_reason":"stop"}]}')
REQUEST = (b'{"model":"m","messages":[{"role":"user","content":"' + b"x" * 1000
           + b'"}],"stream":false}')
PATH = "/v1/chat/completions"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall

    def log_message(self, *args: object) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)


def _cpu_per_call(call: Callable[[], bytes], count: int) -> float:
    """Microseconds of this thread's CPU per call (after a warm-up)."""
    for _ in range(min(200, count)):
        call()
    started = time.thread_time()
    for _ in range(count):
        call()
    return (time.thread_time() - started) / count * 1e6


def measure(count: int, rounds: int) -> tuple[float, float]:
    """(requests µs, urllib3 µs) per call: the median of `rounds` interleaved rounds."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}{PATH}"
    headers = {"Content-Type": "application/json"}
    session = requests.Session()
    pool = urllib3.HTTPConnectionPool("127.0.0.1", server.server_port, maxsize=2)
    timeout = urllib3.Timeout(connect=5, read=60)

    def with_requests() -> bytes:
        return session.post(url, data=REQUEST, headers=headers, timeout=(5, 60)).content

    def with_urllib3() -> bytes:
        return pool.urlopen("POST", PATH, body=REQUEST, headers=headers, timeout=timeout,
                            retries=False).data

    try:
        both = [(_cpu_per_call(with_requests, count), _cpu_per_call(with_urllib3, count))
                for _ in range(rounds)]
    finally:
        server.shutdown()
        server.server_close()
    return statistics.median(r for r, _ in both), statistics.median(u for _, u in both)


def main() -> None:
    """Print the two figures and their ratio."""
    parser = argparse.ArgumentParser(prog="python -m bench.http_client", description=__doc__)
    parser.add_argument("--count", type=int, default=3000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with_requests, with_urllib3 = measure(args.count, args.rounds)
    print(f"client CPU per buffered call: requests.Session {with_requests:.0f} µs, "
          f"urllib3 pool {with_urllib3:.0f} µs ({with_requests / with_urllib3:.2f}x, "
          f"+{with_requests - with_urllib3:.0f} µs per call)")


if __name__ == "__main__":
    main()
