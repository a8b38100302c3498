"""Running beside a request (`shell.runtime.background`): the one-waiter event under gevent,
whose timed waits that end at one moment share one timer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# Run in a process of its own: gevent patches the process it is imported into.
PROBE = """
from gevent import monkey; monkey.patch_all()
import time, gevent
from proxy.shell.runtime.background import new_event
event = new_event(one_waiter=True)
began = time.monotonic()
print("timed out", event.wait(0.05), time.monotonic() - began >= 0.045)
gevent.spawn_later(0.02, event.set)
print("set", event.wait(0.5), time.monotonic() - began < 0.3)
event.clear()
wake = time.monotonic() + 0.15
def tokens():
    for _ in range(10):
        gevent.sleep(0.01)
        event.set()
gevent.spawn(tokens)
said = []
while (now := time.monotonic()) < wake:
    said.append(event.wait(wake - now))
    event.clear()
print("tokens", said.count(True), said[-1], abs(time.monotonic() - wake) < 0.03)
print("cleared", event.wait(0.01), event.is_set())
event.set()
print("stays set", event.wait(0.01), event.wait(None))
"""


def test_a_one_waiter_event_waits_as_gevents_own_does():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout.split("\n")
    assert out[:5] == ["timed out False True", "set True True", "tokens 10 False True",
                       "cleared False False", "stays set True True"]


# A socket's reads with their timeout kept by `watch_silence` against gevent's own: data
# read as it comes, gaps shorter than the timeout waited through, a longer silence raising
# socket.timeout in the reader at the timeout's end; the socket put back afterwards.
SILENCE = """
from gevent import monkey; monkey.patch_all()
import socket, time, gevent
from proxy.shell.runtime.background import watch_silence
def run(watched):
    ours, theirs = socket.socketpair()
    ours.settimeout(0.12)
    file = ours.makefile("rb")
    raw = file.raw
    class Response:  # (urllib3's: its http.client response's reader)
        _fp = type("Raw", (), {"fp": file})()
    def talk():
        for gap in (0.01, 0.08, 0.1, 0.05):
            gevent.sleep(gap)
            theirs.sendall(b"x" * 3)
    gevent.spawn(talk)
    stop = watch_silence(Response) if watched else (lambda: None)
    got, buffer = [], bytearray(16)
    try:
        while True:
            began = time.monotonic()
            got.append(raw.readinto(buffer))
    except socket.timeout as exc:
        late = time.monotonic() - began
        stop()
        print(watched, got, type(exc).__name__, str(exc), 0.11 < late < 0.2,
              ours.gettimeout(), "readinto" in vars(raw))
run(False)
run(True)
"""


def test_a_watched_silence_times_a_read_out_as_geventss_own_timeout_does():
    out = subprocess.run([sys.executable, "-c", SILENCE], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout.split("\n")
    assert out[:2] == ["False [3, 3, 3, 3] TimeoutError timed out True 0.12 False",
                       "True [3, 3, 3, 3] TimeoutError timed out True 0.12 False"]
