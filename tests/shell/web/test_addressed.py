"""Whether a request is addressed to the proxy (`proxy.shell.web.addressed`): the Host names
and addresses it answers to, and the origins whose pages may send to it, without a server."""

from __future__ import annotations

import ipaddress

import pytest

from proxy.shell.config_load import ConfigError, build_config, load_config
from proxy.shell.web.addressed import Addressing, is_preflight, listed, preflight


def _addressing(hosts=(), origins=(), bound="127.0.0.1", own=()) -> Addressing:
    mine = {ipaddress.ip_address(a) for a in own}
    return Addressing(tuple(hosts), tuple(origins), bound, ("gpubox", "gpubox.local"),
                      own_address=lambda ip: ip in mine)


@pytest.mark.parametrize("host", [
    "", "127.0.0.1", "127.0.0.1:8003", "127.8.9.1", "[::1]", "[::1]:11434", "localhost",
    "LocalHost:80", "localhost.", "app.localhost", "gpubox", "gpubox.local:11434",
    "192.168.1.10", "10.0.0.5:8003", "172.16.0.1", "100.64.0.7", "[fd00::2]:8003",
    "[fe80::1%eth0]:8003", "0.0.0.0",
])
def test_loopback_this_machine_and_addresses_that_are_not_public_are_answered(host):
    assert _addressing().host_allowed(host)


@pytest.mark.parametrize("host", [
    "attacker.example", "attacker.example:8003", "localhost.attacker.example",
    "gpubox.attacker.example", "127.0.0.1.nip.io", "x", "evil.local", "8.8.8.8",
    "[2001:4860:4860::8888]", "::1", "a b", "user@localhost", "localhost/x", "2130706433",
    "[127.0.0.1]",
])
def test_any_other_name_or_a_public_address_not_this_machines_is_refused(host):
    assert not _addressing().host_allowed(host)


def test_a_public_address_of_this_machine_or_the_bound_one_is_answered():
    addressing = _addressing(bound="203.0.113.9", own=["198.51.100.4"])
    assert addressing.host_allowed("198.51.100.4:8003")  # an interface's
    assert addressing.host_allowed("203.0.113.9")  # the bound address
    assert addressing.host_allowed("8.8.4.4", local_address="8.8.4.4")  # the one reached
    assert not addressing.host_allowed("8.8.4.4")


def test_listed_names_exact_or_under_a_suffix_and_the_bound_name():
    addressing = _addressing(["gpubox.lan", "*.home.arpa"], bound="proxy.internal")
    for host in ("gpubox.lan", "GPUBOX.LAN.", "gpubox.lan:11434", "ha.home.arpa",
                 "a.b.home.arpa", "proxy.internal:8003"):
        assert addressing.host_allowed(host), host
    for host in ("home.arpa", "xhome.arpa", "gpubox.lan.attacker.example", "evil.lan"):
        assert not addressing.host_allowed(host), host
    assert _addressing(["*"]).host_allowed("anything.example")


def test_the_proxys_own_pages_and_listed_origins_may_send():
    addressing = _addressing(origins=["http://ui.lan:3000", "http://localhost:*"])
    assert addressing.origin_allowed("http://127.0.0.1:8003", "127.0.0.1:8003")
    assert addressing.origin_allowed("https://gpubox:8443", "gpubox:8443")  # behind TLS
    assert addressing.origin_allowed("HTTP://UI.LAN:3000", "127.0.0.1:8003")
    assert addressing.origin_allowed("http://localhost:5173", "127.0.0.1:8003")
    for origin in ("http://127.0.0.1:3000", "http://ui.lan:3001", "null", "",
                   "http://localhost.attacker.example", "file://", "ws://127.0.0.1:8003",
                   "http://attacker.example"):
        assert not addressing.origin_allowed(origin, "127.0.0.1:8003"), origin
    assert not addressing.origin_allowed("http://127.0.0.1:8003", "")  # no Host to match
    # Desktop apps' and extensions' own pages: no web page can send their origins.
    for origin in ("vscode-file://vscode-app", "tauri://localhost", "app://chatbox",
                   "chrome-extension://jfgfiigpkhlkbnfnbobbkinehhfdhndo"):
        assert addressing.origin_allowed(origin, "127.0.0.1:8003"), origin
    for origin in ("file://", "vscode-file.attacker.example", "http://vscode-file://x"):
        assert not addressing.origin_allowed(origin, "127.0.0.1:8003"), origin
    assert listed("null", ["null"])
    assert listed("http://anything", ["*"])


def test_the_refusal_names_what_to_set_and_looks_at_the_host_first():
    addressing = _addressing()
    host = addressing.refusal({"Host": "attacker.example", "Origin": "http://attacker.example"})
    assert host is not None
    assert (host.status, host.code) == (403, "host_not_allowed")
    assert "allowed_hosts" in host.message
    origin = addressing.refusal({"Host": "localhost", "Origin": "http://attacker.example"})
    assert origin is not None
    assert (origin.status, origin.code) == (403, "origin_not_allowed")
    assert "allowed_origins" in origin.message
    assert addressing.refusal({"Host": "localhost"}) is None
    long = addressing.refusal({"Host": "a" * 5000})
    assert long is not None
    assert len(long.message) < 300


def test_a_preflight_is_answered_with_the_cors_headers_and_one_without_origin_is_not():
    headers = {"Origin": "http://ui.lan", "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "authorization"}
    assert is_preflight("OPTIONS", headers)
    assert not is_preflight("OPTIONS", {"Origin": "http://ui.lan"})
    answer = preflight(headers)
    assert isinstance(answer, dict)
    assert answer["Access-Control-Allow-Origin"] == "http://ui.lan"
    assert answer["Access-Control-Allow-Headers"] == "authorization"
    refused = preflight({"Access-Control-Request-Method": "POST"})
    assert not isinstance(refused, dict)
    assert refused.code == "origin_not_allowed"


# -- the settings ---------------------------------------------------------------------------


def test_ollama_api_keys_unset_empty_or_listed_from_file_env_and_flag():
    assert build_config({}).ollama_api_keys is None
    assert build_config({"ollama_api_keys": []}).ollama_api_keys == ()
    assert build_config({"ollama_api_keys": None}).ollama_api_keys is None
    env = "TOOLCALL_PROXY_OLLAMA_API_KEYS"
    assert build_config({}, {env: ""}).ollama_api_keys == ()
    assert build_config({}, {env: "sk-a, sk-b"}).ollama_api_keys == ("sk-a", "sk-b")
    assert build_config({}, {env: '["sk-a"]'}).ollama_api_keys == ("sk-a",)
    assert build_config({}, {env: "null"}).ollama_api_keys is None
    assert load_config(["--ollama-api-keys", ""], {}).ollama_api_keys == ()
    assert load_config(["--ollama-api-keys", "sk-h"], {env: "x"}).ollama_api_keys == ("sk-h",)
    with pytest.raises(ConfigError, match="'ollama_api_keys' must not hold an empty key"):
        build_config({"ollama_api_keys": ["sk-a", " "]})
    with pytest.raises(ConfigError, match="cannot be set per model"):
        build_config({"models": {"*": {"ollama_api_keys": []}}})


def test_each_port_takes_its_own_keys():
    config = build_config({"api_keys": ["sk-main"], "ollama_port": 11434,
                           "ollama_api_keys": []})
    assert config.port_keys(8003) == ("sk-main",)
    assert config.port_keys(11434) == ()
    assert config.port_keys(None) == ("sk-main",)
    same = build_config({"api_keys": ["sk-main"], "ollama_port": 11434})
    assert same.port_keys(11434) == ("sk-main",)
    assert build_config({"api_keys": ["k"], "ollama_port": 11434}).summary()[
        "ollama_api_keys"] is None
    assert config.summary()["ollama_api_keys"] == 0  # counted, never shown


def test_allowed_origins_is_read_under_its_former_name_too():
    assert build_config({"cors_allow_origins": ["http://a"]}).allowed_origins == ("http://a",)
    assert build_config({}, {"TOOLCALL_PROXY_CORS_ALLOW_ORIGINS": "http://b"}).allowed_origins \
        == ("http://b",)
    assert build_config({}, {"TOOLCALL_PROXY_ALLOWED_HOSTS": "gpubox.lan,proxy"}
                        ).allowed_hosts == ("gpubox.lan", "proxy")
    with pytest.raises(ConfigError, match="'allowed_hosts' must not hold an empty entry"):
        build_config({"allowed_hosts": [""]})
