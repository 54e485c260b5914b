"""Tenancy: what one API key stores or caches, another key can neither see nor use."""
import hashlib

import httpx
import pytest

from tests.engine.server.live import KEY, Server, base_profile

pytestmark = pytest.mark.slow

OTHER = "test-key-two"
PREAMBLE = [{"role": "user", "content": "A long shared preamble about tides and harbours. " * 3}]


@pytest.fixture(scope="module")
def two_keys(tiny_model, tmp_path_factory):
    ck = tmp_path_factory.mktemp("ck")
    profile = {**base_profile(tiny_model),
               "checkpoints": {"directory": str(ck), "auto_save_min_tokens": 100000}}
    with Server(tmp_path_factory.mktemp("tenancy"), profile, extra_keys=(OTHER,)) as s:
        a = s.client()
        b = s.client(headers={"Authorization": f"Bearer {OTHER}"})
        yield s, a, b, ck
        a.close()
        b.close()


def _code(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, r.text
    return r.json()["error"]["code"]


def test_stored_responses_belong_to_their_key(two_keys):
    _, a, b, _ = two_keys
    r = a.post("/v1/responses", json={"model": "tiny", "input": "My name is Ada.",
                                      "max_output_tokens": 4, "temperature": 0})
    assert r.status_code == 200, r.text
    rid = r.json()["id"]
    assert _code(b.get(f"/v1/responses/{rid}"), 404) == "response_not_found"
    assert _code(b.get(f"/v1/responses/{rid}/input_items"), 404) == "response_not_found"
    assert _code(b.delete(f"/v1/responses/{rid}"), 404) == "response_not_found"
    assert _code(b.post("/v1/responses", json={
        "model": "tiny", "input": "What is my name?", "previous_response_id": rid,
        "max_output_tokens": 4}), 404) == "previous_response_not_found"
    # the owner still has it, whole, after the other key's delete
    assert a.get(f"/v1/responses/{rid}").json()["id"] == rid
    assert a.get(f"/v1/responses/{rid}/input_items").json()["data"][0]["content"][0][
        "text"] == "My name is Ada."
    follow = a.post("/v1/responses", json={"model": "tiny", "input": "What is my name?",
                                           "previous_response_id": rid,
                                           "max_output_tokens": 4, "temperature": 0})
    assert follow.status_code == 200 and follow.json()["previous_response_id"] == rid
    assert a.delete(f"/v1/responses/{rid}").json()["deleted"] is True


def _chat(c, key, messages):
    r = c.post("/v1/chat/completions", json={"model": "tiny", "messages": messages,
                                             "max_tokens": 4, "temperature": 0,
                                             "prompt_cache_key": key})
    assert r.status_code == 200, r.text
    return r.json()


def test_cached_tokens_reveal_nothing_across_keys(two_keys):
    _, a, b, _ = two_keys
    first = _chat(a, "shared", PREAMBLE)
    follow = PREAMBLE + [{"role": "assistant", "content": first["choices"][0]["message"][
        "content"]}, {"role": "user", "content": "Go on."}]
    # the other key probes A's prefix under the same prompt_cache_key: nothing is reused
    probe = _chat(b, "shared", follow)
    assert probe["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    # A's own session still holds its prefix (the probe did not touch it)
    again = _chat(a, "shared", follow)
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] >= \
        first["usage"]["prompt_tokens"]


def test_checkpoints_belong_to_their_key(two_keys):
    _, a, b, ck = two_keys
    _chat(a, "mine", PREAMBLE)
    assert a.post("/v1/engine/checkpoints", json={"session": "mine"}).status_code == 200
    assert b.get("/v1/engine/checkpoints/mine").json()["status"] == "missing"
    assert _code(b.post("/v1/engine/checkpoints", json={"session": "mine"}), 404) == \
        "session_not_found"
    assert b.delete("/v1/engine/checkpoints/mine").json()["deleted"] is False
    assert a.get("/v1/engine/checkpoints/mine").json()["status"] == "available"
    # the folder is named by a digest of the tenant-scoped key: neither the API key nor the
    # prompt_cache_key appears on disk
    names = [p.name for p in ck.rglob("*")]
    assert not any(KEY in n or "mine" in n for n in names)
    digest_of_key = hashlib.sha256(KEY.encode()).hexdigest()
    assert not any(digest_of_key in n for n in names)
