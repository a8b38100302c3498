"""Upstream profiles as the shell learns them (`shell.upstream.profiles.Profiles`), against
the faithful fake vLLM: learned once from its info endpoints, kept in the store, re-read when
the upstream comes back (another version may answer), refusals remembered per version."""

from __future__ import annotations

import dataclasses
import time

import orjson
import pytest

from proxy.base.config import Config
from proxy.shell.store.interface import StoreLimits
from proxy.shell.store.sqlite import SqliteStore
from proxy.shell.upstream.client import Upstream
from proxy.shell.upstream.profiles import Profiles, credential, store_key
from proxy.shell.upstream.replicas import Replicas
from proxy.telemetry.metrics import Metrics
from proxy.turn.constrained.dialects import DIALECTS
from proxy.turn.constrained.profile import (
    RECHECK_SECONDS,
    REFUSAL_SECONDS,
    VERSION_CHARS,
    UpstreamProfile,
    refreshed,
)
from tests.fake_vllm import Answer, Received, vllm_completion, vllm_error
from tests.fakes.sglang import FakeSGLang
from tests.fakes.template import ChatTemplate
from tests.fakes.vllm import FakeVLLM
from tests.hostile_upstream import BLOAT, DRIP, HostileVLLM
from tests.serving import wait_for


@pytest.fixture
def vllm():
    fake = FakeVLLM(tool_parser=None)
    yield fake
    fake.close()


def _info_asked(fake: FakeVLLM) -> int:
    return sum(1 for r in fake.received if r.path in ("/version", "/tokenize"))


def test_a_profile_is_learned_once_and_read_again_when_its_upstream_comes_back(vllm):
    clock = [1000.0]
    profiles = Profiles({vllm.url: Upstream(vllm.url)}, clock=lambda: clock[0])
    config = Config(upstream=vllm.url)
    first = profiles.get(vllm.url, vllm.model, config)
    assert (first.kind, first.version, first.call_wrapper) == ("vllm", "0.33.0", "hermes")
    assert first.thinking_opened is False
    asked = _info_asked(vllm)
    assert profiles.get(vllm.url, vllm.model, config) == first
    assert _info_asked(vllm) == asked  # known: nothing asked
    clock[0] += 1  # the server comes back, upgraded
    vllm.version = "0.34.0"
    profiles.recheck(vllm.url)
    upgraded = profiles.get(vllm.url, vllm.model, config)
    assert upgraded.version == "0.34.0"
    assert _info_asked(vllm) > asked


def test_a_profile_kept_in_the_store_is_read_by_another_process_without_asking(vllm,
                                                                               tmp_path):
    limits = StoreLimits(3600.0, 100, 0, 0)
    config = Config(upstream=vllm.url)
    path = str(tmp_path / "store.sqlite3")
    Profiles({}, SqliteStore(path, limits)).get(vllm.url, vllm.model, config)
    asked = _info_asked(vllm)
    other = Profiles({}, SqliteStore(path, limits)).get(vllm.url, vllm.model, config)
    assert (other.kind, other.version) == ("vllm", "0.33.0")
    assert _info_asked(vllm) == asked


def test_a_replica_back_from_down_is_told_to_the_profiles():
    a, b = "http://127.0.0.1:9", "http://127.0.0.1:10"
    back: list[str] = []
    replicas = Replicas({a: Upstream(a), b: Upstream(b)}, Metrics(), on_back=back.append)
    replicas.mark_up(a)
    assert back == []  # it was never down
    replicas.failed(a, Config(upstream=(a, b)), "refused", mark_down=True)
    replicas.mark_up(a)
    assert back == [a]


def test_a_kept_profile_of_another_server_on_the_same_url_is_read_anew(tmp_path):
    """The store outlives a server: what another kind of server, once at this URL, left
    there (a port reused, a server swapped) is told from the model list, and the profile of
    the one answering now is learned."""
    store = SqliteStore(str(tmp_path / "store.sqlite3"), StoreLimits(3600.0, 100, 0, 0))
    sglang = FakeSGLang()
    try:
        url, model = sglang.url, sglang.model
        left = UpstreamProfile(kind="vllm", version="0.33.0", context_length=32768,
                               learned_at=time.time())
        store.put_profile(store_key(url, model), orjson.dumps(left.record()), 3600)
        profile = Profiles({}, store).get(url, model, Config(upstream=url))
        assert profile.kind == "sglang"
        assert any(r.path == "/get_server_info" for r in sglang.received)
    finally:
        sglang.close()


def test_only_the_models_an_upstream_lists_are_probed():
    """On an upstream listing several models, a name it does not list is not probed and
    not kept; a listed one is, once."""
    fake = HostileVLLM(listed=("other",))
    try:
        profiles = Profiles({fake.url: Upstream(fake.url)})
        config = Config(upstream=fake.url)
        for i in range(20):
            assert profiles.get(fake.url, f"made-up-{i}", config).kind == "openai-compatible"
        assert "/version" not in fake.info_asked()
        assert profiles.known() == {}
        assert profiles.get(fake.url, "other", config).kind == "vllm"
        assert profiles.get(fake.url, fake.model, config).kind == "vllm"
        assert set(profiles.known()) == {(fake.url, "other"), (fake.url, fake.model)}
        assert fake.info_asked().count("/version") == 2
    finally:
        fake.close()


def test_an_upstream_serving_one_model_is_probed_once_for_any_name(vllm):
    profiles = Profiles({vllm.url: Upstream(vllm.url)})
    config = Config(upstream=vllm.url)
    for i in range(10):
        assert profiles.get(vllm.url, f"alias-{i}", config).kind == "vllm"
    assert list(profiles.known()) == [(vllm.url, vllm.model)]
    assert _info_asked(vllm) == 2  # /version and /tokenize, once


def test_a_template_changed_under_the_same_name_is_noticed_within_a_minute(vllm):
    clock = [1000.0]
    profiles = Profiles({vllm.url: Upstream(vllm.url)}, clock=lambda: clock[0])
    config = Config(upstream=vllm.url)
    first = profiles.get(vllm.url, vllm.model, config)
    assert first.call_wrapper == "hermes"
    assert first.template
    vllm.template = ChatTemplate(opens_thinking=True)  # restarted: same URL, name, window
    clock[0] += RECHECK_SECONDS - 1
    assert profiles.get(vllm.url, vllm.model, config) == first  # not due yet
    clock[0] += 2
    profiles.get(vllm.url, vllm.model, config)  # due: read again beside the turn
    wait_for(lambda: profiles.get(vllm.url, vllm.model, config).thinking_opened is True)
    assert profiles.get(vllm.url, vllm.model, config).template != first.template


def test_a_refusal_expires_in_minutes():
    profile = UpstreamProfile(kind="vllm", version="0.33.0", learned_at=0.0)
    refused = profile.refusing("structured_outputs", until=600.0)
    assert refused.current(599.0).refused == {"structured_outputs"}
    assert refused.current(600.0).refused == frozenset()
    again = UpstreamProfile.from_record(orjson.loads(orjson.dumps(refused.record())))
    assert again == refused


def test_a_probe_ends_at_its_deadline_whatever_the_server_drips():
    fake = HostileVLLM(version_mode=DRIP)
    try:
        profiles = Profiles({fake.url: Upstream(fake.url)}, deadline=1.0)
        started = time.monotonic()
        learning = profiles.learning(fake.url, fake.model, Config(upstream=fake.url))
        assert not learning.settled  # learned beside the caller, who is not held
        assert time.monotonic() - started < 0.5
        learning.wait(5.0)
        assert learning.settled
        assert time.monotonic() - started < 4.0  # the deadline, plus one read at most
    finally:
        fake.close()


def test_every_learned_field_is_capped():
    fake = HostileVLLM(version_mode=BLOAT)
    try:
        profile = Profiles({fake.url: Upstream(fake.url)}).get(
            fake.url, fake.model, Config(upstream=fake.url))
        assert len(orjson.dumps(profile.record())) < 2048
        assert len(profile.version) <= VERSION_CHARS
        bloated = dataclasses.replace(profile, version="1" * 10_000)
        assert UpstreamProfile.from_record(bloated.record()) is None  # read as untrusted
    finally:
        fake.close()


def _refusing(field: str):
    """A vLLM whose grammar backend refuses `field`, whoever builds the constraint (400
    naming it, as vLLM's refusal does)."""
    def answer(received: Received) -> Answer:
        if field in received.json:
            return vllm_error(400, f"Invalid {field}: no grammar backend")
        return Answer(body=vllm_completion("Done."))
    return answer


def test_a_refusal_one_worker_blamed_on_the_server_survives_another_worker_s_re_read(tmp_path):
    """Issue 42's review: a worker's re-read of a profile (a minute old) wrote its own copy
    over the store's, losing the field another worker had found the server refusing."""
    fake = FakeVLLM(tool_parser=None)
    fake.answer(_refusing("structured_outputs"))
    clock = [1000.0]
    path = str(tmp_path / "store.sqlite3")
    limits = StoreLimits(3600.0, 100, 0, 0)
    config = Config(upstream=fake.url)
    first, second = (Profiles({fake.url: Upstream(fake.url)}, SqliteStore(path, limits),
                              clock=lambda: clock[0]) for _ in range(2))
    key = (fake.url, fake.model)
    try:
        first.get(fake.url, fake.model, config)
        assert second.get(fake.url, fake.model, config).refused == frozenset()  # from the store
        first.refused(fake.url, fake.model, DIALECTS["structured_outputs"], None, config)
        wait_for(lambda: "structured_outputs" in first.known()[key].refused)
        clock[0] += RECHECK_SECONDS + 1  # due: the second worker reads its profile again
        second.get(fake.url, fake.model, config)
        wait_for(lambda: "structured_outputs" in second.known()[key].refused)
        third = Profiles({}, SqliteStore(path, limits), clock=lambda: clock[0])
        assert "structured_outputs" in third.get(fake.url, fake.model, config).refused
        clock[0] += REFUSAL_SECONDS  # and a refusal whose time is up is not brought back
        fourth = Profiles({fake.url: Upstream(fake.url)}, SqliteStore(path, limits),
                          clock=lambda: clock[0])
        assert fourth.get(fake.url, fake.model, config).refused == frozenset()
    finally:
        fake.close()


def test_refreshed_keeps_the_refusals_of_both_each_until_its_later_time():
    old = UpstreamProfile(kind="vllm", version="0.33.0", refusals=(("a", 50.0), ("b", 900.0)))
    new = UpstreamProfile(kind="vllm", version="0.33.0", refusals=(("b", 700.0), ("c", 800.0)))
    assert refreshed(old, new, now=100.0).refusals == (("b", 900.0), ("c", 800.0))
    other = dataclasses.replace(new, version="0.34.0")  # another server: nothing carried
    assert refreshed(old, other, now=100.0) == other


class _SlowToRefuse(HostileVLLM):
    """A gateway that takes a second to refuse a wrong key (and answers a right one at once)."""

    def _route(self, received: Received) -> Answer:
        if received.headers.get("Authorization") != f"Bearer {self.key}":
            return Answer(status=401, chunks=[b'{"error": ', b'{"message": "Unauthorized"}}'],
                          chunk_gap=1.0)
        return super()._route(received)


def test_a_right_key_never_gets_the_profile_of_a_wrong_key_s_learning_in_flight():
    """Issue 42's review: pending learnings were keyed by URL and model, so a right key that
    asked while a wrong key's probe was in flight got its generic profile for one turn."""
    fake = _SlowToRefuse(key="right")
    config = Config(upstream=fake.url)
    profiles = Profiles({fake.url: Upstream(fake.url)})
    try:
        wrong = profiles.learning(fake.url, fake.model, config, {"Authorization": "Bearer no"})
        right = profiles.get(fake.url, fake.model, config, {"Authorization": "Bearer right"})
        assert (right.kind, right.call_wrapper) == ("vllm", "hermes")
        assert wrong.wait(profiles.deadline + 2)
        assert list(profiles.known()) == [(fake.url, fake.model)]  # the right key's, kept
    finally:
        fake.close()


def test_the_credential_is_hashed_never_held():
    assert credential({}) == ""
    hashed = credential({"Authorization": "Bearer secret-key"})
    assert "secret" not in hashed
    assert len(hashed) == 32
    assert hashed != credential({"Authorization": "Bearer other-key"})
