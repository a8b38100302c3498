"""`make bench`: the proxy against a direct connection to a fake vLLM, side by side, one run.

What it does: starts the fake upstream (`bench.fake_upstream`) and the proxy the way users run
it (`gunicorn -c deploy/gunicorn.conf.py app:app -b 127.0.0.1:PORT`, with
`TOOLCALL_PROXY_UPSTREAM` pointing at the fake), both on free loopback ports; measures each
scenario against the proxy and against the fake directly, interleaved round by round (direct
then proxy, proxy then direct, ...) so that drift on a shared machine hits both sides alike;
prints one table (scenario, direct, proxy, ratio, target, result); stops everything it started,
also on Ctrl-C and on errors.

Why this shape: the numbers that matter are the proxy's cost relative to talking to vLLM
directly (the "20 ms" upstream stands in for generation; "0 ms" shows the pure overhead), its
CPU per request, and how many long-lived streams one small machine holds. Comparing within one
run on one machine makes the ratios meaningful where absolute times are not.

Scenarios (issue 8):

* buffered tool turn: the client streams, with tools; 1 KB / 64 KB / 1 MB answers; concurrency
  1 and 8; upstream 20 ms and 0 ms. Direct: the same request to the fake, which streams the
  same content (4 KB per chunk, no gaps) after the same delay. Proxy: the proxy asks upstream
  non-streaming, extracts the call and renders SSE. Each proxied answer is checked (the Hermes
  call arrives as `tool_calls[0]` named `read`).
* passthrough stream: no tools, 100 chunks 20 ms apart (and 0 ms): TTFB and inter-chunk gaps.
* passthrough JSON: no tools, not streamed, 1 KB.
* streamed mode (`bench/streamed.py`): a tool turn in `stream_mode: stream`, 100 content
  chunks 20 ms (and 5 ms) apart then a Hermes call: time to the first content token and the
  gaps between content events, against the fake streaming directly; CPU per streamed token.
* constrained re-asks (`bench/reask.py`): a model that never calls, or botches its call,
  unless constrained: the share of turns ending with the call without the re-ask and with
  it, what a recovery costs (one more round trip), and the upstream requests of an ordinary
  tool turn once the upstream's profile is learned.
* Responses store (`bench/store_backends.py`): a stored turn (`store: true`, continuing a kept
  answer) through a proxy on SQLite and one on Redis, interleaved: what Redis adds at p50.
* held streams: N concurrent 30 s streams with a chunk every 500 ms, searched upward; a level
  passes with no errors, TTFB p99 ≤ 1 s and gap p99 ≤ 750 ms; RSS of master + workers.
* held buffered turns: N concurrent tool turns whose upstream answers after 30 s; the client
  must see the role chunk within 1 s and a heartbeat at least every heartbeat + 1 s.
* server CPU per request: utime + stime of master + workers (/proc) over the proxy batches.
* Messages front: the buffered 1 KB tool turn (c8, 20 ms) as an Anthropic `/v1/messages`
  request to the proxy (client streams), against the same turn's chat request straight to the
  fake: latency and server CPU per turn beside the chat front's.
* upstream replicas (`bench/replicas.py`): 16 agent conversations × 20 turns of growing
  history over two fake replicas that model a prefix cache, routed cache-aware (affinity)
  and round robin: turn p50/p90 and the replicas' prefill work, as ratios.
* prefix cache across turns (`bench/prefix_cache.py`): the tokens two requests of Home
  Assistant (a minute apart; two satellites) and of Claude Code share as a prefix, without
  and with `stable_prefix`.
* extraction alone: `proxy.toolcalls.extract` on the fake's 1 MB answer and on 1 MB
  pathological inputs (`proxy.toolcalls.bench.cases`).

Run `python -m bench.run --help` for the flags (`--quick`, worker-class overrides, `--markdown`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import math
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from bench import load, prefix_cache, reask, replicas, store_backends, streamed
from bench import status as status_rows
from bench.fake_upstream import READY_MARKER, parse_size, raise_fd_limit

ROOT = Path(__file__).resolve().parent.parent
CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
SECTIONS = ("extract", "buffered", "stream", "json", "held", "heldbuf", "messages",
            "streamed", "reask", "status", "store", "replicas", "prefix")
MESSAGES_PATH = "/v1/messages"
# Issue 46's targets for the buffered tool turn at c8 behind a 20 ms upstream: p50 and p99
# as ratios to the direct connection, by answer size; and its server CPU per 1 KB turn.
BUFFERED_TARGETS = {"1k": (1.10, 1.30), "64k": (1.15, 1.40)}
TURN_CPU_TARGET = 0.0014  # seconds

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "read", "description": "Read a file from the workspace.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "offset": {"type": "integer"},
            "limit": {"type": "integer"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "write", "description": "Write a file.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"]}}},
    {"type": "function", "function": {
        "name": "exec", "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                       "required": ["command"]}}},
]
MESSAGES = [
    {"role": "system", "content": "You are a coding agent. Use the tools to inspect files."},
    {"role": "user", "content": "Open /srv/app/main.py and tell me what the parser does."},
]


def log(message: str) -> None:
    """Progress to stderr (stdout carries only the table)."""
    print(message, file=sys.stderr, flush=True)


def chat_body(spec: str, *, stream: bool, tools: bool) -> bytes:
    """A chat completion request whose model name carries the fake's knobs (`bench@spec`)."""
    body: dict[str, Any] = {"model": f"bench@{spec}", "messages": MESSAGES, "max_tokens": 512,
                            "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = TOOLS
    return orjson.dumps(body)


def responses_body(spec: str) -> bytes:
    """The same turn as a Responses request, as Codex sends it (streamed, `store: false`)."""
    tools = [{"type": "function", "name": t["function"]["name"],
              "description": t["function"]["description"],
              "parameters": t["function"]["parameters"], "strict": False} for t in TOOLS]
    return orjson.dumps({
        "model": f"bench@{spec}", "instructions": MESSAGES[0]["content"],
        "input": [{"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": MESSAGES[1]["content"]}]}],
        "tools": tools, "max_output_tokens": 512, "stream": True, "store": False})


def messages_body(spec: str) -> bytes:
    """`chat_body`'s tool turn as an Anthropic Messages request (the client streams)."""
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in TOOLS]
    return orjson.dumps({"model": f"bench@{spec}", "system": MESSAGES[0]["content"],
                         "messages": MESSAGES[1:], "max_tokens": 512, "stream": True,
                         "tools": tools})


# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------
def free_port() -> int:
    """A loopback port free right now (bind to 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass
class Proc:
    """A child process we started (in its own session, so its whole group can be stopped)."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        """The child's pid (for gunicorn: the master)."""
        return self.popen.pid

    def alive(self) -> bool:
        """Still running?"""
        return self.popen.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, wait up to `grace` s, then SIGKILL the process group."""
        if not self.alive():
            return
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=5)

    def log_tail(self, lines: int = 15) -> str:
        """The end of its log (for error messages)."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


class Stack:
    """The fake upstream and the proxy: started on free loopback ports, always stopped."""

    boot_seconds = 30.0  # for the proxy to answer its health check

    def __init__(self, opts: argparse.Namespace) -> None:
        self.opts = opts
        self.tmp = Path(tempfile.mkdtemp(prefix="toolcall-bench-"))
        self.fake: Proc | None = None
        self.proxy: Proc | None = None
        self.fake_url = ""
        self.proxy_url = ""
        self.worker_desc = ""

    def start_fake(self) -> None:
        """Start `bench.fake_upstream` on a free port and wait for its ready line."""
        log_path = self.tmp / "fake_upstream.log"
        with open(log_path, "wb") as err:
            popen = subprocess.Popen(
                [sys.executable, "-m", "bench.fake_upstream", "--port", "0"], cwd=ROOT,
                stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        self.fake = Proc("fake upstream", popen, log_path)
        assert popen.stdout is not None
        os.set_blocking(popen.stdout.fileno(), False)
        deadline = time.monotonic() + 15
        seen = b""
        while time.monotonic() < deadline and popen.poll() is None:
            with contextlib.suppress(BlockingIOError, TypeError):
                seen += popen.stdout.read() or b""
            if b"\n" in seen:
                break
            time.sleep(0.05)
        line = seen.decode(errors="replace").strip()
        if not line.startswith(READY_MARKER):
            raise RuntimeError(f"fake upstream did not start: {line!r}\n{self.fake.log_tail()}")
        self.fake_url = line.split()[1]
        log(f"fake upstream: {self.fake_url} (pid {popen.pid})")

    def gunicorn_cmd(self, port: int) -> list[str]:
        """The command users run, plus this run's bind, control socket and overrides."""
        exe = Path(sys.executable).parent / "gunicorn"
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "gunicorn"]
        conf = ROOT / self.opts.conf
        if conf.exists():
            cmd += ["-c", str(conf)]
        else:
            log(f"warning: {conf} not found: gunicorn runs with its defaults")
        cmd += [self.opts.app, "-b", f"127.0.0.1:{port}",
                "--control-socket", str(self.tmp / "gunicorn.ctl")]
        if self.opts.worker_class:
            cmd += ["-k", self.opts.worker_class]
        if self.opts.workers:
            cmd += ["-w", str(self.opts.workers)]
        if self.opts.threads:
            cmd += ["--threads", str(self.opts.threads)]
        if self.opts.worker_connections:
            cmd += ["--worker-connections", str(self.opts.worker_connections)]
        return cmd

    def start_proxy(self) -> None:
        """Start gunicorn on a free port and wait until `/proxy/health` answers."""
        port = free_port()
        env = dict(os.environ)
        env["TOOLCALL_PROXY_UPSTREAM"] = self.fake_url
        # the bench models of the streamed mode's and the re-asks' rows (bench/streamed.py,
        # bench/reask.py)
        name, streamed_models = streamed.MODELS_ENV
        env.setdefault(name, orjson.dumps({**orjson.loads(streamed_models),
                                           **reask.MODELS}).decode())
        env["PROMETHEUS_MULTIPROC_DIR"] = str(self.tmp / "prometheus")
        env.setdefault("PYTHONUNBUFFERED", "1")
        log_path = self.tmp / "gunicorn.log"
        cmd = self.gunicorn_cmd(port)
        with open(log_path, "wb") as out:
            popen = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=out,
                                     start_new_session=True)
        self.proxy = Proc("proxy", popen, log_path)
        self.proxy_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.boot_seconds
        while time.monotonic() < deadline:
            if not self.proxy.alive():
                raise RuntimeError(f"gunicorn exited:\n{self.proxy.log_tail()}")
            result = asyncio.run(load.simple(self.proxy_url + "/proxy/health", timeout=2))
            if result.error is None and result.status in (200, 503, 404):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"gunicorn did not answer in {self.boot_seconds:.0f} s:\n"
                               f"{self.proxy.log_tail()}")
        time.sleep(0.5)  # let every worker boot, not just the first
        self.worker_desc = self._describe_workers()
        log(f"proxy: {self.proxy_url} (master pid {popen.pid}; {self.worker_desc})")
        log(f"  command: {' '.join(cmd)}")

    def _describe_workers(self) -> str:
        text = self.proxy.log_tail(200) if self.proxy else ""
        kind = "?"
        for line in text.splitlines():
            if "Using worker:" in line:
                kind = line.rsplit("Using worker:", 1)[1].strip()
        workers = len(load.descendants(self.proxy.pid)) - 1 if self.proxy else 0
        extra = ""
        if self.opts.threads:
            extra += f", threads {self.opts.threads}"
        if self.opts.worker_connections:
            extra += f", worker_connections {self.opts.worker_connections}"
        return f"worker class {kind}, {workers} workers{extra}"

    def log_problems(self) -> list[str]:
        """Lines of the gunicorn log that report trouble (timeouts, tracebacks, errors)."""
        if self.proxy is None:
            return []
        try:
            text = self.proxy.log_path.read_text(errors="replace")
        except OSError:
            return []
        marks = ("Traceback", "WORKER TIMEOUT", "[CRITICAL]", "[ERROR]", "Worker exiting")
        return [line for line in text.splitlines() if any(m in line for m in marks)]

    def stop(self) -> None:
        """Stop the proxy, then the fake; remove the temporary directory."""
        for proc in (self.proxy, self.fake):
            if proc is not None:
                proc.stop()
        if self.opts.keep_logs:
            log(f"logs kept in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Rows of the table
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Row:
    """One line of the table."""

    scenario: str
    direct: str
    proxy: str
    ratio: str = "—"
    target: str = "—"
    result: str = ""


def ms(seconds: float) -> str:
    """Seconds as a short millisecond figure."""
    if seconds is None or math.isnan(seconds):
        return "n/a"
    value = seconds * 1000
    return f"{value:.0f} ms" if value >= 100 else f"{value:.2f} ms" if value < 10 \
        else f"{value:.1f} ms"


def ratio_of(direct: float, proxy: float) -> float:
    """proxy / direct (NaN when undefined)."""
    if direct is None or proxy is None or math.isnan(direct) or math.isnan(proxy) or direct <= 0:
        return math.nan
    return proxy / direct


def ratio_row(scenario: str, direct: float, proxy: float, limit: float | None = None) -> Row:
    """A latency row: both sides in ms, the ratio, and pass/fail against `limit`×."""
    r = ratio_of(direct, proxy)
    row = Row(scenario, ms(direct), ms(proxy), "n/a" if math.isnan(r) else f"{r:.2f}×")
    if limit is not None:
        row.target = f"≤ {limit:.2f}×"
        row.result = "n/a" if math.isnan(r) else ("pass" if r <= limit else "FAIL")
    return row


@dataclasses.dataclass
class Side:
    """Accumulated batches of one side (direct or proxy) of a scenario."""

    batch: load.Batch | None = None
    server_cpu: float = 0.0  # seconds of the measured server tree

    def add(self, batch: load.Batch, cpu: float) -> None:
        """Merge one round."""
        if self.batch is None:
            self.batch = batch
        else:
            self.batch.extend(batch)
        self.server_cpu += cpu

    def stats(self) -> dict[str, float]:
        """`load.summarize` of all rounds."""
        assert self.batch is not None
        return load.summarize(self.batch)

    def cpu_per_request(self) -> float:
        """Server CPU seconds per successful request."""
        if self.batch is None:
            return math.nan
        n = sum(1 for r in self.batch.results if r.ok)
        return self.server_cpu / n if n else math.nan


# ---------------------------------------------------------------------------------------------
# The benchmark
# ---------------------------------------------------------------------------------------------
class Bench:
    """Runs the sections and collects rows, details and notes."""

    def __init__(self, opts: argparse.Namespace, stack: Stack) -> None:
        self.opts = opts
        self.stack = stack
        self.rows: list[Row] = []
        self.details: list[str] = []
        self.notes: list[str] = []
        q = opts.quick
        self.rounds = opts.rounds or (1 if q else 3)
        self.batch_s = opts.batch_seconds or (0.4 if q else 1.0)
        self.held_s = opts.held_seconds or (6 if q else 30)
        self.cpu_rows: list[Row] = []
        self.turn_cpu: float | None = None  # server CPU per buffered 1 KB turn, when measured

    # -- plumbing ---------------------------------------------------------------------------
    def section(self, title: str) -> None:
        """A sub-heading row."""
        self.rows.append(Row(f"**{title}**", "", "", "", "", ""))

    def detail(self, label: str, side: str, batch: load.Batch, cpu_per_req: float) -> None:
        """One line of the detail table (and of the progress log)."""
        s = load.summarize(batch)
        line = (f"| {label} | {side} | {s['n']:.0f} | {s['errors']:.0f} | {s['rps']:.1f} | "
                f"{ms(s['ttfb_p50'])} | {ms(s['ttfb_p99'])} | {ms(s['total_p50'])} | "
                f"{ms(s['total_p99'])} | {ms(s['gap_p50'])} | {ms(s['gap_p99'])} | "
                f"{ms(cpu_per_req)} | {s['client_cpu_share'] * 100:.0f}% |")
        self.details.append(line)
        if side == "direct" and s["client_cpu_share"] > 0.9:
            self.notes.append(f"{label}: the load generator used {s['client_cpu_share']:.0%} of "
                              "a core on the direct side: the direct figure is client-bound")
        errors = load.first_errors(batch)
        log(f"  {label} [{side}] n={s['n']:.0f} err={s['errors']:.0f} rps={s['rps']:.0f} "
            f"ttfb={ms(s['ttfb_p50'])}/{ms(s['ttfb_p99'])} "
            f"total={ms(s['total_p50'])}/{ms(s['total_p99'])} "
            f"gap={ms(s['gap_p50'])}/{ms(s['gap_p99'])} cpu/req={ms(cpu_per_req)} "
            f"client={s['client_cpu_share'] * 100:.0f}%" + (f" {errors}" if errors else ""))

    def server_cpu(self, side: str) -> float:
        """CPU seconds so far of the process tree that serves `side`."""
        proc = self.stack.proxy if side == "proxy" else self.stack.fake
        return load.cpu_seconds(proc.pid) if proc is not None else 0.0

    def url(self, side: str) -> str:
        """The chat completions URL of one side."""
        return (self.stack.proxy_url if side == "proxy" else self.stack.fake_url) + CHAT

    async def compare(self, label: str, body: bytes, *, concurrency: int, duration: float,
                      min_requests: int = 30, timeout: float = 60.0, stagger: float = 0.0,
                      max_requests: int = 1_000_000,
                      proxy_request: tuple[str, bytes] | None = None) -> tuple[Side, Side]:
        """Interleaved rounds of direct and proxy batches of the same request (or, with
        `proxy_request`, of another front's path and body to the proxy)."""
        sides = {"direct": Side(), "proxy": Side()}
        urls = {side: self.url(side) for side in sides}
        bodies = {side: body for side in sides}
        if proxy_request is not None:
            urls["proxy"] = self.stack.proxy_url + proxy_request[0]
            bodies["proxy"] = proxy_request[1]
        raw = {side: load.build_request("POST", urls[side], bodies[side]) for side in sides}
        for side in sides:  # warm-up: connections, the fake's caches, the workers' imports
            await load.closed_loop(urls[side], lambda _i, s=side: raw[s],
                                   concurrency=concurrency,
                                   duration=min(0.3, duration), max_duration=10,
                                   timeout=timeout)
        for rnd in range(self.rounds):
            order = ("direct", "proxy") if rnd % 2 == 0 else ("proxy", "direct")
            for side in order:
                cpu0 = self.server_cpu(side)
                batch = await load.closed_loop(
                    urls[side], lambda _i, s=side: raw[s], concurrency=concurrency,
                    duration=duration, min_requests=max(1, min_requests // self.rounds),
                    max_duration=max(duration * 4, 3.0), timeout=timeout, stagger=stagger,
                    max_requests=max_requests)
                sides[side].add(batch, self.server_cpu(side) - cpu0)
        for side, acc in sides.items():
            assert acc.batch is not None
            self.detail(label, side, acc.batch, acc.cpu_per_request())
        return sides["direct"], sides["proxy"]

    async def check_buffered(self, body: bytes) -> str:
        """'' when the proxy turns the fake's Hermes text into a `read` tool call, else why."""
        result = await load.simple(self.url("proxy"), "POST", body, timeout=60)
        if not result.ok or result.body is None:
            return f"request failed: {result.failure()}"
        try:
            message = load.assemble(result.body)
        except (orjson.JSONDecodeError, ValueError) as exc:
            return f"unparseable stream: {exc}"
        calls = message["tool_calls"]
        if not calls or calls[0]["name"] != "read" or message["finish_reason"] != "tool_calls":
            return (f"no extracted call (finish {message['finish_reason']}, "
                    f"{len(calls)} calls, errors {message['errors']})")
        return ""

    # -- sections ---------------------------------------------------------------------------
    async def buffered(self) -> None:
        """Buffered tool turns: sizes × concurrency × upstream delay."""
        self.section("buffered tool turn (client streams, tools; total latency)")
        sizes = [x.strip() for x in self.opts.buffered_sizes.split(",") if x.strip()]
        delays = [int(x) for x in self.opts.buffered_delays.split(",") if x.strip()]
        cpu_rows: list[Row] = []
        for delay in delays:
            for size in sizes:
                chunks = max(1, min(256, parse_size(size) // 4096))
                spec = f"delay_ms={delay},size={size},kind=tool,chunks={chunks},gap_ms=0"
                body = chat_body(spec, stream=True, tools=True)
                problem = await self.check_buffered(body)
                if problem:
                    self.notes.append(f"buffered {size} {delay} ms: proxy answer check: {problem}")
                for conc in (1, 8):
                    label = f"buffered {size.upper()}B c{conc} {delay}ms"
                    direct, proxy = await self.compare(label, body, concurrency=conc,
                                                       duration=self.batch_s)
                    d, p = direct.stats(), proxy.stats()
                    p50_limit, p99_limit = (BUFFERED_TARGETS.get(size, (1.15, 1.5))
                                            if conc == 8 and delay == 20 else (None, None))
                    self.rows.append(ratio_row(f"{label} p50", d["total_p50"], p["total_p50"],
                                               p50_limit))
                    self.rows.append(ratio_row(f"{label} p99", d["total_p99"], p["total_p99"],
                                               p99_limit))
                    if conc == 8:
                        self.rows.append(ratio_row(f"{label} p99.9", d["total_p999"],
                                                   p["total_p999"]))
                    self._error_rows(label, direct, proxy)
                    if conc == 8 and size == "1k":
                        self.rows.append(Row(f"{label} requests/s", f"{d['rps']:.0f}",
                                             f"{p['rps']:.0f}",
                                             f"{ratio_of(d['rps'], p['rps']):.2f}×"))
                        target = f"≤ {ms(TURN_CPU_TARGET)}" if delay == 20 else "—"
                        cpu = proxy.cpu_per_request()
                        if delay == 20:
                            self.turn_cpu = cpu  # beside it, what recording the turn costs
                        cpu_rows.append(Row(
                            f"server CPU per buffered 1KB turn (c8, {delay} ms)",
                            f"{ms(direct.cpu_per_request())} (fake)", ms(cpu), "—", target,
                            ("pass" if cpu <= TURN_CPU_TARGET else "FAIL") if delay == 20
                            else ""))
        self.cpu_rows.extend(cpu_rows)
        if 20 in delays:
            await self.responses_turn()

    async def responses_turn(self) -> None:
        """The Responses front's buffered turn (what Codex sends: streamed, store false),
        against the same chat turn sent to the fake directly: the CPU per turn beside the
        chat front's."""
        spec = "delay_ms=20,size=1k,kind=tool,chunks=1,gap_ms=0"
        direct_body = chat_body(spec, stream=True, tools=True)
        body = responses_body(spec)
        problem = await self.check_responses(body)
        if problem:
            self.notes.append(f"responses 1k 20 ms: proxy answer check: {problem}")
        label = "responses 1KB c8 20ms"
        direct, proxy = await self.compare(label, direct_body, concurrency=8,
                                           duration=self.batch_s,
                                           proxy_request=(RESPONSES, body))
        d, p = direct.stats(), proxy.stats()
        self.rows.append(ratio_row(f"{label} p50 (direct: the chat turn)", d["total_p50"],
                                   p["total_p50"]))
        self._error_rows(label, direct, proxy)
        self.cpu_rows.append(Row("server CPU per buffered 1KB turn, Responses front (c8, 20 ms)",
                                 f"{ms(direct.cpu_per_request())} (fake)",
                                 ms(proxy.cpu_per_request())))

    async def check_responses(self, body: bytes) -> str:
        """'' when the Responses front turns the fake's Hermes text into a `read` call."""
        result = await load.simple(self.stack.proxy_url + RESPONSES, "POST", body, timeout=60)
        if not result.ok or result.body is None:
            return f"request failed: {result.failure()}"
        events = [e for e in load.sse_events(result.body) if isinstance(e, dict)]
        final = events[-1].get("response") if events else None
        calls = [item.get("name") for item in (final or {}).get("output", [])
                 if item.get("type") == "function_call"]
        if not events or events[-1].get("type") != "response.completed" or calls[:1] != ["read"]:
            return f"no extracted call (last event {events[-1].get('type') if events else None})"
        return ""

    async def messages(self) -> None:
        """The Messages front: the buffered 1 KB tool turn (c8, 20 ms) as /v1/messages."""
        self.section("Messages front (Anthropic /v1/messages, client streams, tools)")
        spec = "delay_ms=20,size=1k,kind=tool,chunks=1,gap_ms=0"
        body = messages_body(spec)
        result = await load.simple(self.stack.proxy_url + MESSAGES_PATH, "POST", body,
                                   timeout=60)
        events = load.sse_events(result.body or b"") if result.ok else []
        if not any(isinstance(e, dict) and e.get("content_block", {}).get("name") == "read"
                   for e in events):
            self.notes.append(f"messages 1k: proxy answer check: no tool_use `read` "
                              f"({result.failure() if not result.ok else events[-1:]})")
        label = "messages 1KB c8 20ms"
        direct, proxy = await self.compare(label, chat_body(spec, stream=True, tools=True),
                                           concurrency=8, duration=self.batch_s,
                                           proxy_request=(MESSAGES_PATH, body))
        d, p = direct.stats(), proxy.stats()
        self.rows.append(ratio_row(f"{label} p50", d["total_p50"], p["total_p50"], 1.15))
        self.rows.append(ratio_row(f"{label} p99", d["total_p99"], p["total_p99"], 1.5))
        self._error_rows(label, direct, proxy)
        self.rows.append(Row(f"{label} requests/s", f"{d['rps']:.0f}", f"{p['rps']:.0f}",
                             f"{ratio_of(d['rps'], p['rps']):.2f}×"))
        cpu = proxy.cpu_per_request()
        self.cpu_rows.append(Row("server CPU per buffered 1KB turn, Messages front (c8, 20 ms)",
                                 f"{ms(direct.cpu_per_request())} (fake)", ms(cpu), "—",
                                 "≤ 4 ms", "pass" if cpu <= 0.004 else "FAIL"))

    def _error_rows(self, label: str, direct: Side, proxy: Side) -> None:
        for name, side in (("direct", direct), ("proxy", proxy)):
            assert side.batch is not None
            errors = load.first_errors(side.batch)
            if errors:
                self.rows.append(Row(f"{label} errors ({name})", "", "; ".join(errors),
                                     "", "0", "FAIL"))

    async def stream(self) -> None:
        """Passthrough streams: TTFB and the gaps between chunks."""
        self.section("passthrough stream (no tools, 100 chunks)")
        conc = 4 if self.opts.quick else 16
        for delay, gap in ((20, 20), (0, 0)):
            spec = f"delay_ms={delay},size=4k,kind=text,chunks=100,gap_ms={gap}"
            body = chat_body(spec, stream=True, tools=False)
            label = f"stream {delay}ms/{gap}ms gaps c{conc}"
            if gap:  # one 2 s stream per connection, starts spread over 2 s (no bursts)
                direct, proxy = await self.compare(label, body, concurrency=conc,
                                                   duration=0.1, min_requests=0,
                                                   stagger=2.0 / conc, max_requests=conc)
            else:
                direct, proxy = await self.compare(label, body, concurrency=conc,
                                                   duration=self.batch_s)
            d, p = direct.stats(), proxy.stats()
            timed = delay == 20
            self.rows.append(ratio_row(f"{label} TTFB p50", d["ttfb_p50"], p["ttfb_p50"],
                                       1.15 if timed else None))
            self.rows.append(ratio_row(f"{label} TTFB p99", d["ttfb_p99"], p["ttfb_p99"]))
            if timed:
                self.rows.append(ratio_row(f"{label} gap p50", d["gap_p50"], p["gap_p50"]))
                self.rows.append(ratio_row(f"{label} gap p99", d["gap_p99"], p["gap_p99"],
                                           1.10))
            self.rows.append(ratio_row(f"{label} total p50", d["total_p50"], p["total_p50"]))
            self._error_rows(label, direct, proxy)
            if timed:
                self.cpu_rows.append(Row("server CPU per passthrough stream (100 chunks)",
                                         f"{ms(direct.cpu_per_request())} (fake)",
                                         ms(proxy.cpu_per_request())))

    async def json(self) -> None:
        """Passthrough JSON (no tools, not streamed)."""
        self.section("passthrough JSON (no tools, 1 KB)")
        for delay, conc in ((20, 1), (20, 8), (0, 8)):
            body = chat_body(f"delay_ms={delay},size=1k,kind=text", stream=False, tools=False)
            label = f"json 1KB c{conc} {delay}ms"
            direct, proxy = await self.compare(label, body, concurrency=conc,
                                               duration=self.batch_s)
            d, p = direct.stats(), proxy.stats()
            self.rows.append(ratio_row(f"{label} p50", d["total_p50"], p["total_p50"]))
            self.rows.append(ratio_row(f"{label} p99", d["total_p99"], p["total_p99"]))
            self._error_rows(label, direct, proxy)
            if delay == 0:
                self.rows.append(Row(f"{label} requests/s", f"{d['rps']:.0f}",
                                     f"{p['rps']:.0f}",
                                     f"{ratio_of(d['rps'], p['rps']):.2f}×"))
                self.cpu_rows.append(Row("server CPU per passthrough JSON request (c8, 0 ms)",
                                         f"{ms(direct.cpu_per_request())} (fake)",
                                         ms(proxy.cpu_per_request())))

    async def held_level(self, side: str, streams: int, body: bytes, *, gap_limit: float,
                         ttfb_limit: float, stream_s: float,
                         validate: Callable[[load.Result], str] | None = None,
                         ) -> tuple[bool, dict[str, float], int, list[str]]:
        """One held-streams level: (passed, stats, peak RSS bytes, reasons it failed)."""
        proc = self.stack.proxy if side == "proxy" else self.stack.fake
        assert proc is not None
        peak = [load.rss_bytes(proc.pid)]

        def sample() -> None:
            peak[0] = max(peak[0], load.rss_bytes(proc.pid))

        # New streams arrive at ≤ 300/s (over ≤ 10 s): every stream is open from the end of the
        # ramp to the end of the first stream; a faster ramp measures accept bursts instead.
        ramp = min(10.0, max(1.0, streams / 300))
        cpu0 = self.server_cpu(side)
        batch = await load.held(self.url(side), load.build_request("POST", self.url(side), body),
                                streams=streams, ramp=ramp, timeout=stream_s + ramp + 30,
                                keep_bodies=validate is not None, tick=sample, tick_every=2.0)
        cpu = self.server_cpu(side) - cpu0
        s = load.summarize(batch)
        reasons = load.first_errors(batch)
        if validate is not None:
            bad = [why for r in batch.results if r.ok and (why := validate(r))]
            if bad:
                reasons.append(f"{len(bad)}× {bad[0]}")
                s["errors"] += len(bad)
            for r in batch.results:
                r.body = None  # free the bodies
        if s["errors"]:
            pass
        elif s["ttfb_p99"] > ttfb_limit:
            reasons.append(f"TTFB p99 {ms(s['ttfb_p99'])} > {ms(ttfb_limit)}")
        elif s["gap_p99"] > gap_limit:
            reasons.append(f"gap p99 {ms(s['gap_p99'])} > {ms(gap_limit)}")
        ok = not s["errors"] and s["ttfb_p99"] <= ttfb_limit and s["gap_p99"] <= gap_limit
        n_ok = max(1, sum(1 for r in batch.results if r.ok))
        label = f"held {streams} ({'pass' if ok else 'fail'})"
        self.detail(label, side, batch, cpu / n_ok)
        log(f"    peak RSS {peak[0] / 2**20:.0f} MiB" + (f"; {reasons}" if reasons else ""))
        await self.settle()
        return ok, s, peak[0], reasons

    async def settle(self, limit: float = 60.0) -> None:
        """Wait (bounded) until the fake has no stream open: the last level has drained."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            result = await load.simple(self.stack.fake_url + "/fake/stats", timeout=5)
            if result.ok and result.body and orjson.loads(result.body)["open_streams"] == 0:
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)

    def held_levels(self, default: str) -> list[int]:
        """The upward search levels."""
        text = self.opts.held_levels or default
        return [int(x) for x in text.split(",") if x.strip()]

    async def held(self) -> None:
        """How many concurrent 30 s streams (a chunk every 500 ms) the deployment holds."""
        chunks = int(self.held_s / 0.5)
        self.section(f"held streams ({self.held_s:.0f} s, a chunk every 500 ms; no errors, "
                     "TTFB p99 ≤ 1 s, gap p99 ≤ 750 ms)")
        body = chat_body(f"delay_ms=20,size=2k,kind=text,chunks={chunks},gap_ms=500",
                         stream=True, tools=False)
        levels = self.held_levels("100,300" if self.opts.quick else "1000,2000,3000,4000")
        top = max(levels)
        limits = {"gap_limit": 0.75, "ttfb_limit": 1.0, "stream_s": self.held_s}
        d_ok, d_stats, d_rss, d_why = await self.held_level("direct", top, body, **limits)
        held_direct = top if d_ok else 0
        if not d_ok:
            self.notes.append(f"direct held {top} failed ({d_why}): the load generator or the "
                              "fake is the limit at this level")
        best: tuple[int, dict[str, float], int] | None = None
        failed: tuple[int, list[str]] | None = None
        tried = sorted(levels)
        for level in tried:  # upward until the first failure
            ok, stats, rss, why = await self.held_level("proxy", level, body, **limits)
            if not ok:
                failed = (level, why)
                break
            best = (level, stats, rss)
        if best is None:  # not even the first level: look downward (bounded)
            for level in sorted({max(1, tried[0] // d) for d in (2, 10, 100)}, reverse=True):
                if level >= tried[0]:
                    continue
                ok, stats, rss, why = await self.held_level("proxy", level, body, **limits)
                if ok:
                    best = (level, stats, rss)
                    break
                failed = (level, why)
        held_proxy = best[0] if best else 0
        row = Row("concurrent held streams", f"{held_direct} (of {top} tried)",
                  f"{held_proxy}", f"{ratio_of(held_direct, held_proxy):.2f}×"
                  if held_direct else "n/a", "≥ 2000", "pass" if held_proxy >= 2000 else "FAIL")
        if self.opts.quick:
            row.target, row.result = "≥ 2000 (full run)", "n/a"
        self.rows.append(row)
        if best is not None:
            level, stats, rss = best
            self.rows.append(ratio_row(f"held @{level}: TTFB p99", d_stats["ttfb_p99"],
                                       stats["ttfb_p99"]))
            self.rows.append(ratio_row(f"held @{level}: gap p99", d_stats["gap_p99"],
                                       stats["gap_p99"]))
            self.rows.append(Row(f"held @{level}: RSS master+workers",
                                 f"{d_rss / 2**20:.0f} MiB (fake @{top})",
                                 f"{rss / 2**20:.0f} MiB"))
        if failed is not None:
            self.rows.append(Row(f"held @{failed[0]}: why it failed", "", "; ".join(failed[1])))

    async def heldbuf(self) -> None:
        """Buffered tool turns whose upstream answers after 30 s: held with heartbeats."""
        hb = self.opts.heartbeat_seconds
        wait_s = self.held_s
        self.section(f"held buffered turns (upstream answers after {wait_s:.0f} s; no errors, "
                     f"role chunk ≤ 1 s, heartbeat gap p99 ≤ {hb + 1:.0f} s)")
        body = chat_body(f"delay_ms={wait_s * 1000:.0f},size=1k,kind=tool", stream=True,
                         tools=True)

        def validate(result: load.Result) -> str:
            if result.body is None:
                return "no body"
            message = load.assemble(result.body)
            calls = message["tool_calls"]
            if not calls or calls[0]["name"] != "read":
                return f"no tool call (finish {message['finish_reason']})"
            return ""

        text = self.opts.heldbuf_levels or ("100" if self.opts.quick else "1000,2000")
        levels = [int(x) for x in text.split(",") if x.strip()]
        best: tuple[int, dict[str, float], int] | None = None
        failed: tuple[int, list[str]] | None = None
        for level in levels:
            ok, stats, rss, why = await self.held_level(
                "proxy", level, body, gap_limit=hb + 1.0, ttfb_limit=1.0,
                stream_s=wait_s, validate=validate)
            if not ok:
                failed = (level, why)
                break
            best = (level, stats, rss)
        held = best[0] if best else 0
        self.rows.append(Row("concurrent held buffered turns", "n/a", str(held), "—",
                             "≥ 1000" if not self.opts.quick else "≥ 1000 (full run)",
                             ("pass" if held >= 1000 else "FAIL") if not self.opts.quick
                             else "n/a"))
        if best is not None:
            level, stats, rss = best
            self.rows.append(Row(f"held buffered @{level}: role chunk p99 / heartbeat gap p99",
                                 "n/a", f"{ms(stats['ttfb_p99'])} / {ms(stats['gap_p99'])}"))
            self.rows.append(Row(f"held buffered @{level}: RSS master+workers", "n/a",
                                 f"{rss / 2**20:.0f} MiB"))
        if failed is not None:
            self.rows.append(Row(f"held buffered @{failed[0]}: why it failed", "",
                                 "; ".join(failed[1])))

    def extract(self) -> None:
        """`proxy.toolcalls.extract` alone: the fake's 1 MB answer and pathological inputs."""
        self.section("extraction alone (proxy.toolcalls.extract, 1 MB inputs)")
        try:
            from proxy.toolcalls import extract
        except Exception as exc:  # the proxy is optional for the rest of the benchmark
            self.rows.append(Row("extraction", "", f"skipped: {exc!r}"))
            return
        tools = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
        repeat = 1 if self.opts.quick else 5
        content = orjson.loads(_fake_completion(parse_size("1m")))["choices"][0]["message"][
            "content"]
        timings = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = extract(content, tools)
            timings.append(time.perf_counter() - t0)
        calls = getattr(out, "calls", None)
        self.rows.append(_limit_row("extract: fake vLLM 1 MB answer (Hermes call after prose)",
                                    statistics.median(timings), 0.020,
                                    "" if calls else " (no call found!)"))
        try:
            from proxy.toolcalls import bench as engine_bench
        except Exception as exc:
            self.rows.append(Row("extract: pathological inputs", "", f"skipped: {exc!r}"))
            return
        t0 = time.perf_counter()
        timings_by_case = engine_bench.measure(1 << 20, tools=tools, repeat=repeat)
        spent = time.perf_counter() - t0
        realistic = {t.label: t.median for t in timings_by_case}.get("realistic")
        if realistic is not None:
            self.rows.append(_limit_row("extract: 1 MB realistic (prose, code, 2 calls)",
                                        realistic / 1000, 0.020))
        worst = [(t.label, t.median) for t in timings_by_case if t.label != "realistic"][:3]
        for label, t in worst:
            self.rows.append(_limit_row(f"extract: 1 MB case {label}", t / 1000, 0.020))
        n = len(timings_by_case)
        self.notes.append(f"extraction: {n} inputs of 1 MB from proxy.toolcalls.bench.cases "
                          f"({spent:.1f} s: pathological text and single 1 MB calls); the "
                          f"table shows the 3 slowest; median of {repeat} runs each")

    # -- the whole run ----------------------------------------------------------------------
    async def run_async(self, sections: list[str]) -> None:
        """The network sections, in an order that leaves the heavy ones last."""
        if "buffered" in sections:
            await self.buffered()
        if "stream" in sections:
            await self.stream()
        if "json" in sections:
            await self.json()
        if "messages" in sections:
            await self.messages()
        if "streamed" in sections:
            await streamed.section(self, TOOLS, MESSAGES)
        if "reask" in sections:
            await reask.section(self, TOOLS, MESSAGES)
        if "store" in sections:
            await store_backends.section(self)
        if "replicas" in sections:
            await replicas.section(self, TOOLS)
        if self.cpu_rows:
            self.section("server CPU per request (utime+stime of master+workers)")
            self.rows.extend(self.cpu_rows)
        if "held" in sections:
            await self.held()
        if "heldbuf" in sections:
            await self.heldbuf()


def _limit_row(scenario: str, seconds: float, limit: float, suffix: str = "") -> Row:
    return Row(scenario, "—", ms(seconds) + suffix, "—", f"< {limit * 1000:.0f} ms",
               "pass" if seconds < limit and not suffix else "FAIL")


def _fake_completion(size: int) -> bytes:
    from bench.fake_upstream import FakeConfig, completion_body

    return completion_body(FakeConfig(size=size, kind="tool"), "bench")


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------
HEADER = ("scenario", "direct", "proxy", "ratio", "target", "result")


def table_text(rows: list[Row]) -> str:
    """The table as aligned text."""
    cells = [HEADER] + [(r.scenario.strip("*"), r.direct, r.proxy, r.ratio, r.target, r.result)
                        for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    lines = []
    for i, c in enumerate(cells):
        if i > 0 and rows[i - 1].scenario.startswith("**"):
            lines.append("")
            lines.append(c[0])
            continue
        lines.append("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def table_markdown(rows: list[Row]) -> str:
    """The table as GitHub markdown."""
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows:
        out.append(f"| {r.scenario} | {r.direct} | {r.proxy} | {r.ratio} | {r.target} | "
                   f"{r.result} |")
    return "\n".join(out)


def machine() -> dict[str, str]:
    """Where the numbers come from."""
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    commit = "?"
    dirty = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                cwd=ROOT, capture_output=True, text=True, timeout=10).stdout
        dirty = " (with uncommitted changes)" if status.strip() else ""
    gunicorn = "?"
    with contextlib.suppress(ImportError):
        import gunicorn as _g

        gunicorn = _g.__version__
    return {"commit": commit + dirty, "cpus": str(os.cpu_count()), "cpu": cpu,
            "python": platform.python_version(), "gunicorn": gunicorn,
            "kernel": platform.release(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


DETAIL_HEADER = ("| scenario | side | n | errors | req/s | TTFB p50 | TTFB p99 | total p50 | "
                 "total p99 | gap p50 | gap p99 | server CPU/req | client CPU |\n"
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
START, END = "<!-- bench.run:start -->", "<!-- bench.run:end -->"


def write_markdown(path: Path, bench: Bench, argv: list[str], elapsed: float) -> None:
    """Write (or replace, between its markers) this run's section of RESULTS.md."""
    m = machine()
    parts = [
        START,
        "## Latest run",
        "",
        f"- command: `python -m bench.run {' '.join(argv)}`".replace(" `", " `", 1),
        f"- commit: `{m['commit']}`; {m['date']}; total {elapsed:.0f} s",
        f"- machine: {m['cpus']} × {m['cpu']}; Linux {m['kernel']}; Python {m['python']}; "
        f"gunicorn {m['gunicorn']}",
        f"- proxy: {bench.stack.worker_desc}",
        "- ratios are proxy ÷ direct (the same request straight to the fake vLLM), measured "
        "interleaved in the same run; p50/p99 from the client side",
        "",
        table_markdown(bench.rows),
        "",
    ]
    if bench.notes:
        parts += ["Notes:", ""] + [f"- {n}" for n in bench.notes] + [""]
    parts += ["<details><summary>Every batch</summary>", "", DETAIL_HEADER, *bench.details, "",
              "</details>", END]
    section = "\n".join(parts)
    old = path.read_text() if path.exists() else ""
    if START in old and END in old:
        before, rest = old.split(START, 1)
        after = rest.split(END, 1)[1]
        text = before + section + after
    else:
        text = (old.rstrip() + "\n\n" if old.strip() else
                "# Benchmark results\n\nRerun with `make bench` (about 8 minutes; "
                "`make bench ARGS=--quick` for a smoke run). See `bench/run.py`.\n\n") + \
            section + "\n"
    path.write_text(text)
    log(f"wrote {path}")


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------
def parse_args(argv: list[str]) -> argparse.Namespace:
    """The flags."""
    p = argparse.ArgumentParser(prog="python -m bench.run", description=(
        "Benchmark the proxy against a direct connection to a fake vLLM (loopback only)."))
    p.add_argument("--quick", action="store_true",
                   help="small counts and 6 s held streams: a smoke run of about a minute")
    p.add_argument("--only", default="", help=f"comma list of sections: {','.join(SECTIONS)}")
    p.add_argument("--worker-class", default="", help="gunicorn -k override (sync, gthread, "
                   "gevent)")
    p.add_argument("--workers", type=int, default=0, help="gunicorn -w override")
    p.add_argument("--threads", type=int, default=0, help="gunicorn --threads override")
    p.add_argument("--worker-connections", type=int, default=0,
                   help="gunicorn --worker-connections override")
    p.add_argument("--markdown", nargs="?", const="bench/RESULTS.md", default=None,
                   metavar="PATH", help="also write the table to PATH (default bench/RESULTS.md)")
    p.add_argument("--held-levels", default="",
                   help="held-stream levels to search upward (default 1000,2000,3000,4000)")
    p.add_argument("--heldbuf-levels", default="",
                   help="held buffered-turn levels (default 1000,2000)")
    p.add_argument("--held-seconds", type=float, default=0.0,
                   help="length of a held stream / upstream wait (default 30)")
    p.add_argument("--heartbeat-seconds", type=float, default=5.0,
                   help="the proxy's heartbeat period, for the held-buffered criterion")
    p.add_argument("--buffered-sizes", default="1k,64k,1m", help="buffered-turn answer sizes")
    p.add_argument("--buffered-delays", default="20,0", help="buffered-turn upstream delays (ms)")
    p.add_argument("--rounds", type=int, default=0, help="interleaved rounds per scenario")
    p.add_argument("--batch-seconds", type=float, default=0.0, help="seconds per batch")
    p.add_argument("--conf", default="deploy/gunicorn.conf.py", help="gunicorn config file")
    p.add_argument("--app", default="app:app", help="WSGI app for gunicorn")
    p.add_argument("--keep-logs", action="store_true", help="keep the temporary log directory")
    return p.parse_args(argv)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C, so the `finally` that stops the servers always runs."""

    def handler(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """Start, measure, print, stop."""
    args_list = sys.argv[1:] if argv is None else argv
    opts = parse_args(args_list)
    sections = [s.strip() for s in opts.only.split(",") if s.strip()] or list(SECTIONS)
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        log(f"unknown sections: {sorted(unknown)}; choose from {SECTIONS}")
        return 2
    limit = raise_fd_limit()
    log(f"open-files limit {limit}")
    started = time.monotonic()
    stack = Stack(opts)
    bench = Bench(opts, stack)
    with terminate_as_interrupt():
        try:
            if "extract" in sections:
                bench.extract()
            network = [s for s in sections if s not in ("extract", "status", "prefix")]
            if network:
                stack.start_fake()
                stack.start_proxy()
                asyncio.run(bench.run_async(network))
                problems = stack.log_problems()
                if problems:
                    bench.notes.append(f"gunicorn log: {len(problems)} problem lines, e.g. "
                                       f"`{problems[0][:160]}`")
            if "status" in sections:
                status_rows.section(bench, Row)
            if "prefix" in sections:
                prefix_cache.section(bench, Row)
        except KeyboardInterrupt:
            log("interrupted: stopping what was started")
            stack.stop()
            return 130
        except Exception as exc:  # one line that says what failed, and an exit status
            if stack.proxy is not None:
                log(stack.proxy.log_tail())
            stack.stop()
            log(f"bench failed: {type(exc).__name__}: {exc}".splitlines()[0])
            return 1
        stack.stop()
    elapsed = time.monotonic() - started
    print(table_text(bench.rows))
    for note in bench.notes:
        print(f"note: {note}")
    print(f"\n{stack.worker_desc}; {elapsed:.0f} s")
    if opts.markdown:
        write_markdown(ROOT / opts.markdown, bench, args_list, elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
