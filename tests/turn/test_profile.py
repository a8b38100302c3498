"""An upstream's profile read from its info endpoints' answers (`turn.constrained.profile`).
No server: the answers are shaped as each server's source writes them."""

from __future__ import annotations

import pytest

from proxy.turn.constrained.dialects import wrappers
from proxy.turn.constrained.profile import (
    Probes,
    UpstreamProfile,
    kind_hint,
    learn,
    refreshed,
    version_tuple,
)

MODEL = "Qwen/Qwen3-8B"
VLLM_MODELS = {"object": "list", "data": [
    {"id": MODEL, "object": "model", "owned_by": "vllm", "root": MODEL, "parent": None,
     "max_model_len": 40960, "permission": []}]}


def test_vllm_is_known_by_its_version_and_its_window_by_max_model_len():
    probes = Probes(models=VLLM_MODELS, version={"version": "0.33.0"},
                    rendered="<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    profile = learn(probes, MODEL, wrappers(), now=100.0)
    assert (profile.kind, profile.version, profile.context_length) == ("vllm", "0.33.0", 40960)
    assert profile.thinking_opened is False
    assert profile.learned_at == 100.0


def test_a_generation_prompt_that_opens_thinking_is_seen():
    rendered = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"
    profile = learn(Probes(version={"version": "0.33.0"}, rendered=rendered), MODEL,
                    wrappers(), now=0.0)
    assert profile.thinking_opened is True


def test_llama_cpp_is_known_by_its_props_and_its_template_s_call_wrapper():
    template = ("{%- if tools %}For each function call, return a json object within "
                "<tool_call></tool_call> XML tags{%- endif %}")
    props = {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1,
             "chat_template": template, "build_info": "b6812-2b6b55a5"}
    profile = learn(Probes(props=props), MODEL, wrappers(), now=0.0)
    assert (profile.kind, profile.context_length, profile.call_wrapper) == (
        "llama.cpp", 8192, "hermes")
    assert version_tuple(profile.version) == (6812, 0, 0)


def test_sglang_answers_its_server_info_beside_a_version():
    probes = Probes(version={"version": "0.5.4"},
                    server_info={"version": "0.5.4", "context_length": 32768, "tp_size": 1})
    profile = learn(probes, MODEL, wrappers(), now=0.0)
    assert (profile.kind, profile.version, profile.context_length) == ("sglang", "0.5.4", 32768)


@pytest.mark.parametrize(("probes", "kind"), [
    (Probes(ollama={"version": "0.12.3"}), "ollama"),
    (Probes(models={"data": [{"id": MODEL}]}), "openai-compatible"),
    (Probes(version="not an object", props=["x"]), "openai-compatible"),
])
def test_other_servers_and_odd_answers(probes, kind):
    profile = learn(probes, MODEL, wrappers(), now=0.0)
    assert profile.kind == kind
    assert profile.thinking_opened is None  # nothing rendered: not known


def test_refusals_survive_a_refresh_of_the_same_server_only():
    old = UpstreamProfile(kind="vllm", version="0.33.0", template="ab12").refusing(
        "response_format", until=600.0)
    same = refreshed(old, UpstreamProfile(kind="vllm", version="0.33.0", template="ab12",
                                          learned_at=9.0))
    assert same.refused == {"response_format"}
    assert same.learned_at == 9.0
    upgraded = refreshed(old, UpstreamProfile(kind="vllm", version="0.34.0", template="ab12"))
    assert upgraded.refused == frozenset()
    retemplated = refreshed(old, UpstreamProfile(kind="vllm", version="0.33.0",
                                                 template="cd34"))
    assert retemplated.refused == frozenset()  # restarted with another template


def test_a_profile_round_trips_through_its_record_and_refuses_a_foreign_one():
    profile = UpstreamProfile(kind="llama.cpp", version="b1", context_length=4096,
                              call_wrapper="hermes", thinking_opened=True,
                              refusals=(("grammar", 600.0),), learned_at=5.0,
                              template="0123456789abcdef")
    assert UpstreamProfile.from_record(profile.record()) == profile
    assert UpstreamProfile.from_record({"kind": "vllm"}) is None
    assert UpstreamProfile.from_record({**profile.record(), "kind": "evil"}) is None


def test_a_profile_goes_stale_after_its_ttl():
    profile = UpstreamProfile(learned_at=1000.0)
    assert not profile.stale(1000.0 + 10, ttl=60)
    assert profile.stale(1000.0 + 60, ttl=60)


@pytest.mark.parametrize(("owner", "kind"), [("vllm", "vllm"), ("sglang", "sglang"),
                                             ("llamacpp", "llama.cpp"), ("library", None),
                                             (None, None)])
def test_the_model_list_s_owner_names_the_server_worth_asking(owner, kind):
    models = {"data": [{"id": MODEL, "owned_by": owner}]}
    assert kind_hint(models, MODEL) == kind
