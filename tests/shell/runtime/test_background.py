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


# A plain socket under `watch_silence` is waited on until readable before each read (gevent's
# read would try it first, and be refused): bytes there already are read at once, and a
# socket shut down while a read waits (a cancelled call) ends that read with an EOF.
WAIT_FIRST = """
from gevent import monkey; monkey.patch_all()
import socket, time, gevent
from proxy.shell.runtime.background import watch_silence
ours, theirs = socket.socketpair()
ours.settimeout(5)
file = ours.makefile("rb")
class Response:  # (urllib3's: its http.client response's reader)
    _fp = type("Raw", (), {"fp": file})()
stop = watch_silence(Response)
theirs.sendall(b"abc")
buffer = bytearray(16)
began = time.monotonic()
there = file.raw.readinto(buffer)
gevent.spawn_later(0.05, ours.shutdown, socket.SHUT_RDWR)
print(file.raw.readinto.__self__._readable is not None, there, file.raw.readinto(buffer),
      time.monotonic() - began < 1)
stop()
"""


def test_a_watched_plain_socket_is_waited_on_before_it_is_read():
    out = subprocess.run([sys.executable, "-c", WAIT_FIRST], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout.split("\n")
    assert out[0] == "True 3 0 True"


# The native reentrant lock under gevent: the C lock of the OS's threads, taken again by its
# holder, keeping native threads (gevent's pool's) apart; the proxy's log handler made with it.
NATIVE = """
from gevent import monkey; monkey.patch_all()
import io, logging, threading, time, gevent
from proxy.shell.runtime.background import native_rlock
from proxy.telemetry.request_log import LineHandler
lock = native_rlock()
print(type(lock).__module__, type(lock).__name__, type(threading.RLock()).__name__)
with lock:
    with lock:
        print("again", lock._is_owned())
order = []
def held():
    with lock:
        order.append("in")
        time.sleep(0.1)  # (a native thread: the OS's sleep)
        order.append("out")
def other():
    time.sleep(0.02)
    with lock:
        order.append("other")
pool = gevent.get_hub().threadpool
done = [pool.spawn(held), pool.spawn(other)]
gevent.joinall(done)
print(",".join(order))
handler = LineHandler(io.StringIO())
handler.lock = native_rlock()
handler.write_line("one line", lambda: None)
print(repr(handler.stream.getvalue()))
"""


def test_a_native_rlock_under_gevent_is_the_os_threads_reentrant_lock():
    out = subprocess.run([sys.executable, "-c", NATIVE], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout.split("\n")
    assert out[:4] == ["_thread RLock _RLock", "again True", "in,out,other", "'one line\\n'"]
