"""Settings: defaults < file < environment < flags, and clear refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.base.config import Config, mask_url
from proxy.shell.config_load import ConfigError, build_config, load_config
from tests.docs_pages import README, page, table, tables

ROOT = Path(__file__).resolve().parents[2]


def test_defaults():
    config = load_config([], {})
    assert (config.host, config.port, config.upstream) == ("127.0.0.1", 8003,
                                                           "http://127.0.0.1:8000")
    assert config.loop_guard_max_tool_calls == 500


def test_precedence_file_env_flags(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"port": 9001, "host": "0.0.0.0", "upstream": "http://file:1",
                                "heartbeat_seconds": 2}))
    env = {"TOOLCALL_PROXY_CONFIG": str(path), "TOOLCALL_PROXY_PORT": "9002",
           "TOOLCALL_PROXY_UPSTREAM": "http://env:2"}
    config = load_config(["--upstream", "http://flag:3"], env)
    assert config.host == "0.0.0.0"  # file
    assert config.heartbeat_seconds == 2.0  # file
    assert config.port == 9002  # env beats file
    assert config.upstream == "http://flag:3"  # flag beats env
    assert load_config(["--port", "9003", "--config", str(path)], {}).port == 9003


def test_env_values_are_typed():
    config = load_config([], {"TOOLCALL_PROXY_LOG_FORMAT": "text",
                              "TOOLCALL_PROXY_FORMATS": "hermes,qwen_xml",
                              "TOOLCALL_PROXY_LOOP_GUARD_MAX_TOOL_CALLS": "7"})
    assert config.log_format == "text"
    assert config.formats == ("hermes", "qwen_xml")
    assert config.loop_guard_max_tool_calls == 7


@pytest.mark.parametrize(("values", "fragment"), [
    ({"prot": 1}, "unknown key 'prot'"),
    ({"port": "8003"}, "'port' must be an integer"),
    ({"port": 70000}, "between 1 and 65535"),
    ({"upstream": "localhost:8000"}, "http:// or https://"),
    ({"heartbeat_mode": "loud"}, "must be one of"),
    ({"formats": "hermes, 1"}, "unknown tool-call format"),
    ({"upstream": "http://gpu:8000/v1"}, "'http://gpu:8000', not 'http://gpu:8000/v1'"),
    ({"models": {"x*": {"upstream": "http://gpu:8001/v1/"}}}, "without /v1"),
    ({"api_keys": [""]}, "empty key"),
])
def test_bad_values_are_refused(values, fragment):
    with pytest.raises(ConfigError, match=fragment):
        build_config(values)


def test_example_config_lists_every_key_with_its_default():
    example = json.loads((ROOT / "config.example.json").read_text())
    example = {k: v for k, v in example.items() if not k.startswith("_")}
    defaults = Config().as_dict()
    assert set(example) == set(defaults)
    assert build_config(example).as_dict() == defaults


def _documented() -> dict[str, list[str]]:
    """docs/configuration.md's rows, by key: [default, per model, meaning]."""
    rows = tables(page("configuration.md"), "| key | default | per model | meaning |")
    keys = [row[0].strip("`") for row in rows]
    assert len(keys) == len(set(keys)), "a key with two rows"
    return {key: row[1:] for key, row in zip(keys, rows, strict=True)}


def _value(cell: str) -> object:
    """A default as the page writes it: JSON in a code span, or a bare string."""
    text = cell.strip("`")
    try:
        return json.loads(text)
    except ValueError:
        return text


def test_the_configuration_page_has_a_row_for_every_key_and_no_other():
    assert sorted(_documented()) == sorted(Config().as_dict())


@pytest.mark.parametrize("key", sorted(Config().as_dict()))
def test_the_configuration_page_gives_each_key_its_default(key):
    default, _, meaning = _documented()[key]
    assert _value(default) == json.loads(json.dumps(Config().as_dict()[key]))
    assert meaning


def test_the_readme_settings_are_keys_with_their_defaults():
    rows = table(README.read_text(encoding="utf-8"), "| key | default | what |")
    documented = _documented()
    assert rows
    assert [(row[0], row[1]) for row in rows] == [
        (row[0], documented[row[0].strip("`")][0]) for row in rows]


@pytest.mark.parametrize("key", sorted(Config().as_dict()))
def test_the_configuration_page_says_which_keys_can_be_set_per_model(key):
    """The *per model* cell is what loading a `models` entry that sets the key does."""
    setting = {"models": {"*": {key: Config().as_dict()[key]}}}
    if _documented()[key][1] == "yes":
        build_config(setting)
    else:
        with pytest.raises(ConfigError, match="cannot be set per model"):
            build_config(setting)


@pytest.mark.parametrize(("content", "fragment"), [
    ('{"unknown_key": 1}', "unknown key 'unknown_key'"),
    ('{"port": "x"}', "'port' must be an integer"),
    ("{not json", "not valid JSON"),
    (None, "cannot read config file"),
])
def test_cli_refuses_bad_config_with_one_line_and_exit_2(tmp_path, content, fragment):
    path = tmp_path / "config.json"
    if content is not None:
        path.write_text(content)
    result = subprocess.run([sys.executable, "app.py", "--config", str(path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert fragment in lines[0]


def test_help_names_the_other_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_config(["--help"], {})
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "app.py doctor" in out
    assert "app.py replay" in out


def test_summary_shows_no_credentials_in_urls_or_per_model_keys():
    config = build_config({
        "upstream": "http://alice:S3CRET@gpu:8000/v1base",
        "upstream_api_key": "sk-top",
        "api_keys": ["sk-client"],
        "models": {"big*": {"upstream": "https://bob:HUNTER2@big:443",
                            "upstream_api_key": "sk-per-model"},
                   "small*": {"upstream": "http://small:8001"}},
    })
    summary = config.summary()
    text = json.dumps(summary)
    for secret in ("alice", "S3CRET", "bob", "HUNTER2", "sk-top", "sk-client", "sk-per-model"):
        assert secret not in text, secret
    assert summary["upstream"] == "http://***@gpu:8000/v1base"
    assert summary["models"]["big*"] == {"upstream": "https://***@big:443",
                                         "upstream_api_key": True}
    assert summary["models"]["small*"] == {"upstream": "http://small:8001"}
    assert config.upstream == "http://alice:S3CRET@gpu:8000/v1base"  # the setting itself kept


@pytest.mark.parametrize(("url", "shown"), [
    ("http://alice:S3CRET@host:8000", "http://***@host:8000"),
    ("http://token@host", "http://***@host"),
    ("https://a:b@[::1]:9/p", "https://***@[::1]:9/p"),
    ("http://host:8000/x", "http://host:8000/x"),
])
def test_mask_url(url, shown):
    assert mask_url(url) == shown


@pytest.mark.parametrize(("value", "read"), [("auto", "auto"), ("true", "true"), (True, "true"),
                                             (False, "false")])
def test_thinking_opened_by_template_takes_its_choices_and_json_booleans(value, read):
    config = build_config({"models": {"deepseek*": {"thinking_opened_by_template": value}}})
    assert config.thinking_opened_by_template == "auto"
    assert config.for_model("deepseek-r1").thinking_opened_by_template == read


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_thinking_opened_by_template_refuses_anything_else_naming_the_key(value):
    with pytest.raises(ConfigError, match="thinking_opened_by_template"):
        build_config({"thinking_opened_by_template": value})


@pytest.mark.parametrize(("source", "expected"), [
    ({"file": {"upstream": ["http://a:1", "http://b:2"]}}, ("http://a:1", "http://b:2")),
    ({"env": "http://a:1, http://b:2"}, ("http://a:1", "http://b:2")),
    ({"env": '["http://a:1", "http://b:2"]'}, ("http://a:1", "http://b:2")),
    ({"env": "http://u:p,w@a:1,http://b:2"}, ("http://u:p,w@a:1", "http://b:2")),
    ({"file": {"upstream": ["http://a:1"]}}, "http://a:1"),  # a list of one is that URL
    ({"env": "http://a:1"}, "http://a:1"),
])
def test_upstream_replicas_from_file_or_environment(source, expected):
    env = {"TOOLCALL_PROXY_UPSTREAM": source["env"]} if "env" in source else {}
    config = build_config(source.get("file"), env)
    assert config.upstream == expected
    assert config.replicas() == (expected if isinstance(expected, tuple) else (expected,))


@pytest.mark.parametrize(("value", "fragment"), [
    ([], "a URL or a non-empty list of URLs"),
    (["http://a:1", "http://a:1"], "lists a replica twice"),
    (["http://a:1", "ftp://b"], "must be an http:// or https:// URL, not 'ftp://b'"),
    (["http://a:1", "http://b:2/v1"], "without /v1"),
    ([1], "a URL or a non-empty list of URLs"),
])
def test_bad_replica_lists_are_refused(value, fragment):
    with pytest.raises(ConfigError, match="upstream") as caught:
        build_config({"upstream": value})
    assert fragment in str(caught.value)
    with pytest.raises(ConfigError, match=r"\['q\*'\]"):
        build_config({"models": {"q*": {"upstream": value}}})


def test_replicas_per_model_are_listed_masked_and_reached_with_their_settings():
    config = build_config({"upstream": "http://main:1", "models": {
        "q*": {"upstream": ["http://u:secret@a:1", "http://b:2"], "upstream_api_key": "k"}}})
    assert config.upstreams() == ["http://main:1", "http://u:secret@a:1", "http://b:2"]
    assert config.for_model("qwen").replicas() == ("http://u:secret@a:1", "http://b:2")
    assert config.upstream_settings()["http://b:2"].upstream_api_key == "k"
    summary = json.dumps(config.summary())
    assert "secret" not in summary
    assert config.summary()["models"]["q*"]["upstream"] == ["http://***@a:1", "http://b:2"]


@pytest.mark.parametrize(("settings", "fragment"), [
    ({"upstream_routing": "random"}, "'upstream_routing' must be one of"),
    ({"upstream_load_factor": -0.1}, "'upstream_load_factor' must be between 0 and 100"),
    ({"upstream_down_seconds": 0}, "'upstream_down_seconds' must be greater than 0"),
])
def test_bad_routing_settings_are_refused(settings, fragment):
    with pytest.raises(ConfigError) as caught:
        build_config(settings)
    assert fragment in str(caught.value)
