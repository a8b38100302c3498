"""`python app.py doctor --score`: measure a live upstream with the built-in suite, straight
and through the proxy, and print the difference.

Each turn of the suite (`suite`) is asked as a plain OpenAI client asks it, once of the
upstream itself and once of the proxy's own app in this process (its front, its turn, its
re-asks and rendering: what the server would answer), buffered and streamed, and through
each other front with `--fronts`. `checks` judges each answer, `report` sums the verdicts;
`run` is the only I/O. docs/score.md says how to read it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import orjson

from ...base.config import Config, mask_url
from ...shell.config_load import ConfigError, load_config
from ...shell.upstream.client import Timeouts, Upstream
from ...telemetry.request_log import printable
from ..doctor.live import list_models, proxy_health
from ..doctor.probe import DoctorError
from .fronts import CHAT, WAYS
from .jobs import MODES, STRAIGHT, Job
from .report import build, render
from .run import Runner
from .suite import SUITE

EXIT_OK = 0
EXIT_UNREACHABLE = 1
EXIT_USAGE = 2


class Progress:
    """A bar on `stream` while the score runs, when it is a terminal (else silent)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.shown or not total:
            return
        filled = 30 * done // total
        self.stream.write(f"\rscoring [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
        if done == total:
            self.stream.write("\r" + " " * 60 + "\r")
        self.stream.flush()


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {text}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, not {text}")
    return value


def _fronts(text: str) -> list[str]:
    """`all`, or front names separated by commas (chat is always asked)."""
    names = list(WAYS) if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in WAYS]
    if unknown:
        raise argparse.ArgumentTypeError(f"no front {', '.join(unknown)} (the fronts: "
                                         f"{', '.join(WAYS)}, or all)")
    return names


def parser() -> argparse.ArgumentParser:
    """The command line of `doctor --score`."""
    parser = argparse.ArgumentParser(
        prog="app.py doctor --score",
        description="Ask a live server the built-in tool-calling suite, straight and "
                    "through the proxy, buffered and streamed, and score both.")
    parser.add_argument("--score", action="store_true", help="run the score (this command)")
    parser.add_argument("--upstream", help="base URL of the server (default: the config's)")
    parser.add_argument("--model", help="model to score (default: the first one listed)")
    parser.add_argument("--config", help="the proxy's JSON config file: the settings scored "
                                         "through the proxy, and upstream_api_key")
    parser.add_argument("--api-key", help="bearer key for the server (default: the config's "
                                          "upstream_api_key; never printed)")
    parser.add_argument("--fronts", nargs="?", const="all", default="chat", type=_fronts,
                        help="through these fronts of the proxy too (comma-separated, or "
                             "all; default: chat only)")
    parser.add_argument("--max-requests", type=_count, default=1000,
                        help="the most upstream requests the score makes (default 1000); "
                             "asks beyond it are left out and counted")
    parser.add_argument("--concurrency", type=_count, default=4,
                        help="turns under way at once (default 4)")
    parser.add_argument("--max-tokens", type=_count, default=1024,
                        help="max_tokens of each turn (default 1024)")
    parser.add_argument("--timeout", type=_seconds, default=300.0,
                        help="seconds to wait for each answer (default 300)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def jobs(fronts: Sequence[str]) -> list[Job]:
    """Every ask of a run: each turn, each mode, straight then through each front."""
    ways = [CHAT, *(WAYS[name] for name in fronts if name != CHAT.name)]
    return [Job(turn, mode, way) for turn in SUITE for mode in MODES
            for way in (None, *ways)]


def main(argv: Sequence[str]) -> int:
    """0 when the suite ran (whatever it scored), 1 when the server could not be asked,
    2 for a bad command line or config."""
    args = parser().parse_args(list(argv))
    try:
        flags = [*(["--config", args.config] if args.config else []),
                 *(["--upstream", args.upstream] if args.upstream else [])]
        config = load_config(flags)
    except ConfigError as exc:
        print(printable(f"toolcall-proxy doctor --score: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    api_key = config.upstream_api_key if args.api_key is None else args.api_key
    url = config.replicas()[0]
    try:
        report = score(url, args, config, api_key)
    except DoctorError as exc:
        if args.json:
            print(printable(orjson.dumps({"upstream": mask_url(url), "error": str(exc)})
                            .decode()))
        print(printable(f"toolcall-proxy doctor --score: {exc}"), file=sys.stderr)
        return EXIT_UNREACHABLE
    if args.json:
        print(printable(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()))
    else:  # what the server sent (model names, errors, text) may hold control sequences
        sys.stdout.write(printable(render(report)))
    return EXIT_OK


def score(url: str, args: argparse.Namespace, config: Config, api_key: str) -> dict[str, Any]:
    """Run the suite against `url` and build the report (DoctorError: it cannot be asked)."""
    upstream = Upstream(url, pool_size=1)
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if proxy_health(upstream, headers, Timeouts(5.0, 30.0)) is not None:
        raise DoctorError(f"{mask_url(upstream.base)} is a Tool Call Proxy: score the server "
                          "behind it (--upstream), the proxy is run in-process")
    models = list_models(upstream, headers, Timeouts(5.0, 30.0))
    if not models:
        raise DoctorError(f"{mask_url(upstream.base)}/v1/models lists no model")
    model = args.model or models[0]
    if model not in models:
        raise DoctorError(f"model {model!r} is not served by {mask_url(upstream.base)}; it "
                          f"serves: {', '.join(models)}")
    asks = jobs(args.fronts)
    runner = Runner(url, model, config, api_key,
                    max_tokens=args.max_tokens, timeout=args.timeout,
                    concurrency=args.concurrency, max_requests=args.max_requests)
    started = time.monotonic()
    asked = runner.run(asks, Progress(sys.stderr))
    ways = [STRAIGHT, *dict.fromkeys(job.path for job in asks if job.way is not None)]
    return build(asked, upstream=mask_url(url), model=model, profile=runner.profile(),
                 ways=ways, seconds=time.monotonic() - started, max_requests=args.max_requests)
