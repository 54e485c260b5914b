"""A client that goes away, streaming or not: its engine request is cancelled and its
prompt_cache_key session released at once."""
import time

import httpx
import pytest

from tests.engine.server.live import Server, base_profile

pytestmark = pytest.mark.slow

LONG = 2000   # output tokens: seconds of decoding on the CPU, so a late release shows


@pytest.fixture(scope="module")
def long_server(tiny_model, tmp_path_factory):
    profile = {**base_profile(tiny_model), "max_context": 2048, "kv_capacity": 8192}
    with Server(tmp_path_factory.mktemp("long"), profile) as s:
        yield s


def _hang_up(server, path, body):
    """Streaming: read the first event, then close the connection mid-generation. Otherwise:
    give up waiting for the answer (a client-side timeout) and close the connection."""
    if not body.get("stream"):
        with httpx.Client(base_url=server.url, headers=server.headers, timeout=0.5) as c:
            with pytest.raises(httpx.TimeoutException):
                c.post(path, json=body)
        return time.monotonic()
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=60) as c:
        with c.stream("POST", path, json=body) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith("data: "):
                    break
    return time.monotonic()


def _wait_until(pred, limit_s: float):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    return pred()


# Every case must run to LONG tokens unless cut off: the tiny model's random weights sample its
# end token early in a few percent of unseeded draws, and a request that ends by itself in under
# the client's 0.5 s never times out. Chat is seeded; the Responses API has no seed, so it decodes
# greedily (2000 tokens from "go").
@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "go"}],
                              "max_tokens": LONG, "temperature": 1.0, "seed": 1,
                              "stream": True}),
    ("/v1/responses", {"model": "tiny", "input": "go", "max_output_tokens": LONG,
                       "temperature": 0, "stream": True}),
    ("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "go"}],
                              "max_tokens": LONG, "temperature": 1.0, "seed": 1}),
    ("/v1/responses", {"model": "tiny", "input": "go", "max_output_tokens": LONG,
                       "temperature": 0}),
], ids=["chat-stream", "responses-stream", "chat", "responses"])
def test_disconnect_releases_session(long_server, path, body):
    key = f"hangup{path.replace('/', '-')}-{body.get('stream', False)}"
    hung_up = _hang_up(long_server, path, {**body, "prompt_cache_key": key})
    short = {"model": "tiny", "messages": [{"role": "user", "content": "again"}],
             "max_tokens": 2, "temperature": 0, "prompt_cache_key": key}
    with long_server.client() as c:
        # the engine drops the request: nothing left running
        assert _wait_until(lambda: c.get("/v1/engine/status").json()["scheduler"]["active"]
                           == 0, 2.0)
        r = _wait_until(lambda: (lambda r: r if r.status_code != 409 else None)(
            c.post("/v1/chat/completions", json=short)), 2.0)
        assert r is not None and r.status_code == 200, r.text if r is not None else "409"
        released_after = time.monotonic() - hung_up
        assert released_after < 2.5
        counters = c.get("/v1/engine/status").json()["counters"]
    assert counters["cancelled"] >= 1
    errors = [e for e in long_server.log() if e["event"] == "request_error"
              and e.get("route") == path]
    assert errors and errors[-1]["reason"] == "client_disconnected"
    assert errors[-1]["completion_tokens"] < LONG
