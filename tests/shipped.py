"""The shipped deployment files read as their own tools read them: the Dockerfile's
instructions, compose's `${VAR:-default}`, `nginx -t` of a site, the shipped nginx site
serving on a free port (shared by the container, compose, deploy and Redis store tests)."""

from __future__ import annotations

import contextlib
import re
import shlex
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.serving import ROOT, free_port

DEPLOY = ROOT / "deploy"


def dockerfile_instructions() -> list[tuple[str, str]]:
    """The Dockerfile as (INSTRUCTION, arguments), continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        word, _, rest = pending.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        pending = ""
    return out


def dockerfile_arguments(word: str) -> list[str]:
    """The arguments of each Dockerfile instruction `word`, in order."""
    return [rest for name, rest in dockerfile_instructions() if name == word]


def dockerfile_env() -> dict[str, str]:
    """The environment the Dockerfile's ENV lines set."""
    env: dict[str, str] = {}
    for rest in dockerfile_arguments("ENV"):
        for pair in shlex.split(rest):
            key, _, value = pair.partition("=")
            env[key] = value
    return env


def compose_default(value: str) -> str:
    """A compose value with each `${VAR:-default}` as its default."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def nginx_t(folder: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`nginx -t` of a main configuration (in `folder`) that includes `site`."""
    main = folder / "nginx.conf"
    main.write_text(f"pid {folder}/nginx.pid;\nerror_log {folder}/error.log;\n"
                    f"events {{}}\nhttp {{\n access_log off;\n include {site};\n}}\n")
    return subprocess.run(["nginx", "-t", "-p", str(folder), "-c", str(main)],
                          capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def shipped_nginx(tmp_path: Path, backend: str) -> Iterator[int]:
    """nginx serving the shipped site on a free loopback port, in front of `backend`
    (host:port); yields the port."""
    port = free_port()
    site = (DEPLOY / "nginx-toolcall-proxy.conf").read_text()
    site = site.replace("server 127.0.0.1:8004;", f"server {backend};")
    site = site.replace("listen 127.0.0.1:8003;", f"listen 127.0.0.1:{port};")
    (tmp_path / "site.conf").write_text(site)
    main = tmp_path / "nginx.conf"
    main.write_text(f"daemon off;\npid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\n"
                    f"events {{}}\nhttp {{\n access_log off;\n"
                    f" client_body_temp_path {tmp_path}/body;\n"
                    f" proxy_temp_path {tmp_path}/proxy;\n include {tmp_path}/site.conf;\n}}\n")
    nginx = subprocess.Popen(["nginx", "-p", str(tmp_path), "-c", str(main)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            time.sleep(0.05)
        yield port
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
