"""Hostile request bodies against a live server: each is a clean 400 naming what was wrong,
and the keep-alive connection it arrived on keeps working."""
import http.client
import json

import pytest

pytestmark = pytest.mark.slow

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
        "temperature": 0}
RESP = {"model": "tiny", "input": "hi", "max_output_tokens": 2, "temperature": 0}


class Conn:
    """One HTTP/1.1 connection, never silently reopened: a request after the server dropped
    it fails instead of reconnecting."""

    def __init__(self, server):
        self.server = server
        self.c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        self.c.auto_open = 0
        self.c.connect()
        self.sock = self.c.sock

    def post(self, path: str, body: bytes) -> tuple[int, dict, http.client.HTTPResponse]:
        self.c.request("POST", path, body=body, headers={
            **self.server.headers, "Content-Type": "application/json"})
        r = self.c.getresponse()
        data = r.read()
        return r.status, json.loads(data), r

    def close(self):
        self.c.close()


@pytest.fixture
def conn(server):
    c = Conn(server)
    yield c
    c.close()


def _raw(obj) -> bytes:
    # ensure_ascii keeps an unpaired surrogate as its \ud800 escape, as a hostile client sends
    return json.dumps(obj).encode("ascii")


def _bad_then_good(conn, path, body: bytes, param=None):
    status, err, r = conn.post(path, body)
    assert status == 400, err
    assert err["error"]["code"] == "invalid_request" and err["error"]["message"]
    if param is not None:
        assert err["error"]["param"] == param, err
    # the connection is still open and serves the next request on the same socket
    assert not r.will_close and (r.getheader("connection") or "").lower() != "close"
    status, ok, _ = conn.post("/v1/chat/completions", _raw(CHAT))
    assert status == 200, ok
    assert conn.c.sock is conn.sock
    return err


@pytest.mark.parametrize("path,body,param", [
    ("/v1/chat/completions",
     {**CHAT, "messages": [{"role": "user", "content": "x\ud800y"}]}, "messages[0].content"),
    ("/v1/chat/completions",
     {**CHAT, "messages": [{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}]},
     "messages[0].content[0].text"),
    ("/v1/chat/completions", {**CHAT, "prompt_cache_key": "k\ud800"}, "prompt_cache_key"),
    ("/v1/responses", {**RESP, "input": "\ud800"}, "input"),
    ("/v1/responses", {**RESP, "instructions": "ok \udbff"}, "instructions"),
])
def test_unpaired_surrogate_is_400(conn, path, body, param):
    err = _bad_then_good(conn, path, _raw(body), param)
    assert "surrogate" in err["error"]["message"]


def test_surrogate_in_a_key_is_400(conn):
    _bad_then_good(conn, "/v1/chat/completions", _raw({**CHAT, "x\ud800": 1}))


@pytest.mark.parametrize("depth", [40, 5_000, 100_000])
def test_deep_nesting_is_400(conn, depth):
    body = (b'{"model":"tiny","messages":[{"role":"user","content":"hi"}],"metadata":'
            + b"[" * depth + b"]" * depth + b"}")
    err = _bad_then_good(conn, "/v1/chat/completions", body)
    assert "nest" in err["error"]["message"]


@pytest.mark.parametrize("body", [b"", b"   ", b"\xff\xfe{}", b'{"model": "\xc3\x28"}',
                                  b'{"max_tokens": ' + b"9" * 5000 + b"}", b"null", b"[]",
                                  b'{"model": NaN}'])
def test_malformed_bodies_are_400(conn, body):
    _bad_then_good(conn, "/v1/chat/completions", body)


# Every documented field, given a value of the wrong JSON type that lax parsing would coerce
# (a numeric string, a "yes", a float with an integral value) or that is plainly wrong.
CHAT_WRONG = [
    ("max_tokens", "10"), ("max_tokens", 10.0), ("max_tokens", True),
    ("max_completion_tokens", "10"), ("temperature", "0.5"), ("top_p", "1"), ("seed", "7"),
    ("seed", 7.0), ("seed", False), ("n", "1"), ("n", True), ("stream", "yes"), ("stream", 1),
    ("stream", "true"), ("stream_options", "yes"), ("user", 5), ("prompt_cache_key", 5),
    ("model", 5), ("messages", "hi"),
]
RESP_WRONG = [
    ("max_output_tokens", "10"), ("max_output_tokens", 1.0), ("temperature", "1"),
    ("top_p", "0.5"), ("stream", "yes"), ("store", "no"), ("store", 0), ("instructions", 5),
    ("previous_response_id", 5), ("prompt_cache_key", 5), ("user", 5), ("input", 5),
    ("metadata", "x"),
]


@pytest.mark.parametrize("field,value", CHAT_WRONG)
def test_chat_wrong_type_is_400(conn, field, value):
    _bad_then_good(conn, "/v1/chat/completions", _raw({**CHAT, field: value}), field)


@pytest.mark.parametrize("field,value", RESP_WRONG)
def test_responses_wrong_type_is_400(conn, field, value):
    _bad_then_good(conn, "/v1/responses", _raw({**RESP, field: value}), field)


@pytest.mark.parametrize("path,body,param", [
    ("/v1/chat/completions", {**CHAT, "stream_options": {"include_usage": "yes"}},
     "stream_options.include_usage"),
    ("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": 5}]},
     "messages[0].content"),
    ("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": "x",
                                                    "name": 5}]}, "messages[0].name"),
    ("/v1/responses", {**RESP, "metadata": {"a": 1}}, "metadata.a"),
    ("/v1/engine/checkpoints", {"session": 5}, "session"),
])
def test_nested_wrong_type_is_400(conn, path, body, param):
    status, err, _ = conn.post(path, _raw(body))
    # the checkpoint route is off on this server; its body is still checked first
    assert status == 400 and err["error"]["param"] == param, err


def test_integers_are_still_numbers(conn):
    # strict types keep JSON's own number rule: an integer is a valid temperature or top_p
    status, ok, _ = conn.post("/v1/chat/completions",
                              _raw({**CHAT, "temperature": 1, "top_p": 1, "seed": 3}))
    assert status == 200 and ok["usage"]["completion_tokens"] == 2


@pytest.mark.parametrize("extra", [{"temperature": 1e-320}, {"temperature": 5e-324, "seed": 1},
                                   {"top_p": 5e-324, "temperature": 1}, {"seed": 2**63 - 1,
                                                                         "temperature": 2}])
def test_extreme_valid_numbers_are_served(conn, extra):
    # in range, so served: a temperature too small for float32 logits samples greedily
    status, ok, r = conn.post("/v1/chat/completions", _raw({**CHAT, **extra}))
    assert status == 200, ok
    assert ok["usage"]["completion_tokens"] == 2 and not r.will_close
