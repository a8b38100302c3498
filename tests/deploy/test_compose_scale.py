"""deploy/compose.scale.yaml, read as compose reads it (no Docker engine runs here): nginx in
front of several proxy instances that share one Redis store, before vLLM."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest
import yaml

from proxy.shell.config_load import build_config
from proxy.shell.store import open_store
from tests.shipped import DEPLOY, compose_default, dockerfile_env, nginx_t

SCALE = DEPLOY / "compose.scale.yaml"


def _services() -> dict:
    return yaml.safe_load(SCALE.read_text())["services"]


def _resolved(service: dict) -> dict:
    """A service with what it `extends` from another file under its own keys (one level)."""
    base = service.get("extends")
    if base is None:
        return service
    other = yaml.safe_load((DEPLOY / base["file"]).read_text())["services"][base["service"]]
    return {**other, **{k: v for k, v in service.items() if k != "extends"}}


def _seds() -> list[tuple[str, str]]:
    """The substitutions nginx's command makes in the shipped site."""
    script = _services()["nginx"]["command"][2]
    return re.findall(r"-e 's/([^/]+)/([^/]+)/'", script)


def test_nginx_proxies_redis_and_vllm_on_one_network():
    services = _services()
    assert set(services) == {"nginx", "proxy", "redis", "vllm"}
    networks = set.intersection(*(set(_resolved(s)["networks"]) for s in services.values()))
    assert networks
    assert networks <= set(yaml.safe_load(SCALE.read_text())["networks"])
    # vLLM is the one-box file's own service, not a copy
    assert services["vllm"]["extends"] == {"file": "compose.yaml", "service": "vllm"}
    assert "--enable-auto-tool-choice" in _resolved(services["vllm"])["command"]
    # only nginx is published, on loopback
    assert [name for name, s in services.items() if "ports" in s] == ["nginx"]
    assert services["nginx"]["ports"] == ["127.0.0.1:8003:8003"]


def test_every_instance_names_the_same_redis_store():
    proxy = _services()["proxy"]
    assert int(compose_default(proxy["deploy"]["replicas"])) >= 2
    env = proxy["environment"]
    url = env["TOOLCALL_PROXY_RESPONSES_STORE_URL"]
    assert re.fullmatch(r"redis://redis:6379/\d+", url)
    # The image sets a SQLite path; the file clears it, or the settings refuse both at once.
    assert "TOOLCALL_PROXY_RESPONSES_STORE_PATH" in dockerfile_env()
    assert env["TOOLCALL_PROXY_RESPONSES_STORE_PATH"] == ""
    config = build_config({"responses_store_url": url,
                           "responses_store_path": env["TOOLCALL_PROXY_RESPONSES_STORE_PATH"]})
    assert open_store(config).backend == "redis"
    assert re.fullmatch(r"\$\{TOOLCALL_PROXY_API_KEYS:\?.+\}", env["TOOLCALL_PROXY_API_KEYS"])
    command = [compose_default(part) for part in _resolved(_services()["vllm"])["command"]]
    assert env["TOOLCALL_PROXY_UPSTREAM"] == f"http://vllm:{command[command.index('--port') + 1]}"
    assert proxy["depends_on"]["redis"]["condition"] == "service_healthy"
    assert proxy["read_only"] is True
    assert "volumes" not in proxy  # no state of its own
    assert proxy["healthcheck"]["test"] == ["CMD", "python", "app.py", "healthcheck"]


def test_redis_keeps_its_data_and_never_evicts_what_the_caps_count():
    redis = _services()["redis"]
    assert re.fullmatch(r"redis:\d+(\.\d+)*", compose_default(redis["image"]))
    command = [compose_default(part) for part in redis["command"]]
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(volume.endswith(":/data") for volume in redis["volumes"])
    assert "redis-cli" in redis["healthcheck"]["test"]


def test_nginx_serves_the_shipped_site_pointed_at_every_instance():
    nginx = _services()["nginx"]
    (mount,) = nginx["volumes"]
    source, target, _ = mount.split(":")
    assert (DEPLOY / source).resolve() == DEPLOY / "nginx-toolcall-proxy.conf"
    assert target in nginx["command"][2]
    site = (DEPLOY / "nginx-toolcall-proxy.conf").read_text()
    seds = dict(_seds())
    assert seds == {"listen 127.0.0.1:8003;": "listen 8003;",
                    "server 127.0.0.1:8004;": "server proxy:8003;"}
    for before in seds:
        assert site.count(before) == 1, before  # each still matches the shipped site once


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed here")
def test_the_site_as_compose_makes_it_passes_nginx_t(tmp_path):
    """The command's own sed on the shipped site, then `nginx -t` (the instances' name
    standing for an address here, where no compose DNS answers)."""
    script = _services()["nginx"]["command"][2].split(" > ")[0]
    words = shlex.split(script)
    words[-1] = str(DEPLOY / "nginx-toolcall-proxy.conf")
    site = subprocess.run(words, capture_output=True, text=True, check=True).stdout
    assert "server proxy:8003;" in site
    (tmp_path / "site.conf").write_text(site.replace("server proxy:8003;",
                                                     "server 127.0.0.1:8003;"))
    result = nginx_t(tmp_path, tmp_path / "site.conf")
    assert result.returncode == 0, result.stderr
