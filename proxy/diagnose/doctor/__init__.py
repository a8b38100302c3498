"""`python app.py doctor`: probe a live vLLM and say how to set up the proxy in front of it.

Two small tool turns (a `get_weather` tool and a prompt that needs it) are built by the
proxy's own planner, exactly as the proxy would send them upstream:

* `auto`: with `upstream_tool_parser: true` (the client's `tool_choice: "auto"` as is). A 400
  naming `--enable-auto-tool-choice` means the server runs without a tool parser; parsed
  `tool_calls` mean it runs with one.
* `none`: with `upstream_tool_parser: false` (`tool_choice: "none"`, `skip_special_tokens:
  false`): the model writes its call as text, which names its format.

Each answer then goes through the proxy's normaliser, to say whether the proxy recovers the
call. `diagnose` turns the two probes into findings and a recommended configuration; it is
pure, so the rules are tested without a server.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import orjson

from ...base.config import mask_url
from ...shell.config_load import ConfigError, load_config
from ...telemetry.request_log import printable
from .live import run_doctor
from .probe import DoctorError
from .render import failure_line, render

EXIT_OK = 0
EXIT_UNREACHABLE = 1
EXIT_USAGE = 2


def _positive(kind: type[int] | type[float]) -> Any:
    """An argparse type: a number of `kind` greater than 0 (else a usage error, exit 2)."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:  # also refuses nan
            raise argparse.ArgumentTypeError(f"must be greater than 0, not {text}")
        return value
    return parse


def main(argv: Sequence[str]) -> int:
    """`python app.py doctor [--upstream URL] [--model M] [--json]`: 0 when the server was
    probed, 1 when it could not be (unreachable, a probe failed, the proxy itself), 2 for a
    bad command line or config."""
    parser = argparse.ArgumentParser(
        prog="app.py doctor",
        description="Probe a live vLLM (or any OpenAI-compatible server): is its tool parser "
                    "on, which format does the model write its calls in, does the proxy "
                    "recover them, and which settings to use.",
        epilog="doctor --score [--fronts [LIST]] [--max-requests N] [--concurrency N]: "
               "measure instead: the built-in suite of tool turns asked straight and "
               "through the proxy, buffered and streamed, and scored (docs/score.md; "
               "app.py doctor --score --help).")
    parser.add_argument("--upstream", help="base URL of the server (default: the proxy's "
                                           "configured upstream, http://127.0.0.1:8000)")
    parser.add_argument("--model", help="model to probe (default: the first one listed)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--config", help="the proxy's JSON config file (for upstream and "
                                         "upstream_api_key)")
    parser.add_argument("--api-key", help="bearer key for the server (default: the config's "
                                          "upstream_api_key)")
    parser.add_argument("--max-tokens", type=_positive(int), default=512,
                        help="max_tokens of each probe (default 512)")
    parser.add_argument("--timeout", type=_positive(float), default=120.0,
                        help="seconds to wait for each probe's answer (default 120)")
    args = parser.parse_args(list(argv))
    try:
        flags = [*(["--config", args.config] if args.config else []),
                 *(["--upstream", args.upstream] if args.upstream else [])]
        config = load_config(flags)
    except ConfigError as exc:
        print(printable(f"toolcall-proxy doctor: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    api_key = config.upstream_api_key if args.api_key is None else args.api_key
    # Replicas of one model: each is probed, in turn (the worst outcome is the exit status).
    # With --json, several reports are printed one per line.
    urls = config.replicas()
    return max(_doctor_one(url, args, api_key, len(urls) > 1) for url in urls)


def _doctor_one(url: str, args: argparse.Namespace, api_key: str, lines: bool) -> int:
    """Probe one server and print its report: the exit status for it."""
    try:
        report = run_doctor(url, args.model, api_key=api_key,
                            max_tokens=args.max_tokens, timeout=args.timeout)
    except DoctorError as exc:
        if args.json:
            print(printable(orjson.dumps({"upstream": mask_url(url), "error": str(exc)}).decode()))
        print(printable(f"toolcall-proxy doctor: {exc}"), file=sys.stderr)
        return EXIT_UNREACHABLE
    if args.json:
        print(printable(orjson.dumps(report, option=0 if lines else orjson.OPT_INDENT_2).decode()))
    else:  # what the server sent (model names, errors, text) may hold control sequences
        sys.stdout.write(printable(render(report)))
    for failed in report["failed"]:
        print(printable(f"toolcall-proxy doctor: probe {failed['probe']}: "
                        f"{failure_line(failed)}"), file=sys.stderr)
    return EXIT_UNREACHABLE if report["failed"] else EXIT_OK
