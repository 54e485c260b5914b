"""Auth, every error code, and a property-based fuzz of the POST bodies: never a 5xx."""
import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.server.live import Server, base_profile

pytestmark = pytest.mark.slow

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
        "temperature": 0}


def _err(r: httpx.Response, status: int, code: str) -> dict:
    assert r.status_code == status, r.text
    body = r.json()["error"]
    assert set(body) == {"message", "type", "param", "code"}
    assert body["code"] == code and body["message"]
    return body


def test_auth(server):
    with httpx.Client(base_url=server.url, timeout=30) as c:
        assert c.get("/health").json() == {"status": "ok"}
        for path in ("/v1/models", "/v1/engine/status", "/metrics"):
            _err(c.get(path), 401, "invalid_api_key")
            _err(c.get(path, headers={"Authorization": "Bearer wrong"}), 401,
                 "invalid_api_key")
        _err(c.post("/v1/chat/completions", json=CHAT), 401, "invalid_api_key")
        _err(c.post("/v1/responses", json={"model": "tiny", "input": "x"},
                    headers={"Authorization": "Basic " + server.key}), 401, "invalid_api_key")
        ok = c.get("/v1/models", headers=server.headers)
        assert ok.status_code == 200


def test_400_codes(server):
    with server.client() as c:
        b = _err(c.post("/v1/chat/completions", json={**CHAT, "frobnicate": 1}), 400,
                 "unknown_parameter")
        assert b["param"] == "frobnicate" and "frobnicate" in b["message"]
        b = _err(c.post("/v1/chat/completions", json={
            **CHAT, "messages": [{"role": "user", "content": "x", "colour": "red"}]}),
            400, "unknown_parameter")
        assert b["param"] == "messages[0].colour"
        b = _err(c.post("/v1/responses", json={"model": "tiny", "input": "x", "tools": []}),
                 400, "unknown_parameter")
        assert b["param"] == "tools"
        b = _err(c.post("/v1/chat/completions", json={**CHAT, "temperature": "hot"}), 400,
                 "invalid_request")
        assert b["param"] == "temperature"
        _err(c.post("/v1/chat/completions", content=b"{not json",
                    headers={"content-type": "application/json"}), 400, "invalid_request")
        _err(c.post("/v1/chat/completions", json=[1, 2]), 400, "invalid_request")
        b = _err(c.post("/v1/chat/completions", json={**CHAT, "max_tokens": 10_000}), 400,
                 "context_length_exceeded")
        assert b["param"] == "max_tokens"
        long = {"model": "tiny", "input": "word " * 400}
        _err(c.post("/v1/responses", json=long), 400, "context_length_exceeded")


def test_404_codes(server):
    with server.client() as c:
        _err(c.get("/v1/responses/resp_nope"), 404, "response_not_found")
        _err(c.delete("/v1/responses/resp_nope"), 404, "response_not_found")
        _err(c.get("/v1/responses/resp_nope/input_items"), 404, "response_not_found")
        b = _err(c.post("/v1/responses", json={"model": "tiny", "input": "x",
                                               "previous_response_id": "resp_nope"}),
                 404, "previous_response_not_found")
        assert b["param"] == "previous_response_id"
        _err(c.post("/v1/chat/completions", json={**CHAT, "model": "gpt-9"}), 404,
             "model_not_found")
        _err(c.get("/v1/nothing-here"), 404, "not_found")


def test_409_and_413(server):
    with server.client() as c:
        # this server keeps no checkpoint directory: checkpoint routes conflict with that
        _err(c.post("/v1/engine/checkpoints", json={"session": "s"}), 409,
             "checkpoints_disabled")
        _err(c.get("/v1/engine/checkpoints/s"), 409, "checkpoints_disabled")
        big = {**CHAT, "messages": [{"role": "user", "content": "x" * 300_000}]}
        _err(c.post("/v1/chat/completions", json=big), 413, "request_too_large")


_scalar = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
_json = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8)
_message = st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", "x"]),
                                  "content": st.one_of(st.text(max_size=40), _json)})
_common = {"model": st.sampled_from(["tiny", "other", ""]) | _scalar,
           "temperature": st.floats(-1, 3) | _scalar, "top_p": st.floats(-1, 2) | _scalar,
           "stream": st.booleans() | _scalar, "prompt_cache_key": st.text(max_size=10) | _scalar,
           "unknown_" + "x": _json}
_chat = st.fixed_dictionaries({}, optional={
    **_common, "messages": st.lists(_message, max_size=3) | _json,
    "max_tokens": st.integers(-5, 300) | _scalar, "seed": st.integers(-5, 10) | st.integers(-2**70, 2**70) | _scalar,
    "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}) | _json,
    "n": st.integers(0, 3)})
_responses = st.fixed_dictionaries({}, optional={
    **_common, "input": st.text(max_size=40) | st.lists(_message, max_size=2) | _json,
    "instructions": st.text(max_size=20) | _scalar, "store": st.booleans() | _scalar,
    "previous_response_id": st.text(max_size=10) | _scalar,
    "max_output_tokens": st.integers(-5, 300) | _scalar, "metadata": _json})


@pytest.fixture(scope="module")
def fuzz_server(tiny_model, tmp_path_factory):
    profile = {**base_profile(tiny_model), "max_context": 96}
    with Server(tmp_path_factory.mktemp("fuzz"), profile) as s:
        yield s


@pytest.mark.parametrize("path,strategy", [("/v1/chat/completions", _chat),
                                           ("/v1/responses", _responses)])
def test_fuzz_no_5xx(fuzz_server, path, strategy):
    seen: dict[int, int] = {}
    with fuzz_server.client() as c:
        @settings(max_examples=75, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def run(body):
            r = c.post(path, content=json.dumps(body), headers={"content-type":
                                                                "application/json"})
            seen[r.status_code] = seen.get(r.status_code, 0) + 1
            assert r.status_code < 500, (body, r.text)
            if r.status_code >= 400:
                assert r.json()["error"]["code"]
        run()
    assert sum(seen.values()) >= 75 and 400 in seen


def test_409_session_busy(server):
    import threading
    started = threading.Event()
    lines = []

    def stream():
        with httpx.Client(base_url=server.url, headers=server.headers, timeout=60) as c:
            with c.stream("POST", "/v1/chat/completions", json={
                    **CHAT, "max_tokens": 200, "stream": True,
                    "prompt_cache_key": "busy"}) as r:
                for line in r.iter_lines():
                    started.set()
                    lines.append(line)

    t = threading.Thread(target=stream)
    t.start()
    try:
        assert started.wait(60)
        with server.client() as c:
            b = _err(c.post("/v1/chat/completions", json={**CHAT, "prompt_cache_key": "busy"}),
                     409, "session_busy")
            assert b["param"] == "prompt_cache_key"
    finally:
        t.join(60)
    assert [ln for ln in lines if ln][-1] == "data: [DONE]"
