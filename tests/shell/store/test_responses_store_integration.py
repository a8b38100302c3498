"""The response store end to end, as clients see it: the official openai SDK → the proxy (real
HTTP) → the fake vLLM. Answers belong to the API key that stored them; the store's limits
and failures are answered in the Responses envelope before upstream is called."""

from __future__ import annotations

import openai
import pytest
import requests

from proxy.base.config import Config
from proxy.shell.store.interface import StoreLimits
from proxy.shell.store.sqlite import SqliteStore
from tests.fake_vllm import Answer, vllm_completion

pytestmark = pytest.mark.integration

KEY_A, KEY_B = "sk-alpha-0123456789", "sk-beta-9876543210"


@pytest.fixture
def keyed(start_proxy, tmp_path):
    return start_proxy(api_keys=[KEY_A, KEY_B],
                       responses_store_path=str(tmp_path / "responses.sqlite3"))


def _client(proxy, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=key, max_retries=0, timeout=20)


def _raw(proxy, method: str, path: str, key: str, body: dict | None = None):
    return requests.request(method, proxy.url + path, json=body, timeout=20,
                            headers={"Authorization": f"Bearer {key}"})


def test_another_keys_answer_is_not_found_on_get_delete_and_continue(fake, keyed):
    alice, bob = _client(keyed, KEY_A), _client(keyed, KEY_B)
    fake.answer(Answer(body=vllm_completion("Alice's secret answer.")))
    kept = alice.responses.create(model="qwen", input="Hello")
    for attempt in (lambda: bob.responses.retrieve(kept.id),
                    lambda: bob.responses.delete(kept.id),
                    lambda: bob.responses.create(model="qwen", input="more",
                                                 previous_response_id=kept.id)):
        with pytest.raises(openai.NotFoundError):
            attempt()
    assert len(fake.chat_requests()) == 1  # Bob's continuation never went upstream
    assert alice.responses.retrieve(kept.id).output_text == "Alice's secret answer."
    fake.answer(Answer(body=vllm_completion("Go on.")))
    alice.responses.create(model="qwen", input="more", previous_response_id=kept.id)
    assert fake.chat_requests()[-1].json["messages"][0] == {"role": "user", "content": "Hello"}
    alice.responses.delete(kept.id)
    with pytest.raises(openai.NotFoundError):
        alice.responses.retrieve(kept.id)


def test_another_keys_id_answers_exactly_as_an_id_never_kept(fake, keyed):
    fake.answer(Answer(body=vllm_completion("ok")))
    kept = _client(keyed, KEY_A).responses.create(model="qwen", input="x")
    never = "resp_" + "0" * 48
    for method, path, body in (("GET", "/v1/responses/{}", None),
                               ("DELETE", "/v1/responses/{}", None),
                               ("POST", "/v1/responses", {"model": "qwen", "input": "y",
                                                          "previous_response_id": "{}"})):
        def call(response_id: str, method=method, path=path, body=body):
            filled = None if body is None else {
                **body, "previous_response_id": response_id}
            return _raw(keyed, method, path.format(response_id), KEY_B, filled)
        theirs, missing = call(kept.id), call(never)
        assert theirs.status_code == missing.status_code == 404
        assert theirs.text.replace(kept.id, "ID") == missing.text.replace(never, "ID")
        assert theirs.headers.get("Content-Type") == missing.headers.get("Content-Type")


def test_without_api_keys_every_client_shares_one_owner(fake, start_proxy, tmp_path):
    proxy = start_proxy(responses_store_path=str(tmp_path / "r.sqlite3"))
    fake.answer(Answer(body=vllm_completion("shared")))
    kept = _client(proxy, "anything").responses.create(model="qwen", input="x")
    assert _client(proxy, "something-else").responses.retrieve(kept.id).output_text == "shared"


def test_item_ids_say_nothing_of_the_response_id(fake, keyed):
    alice = _client(keyed, KEY_A)
    fake.answer(Answer(body=vllm_completion("Hi.", reasoning="Greet.")))
    first = alice.responses.create(model="qwen", input="hello")
    fake.answer(Answer(body=vllm_completion("Hi.", reasoning="Greet.")))
    with alice.responses.stream(model="qwen", input="hello") as stream:
        second = stream.get_final_response()
    for response in (first, second):
        ids = [item.id for item in response.output]
        assert len(ids) == 2
        assert len(set(ids)) == 2
        assert all(response.id[5:] not in item_id and response.id[5:15] not in item_id
                   for item_id in ids)
        # The store answers with the ids the client saw.
        assert [item.id for item in alice.responses.retrieve(response.id).output] == ids
    assert not {item.id for item in first.output} & {item.id for item in second.output}


def test_a_store_that_cannot_be_read_is_a_503_in_the_responses_envelope(fake, start_proxy,
                                                                          tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proxy = start_proxy(api_keys=[KEY_A], responses_store_path=str(blocker / "r.sqlite3"))
    alice = _client(proxy, KEY_A)
    for attempt in (lambda: alice.responses.retrieve("resp_x"),
                    lambda: alice.responses.create(model="qwen", input="y",
                                                   previous_response_id="resp_x")):
        with pytest.raises(openai.InternalServerError) as caught:
            attempt()
        assert caught.value.status_code == 503
        assert caught.value.body["code"] == "store_unavailable"
    assert fake.chat_requests() == []
    fake.answer(Answer(body=vllm_completion("still answered")))  # store: false needs no store
    assert alice.responses.create(model="qwen", input="y",
                                  store=False).output_text == "still answered"


def _status_error(attempt) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as caught:
        attempt()
    return caught.value


def test_one_keys_answers_never_evict_anothers(fake, start_proxy, tmp_path):
    proxy = start_proxy(api_keys=[KEY_A, KEY_B], responses_store_max_responses=2,
                        responses_store_path=str(tmp_path / "r.sqlite3"))
    alice, bob = _client(proxy, KEY_A), _client(proxy, KEY_B)
    fake.answer(Answer(body=vllm_completion("kept")))
    bobs = bob.responses.create(model="qwen", input="x")
    alices = [alice.responses.create(model="qwen", input=f"q{i}") for i in range(3)]
    assert bob.responses.retrieve(bobs.id).output_text == "kept"
    with pytest.raises(openai.NotFoundError):  # Alice's oldest made room for her newest
        alice.responses.retrieve(alices[0].id)
    assert [alice.responses.retrieve(r.id).id for r in alices[1:]] == [r.id for r in alices[1:]]


def test_an_input_over_the_keys_budget_is_a_413_before_upstream(fake, start_proxy, tmp_path):
    proxy = start_proxy(api_keys=[KEY_A], responses_store_max_bytes_per_key=2000,
                        responses_store_path=str(tmp_path / "r.sqlite3"))
    alice = _client(proxy, KEY_A)
    error = _status_error(lambda: alice.responses.create(model="qwen", input="x" * 3000))
    assert error.status_code == 413
    assert error.body["code"] == "store_budget_exceeded"
    assert error.body["param"] == "store"
    assert fake.chat_requests() == []
    fake.answer(Answer(body=vllm_completion("fine")))
    assert alice.responses.create(model="qwen", input="x" * 3000,
                                  store=False).output_text == "fine"
    assert alice.responses.create(model="qwen", input="x" * 500).output_text == "fine"


def test_a_full_store_refuses_a_key_with_nothing_to_let_go(fake, start_proxy, tmp_path):
    proxy = start_proxy(api_keys=[KEY_A, KEY_B], responses_store_max_bytes=6000,
                        responses_store_path=str(tmp_path / "r.sqlite3"))
    alice, bob = _client(proxy, KEY_A), _client(proxy, KEY_B)
    fake.answer(Answer(body=vllm_completion("ok")))
    bobs = [bob.responses.create(model="qwen", input="b" * 1500) for _ in range(4)]
    asked = len(fake.chat_requests())
    error = _status_error(lambda: alice.responses.create(model="qwen", input="a" * 1500))
    assert (error.status_code, error.body["code"]) == (413, "store_full")
    assert len(fake.chat_requests()) == asked  # refused before upstream
    assert bob.responses.retrieve(bobs[-1].id).id == bobs[-1].id  # Bob's newest stays
    assert alice.responses.create(model="qwen", input="a", store=False).output_text == "ok"


def test_metadata_beyond_the_apis_limits_is_a_400_naming_it(fake, keyed):
    alice = _client(keyed, KEY_A)
    cases = [({f"k{i}": "v" for i in range(17)}, "metadata"),
             ({"k" * 65: "v"}, "metadata"),
             ({"note": "v" * 513}, "metadata.note"),
             ({"count": 3}, "metadata.count")]
    for metadata, param in cases:
        with pytest.raises(openai.BadRequestError) as caught:
            alice.responses.create(model="qwen", input="x", metadata=metadata)
        assert caught.value.body["param"] == param
    assert fake.chat_requests() == []
    fake.answer(Answer(body=vllm_completion("ok")))
    at_limits = {f"{i:02d}" + "k" * 62: "v" * 512 for i in range(16)}
    assert alice.responses.create(model="qwen", input="x",
                                  metadata=at_limits).metadata == at_limits


def test_an_unknown_input_item_type_is_a_400_naming_the_item(fake, keyed):
    alice = _client(keyed, KEY_A)
    message = {"type": "message", "role": "user", "content": "hi"}
    for bad_item in ({"type": "telepathy", "thought": "x"}, {"content": "no type, no role"}):
        with pytest.raises(openai.BadRequestError) as caught:
            alice.responses.create(model="qwen", input=[message, message, message, bad_item])
        assert caught.value.body["param"] == "input[3].type"
    assert fake.chat_requests() == []


def test_the_store_keeps_only_the_items_a_later_turn_reads(fake, start_proxy, tmp_path):
    path = tmp_path / "r.sqlite3"
    proxy = start_proxy(responses_store_path=str(path))
    fake.answer(Answer(body=vllm_completion("Done.", reasoning="Think.")))
    response = proxy.client().responses.create(model="qwen", input=[
        {"type": "message", "role": "user", "content": "search"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed",
         "action": {"type": "search", "query": "q"}},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text",
                                                         "text": "old thoughts"}]},
        {"id": "msg_ref_only"}])  # an item reference: known, not read
    store = SqliteStore(str(path), StoreLimits())
    items = store.recall(store.owner(None), response.id)
    assert [item["type"] for item in items] == ["message", "message"]
    assert "old thoughts" not in str(items)


def test_a_conversation_larger_than_a_request_may_be_is_a_413_before_upstream(fake, start_proxy,
                                                                              tmp_path):
    proxy = start_proxy(api_keys=[KEY_A], max_body_bytes=5000,
                        responses_store_path=str(tmp_path / "r.sqlite3"))
    alice = _client(proxy, KEY_A)
    fake.answer(Answer(body=vllm_completion("ok")))
    previous = None
    for turn in range(3):  # each request is small; the conversation grows past the limit
        previous = alice.responses.create(model="qwen", input=f"{turn}" + "x" * 2000,
                                          previous_response_id=previous).id
    asked = len(fake.chat_requests())
    error = _status_error(lambda: alice.responses.create(model="qwen", input="more",
                                                         previous_response_id=previous))
    assert error.status_code == 413
    assert error.body["code"] == "conversation_too_large"
    assert error.body["param"] == "previous_response_id"
    assert len(fake.chat_requests()) == asked


def test_the_deep_health_check_tells_whether_the_store_can_be_read(fake, start_proxy, tmp_path):
    good = start_proxy(responses_store_path=str(tmp_path / "r.sqlite3"))
    assert requests.get(good.url + "/proxy/health?upstream=1", timeout=20).json()["store"] == {
        "backend": "sqlite", "ok": True}
    corrupt = tmp_path / "corrupt.sqlite3"
    corrupt.write_bytes(b"not a database" * 100)
    bad = start_proxy(responses_store_path=str(corrupt))
    health = requests.get(bad.url + "/proxy/health?upstream=1", timeout=20)
    assert health.status_code == 200  # the upstream answers: chat and Messages still work
    assert health.json()["store"]["ok"] is False
    assert "store" not in requests.get(bad.url + "/proxy/health", timeout=20).json()


def test_a_store_url_password_never_shows_on_the_health_page():
    summary = Config(responses_store_url="redis://:hunter2@cache:6379/0").summary()
    assert "hunter2" not in str(summary)
