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
  pathological inputs (`bench.extraction.cases`).

Run `python -m bench.run --help` for the flags (`--quick`, worker-class overrides, `--markdown`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import orjson

from bench import prefix_cache, reask, replicas, store_backends, streamed
from bench import status as status_rows
from bench.fake_upstream import raise_fd_limit
from bench.harness import MESSAGES, TOOLS, Bench
from bench.stack import ROOT, Stack, log, terminate_as_interrupt
from bench.table import Row, table_markdown, table_text

SECTIONS = ("extract", "buffered", "stream", "json", "held", "heldbuf", "messages",
            "streamed", "reask", "status", "store", "replicas", "prefix")


def models_env() -> dict[str, str]:
    """The bench models of the streamed mode's and the re-asks' rows (bench/streamed.py,
    bench/reask.py), as the proxy's environment sets them."""
    name, streamed_models = streamed.MODELS_ENV
    return {name: orjson.dumps({**orjson.loads(streamed_models), **reask.MODELS}).decode()}


    # -- the whole run ----------------------------------------------------------------------
async def run_sections(bench: Bench, sections: list[str]) -> None:
    """The network sections, in an order that leaves the heavy ones last."""
    if "buffered" in sections:
        await bench.buffered()
    if "stream" in sections:
        await bench.stream()
    if "json" in sections:
        await bench.json()
    if "messages" in sections:
        await bench.messages()
    if "streamed" in sections:
        await streamed.section(bench, TOOLS, MESSAGES)
    if "reask" in sections:
        await reask.section(bench, TOOLS, MESSAGES)
    if "store" in sections:
        await store_backends.section(bench)
    if "replicas" in sections:
        await replicas.section(bench, TOOLS)
    if bench.cpu_rows:
        bench.section("server CPU per request (utime+stime of master+workers)")
        bench.rows.extend(bench.cpu_rows)
    if "held" in sections:
        await bench.held()
    if "heldbuf" in sections:
        await bench.heldbuf()


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
    stack = Stack(opts, models_env())
    bench = Bench(opts, stack)
    with terminate_as_interrupt():
        try:
            if "extract" in sections:
                bench.extract()
            network = [s for s in sections if s not in ("extract", "status", "prefix")]
            if network:
                stack.start_fake()
                stack.start_proxy()
                asyncio.run(run_sections(bench, network))
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
