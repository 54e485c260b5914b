"""Ten thousand generated request bodies against the live server: never a 5xx, never a
dropped connection, and /health answers throughout.

A seeded generator (not hypothesis: its shrinking and database cost more than the bodies
here) so that every run sends the same bodies; a failure prints the body that caused it.
"""
import json
import random

import pytest

from tests.engine.server.live import Server, base_profile

pytestmark = pytest.mark.slow

SEED = 19
BODIES = 10_200
HEALTH_EVERY = 200
ROUTES = ("/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/engine/checkpoints",
          "/tokenize", "/detokenize")

_WEIRD_NUMBERS = [-1, 0, 1, 2, -2**63, 2**63, 2**64 + 1, 10**30, -10**30, 1e308, -1e308, 5e-324,
                  1e-320, 0.5, -0.0, 3.7, 2**53 + 1]
_WEIRD_STRINGS = ["", " ", "tiny", "yes", "true", "10", "-1", "null", "\x00", "\u202e",
                  "\U0001f600", "a" * 5000, "<|im_end|>", "\\", "\"", "\n\r\t",
                  "messages", "resp_" + "0" * 32]
_FIELDS = {
    "/v1/chat/completions": ["model", "messages", "max_tokens", "max_completion_tokens",
                             "temperature", "top_p", "seed", "n", "stream", "stream_options",
                             "user", "prompt_cache_key", "stop"],
    "/v1/completions": ["model", "prompt", "max_tokens", "temperature", "top_p", "seed", "n",
                        "stream", "stream_options", "stop", "user", "prompt_cache_key"],
    "/tokenize": ["model", "prompt", "messages", "add_generation_prompt"],
    "/detokenize": ["model", "tokens"],
    "/v1/responses": ["model", "input", "instructions", "previous_response_id", "store",
                      "max_output_tokens", "temperature", "top_p", "stream",
                      "prompt_cache_key", "metadata", "user"],
    "/v1/engine/checkpoints": ["session"],
}
SURROGATE = "\ud800"   # json.dumps writes it as the escape \ud800, as a hostile client would


def _valid(rng: random.Random, route: str) -> dict:
    """A body the server accepts, with a small output so that generation stays cheap."""
    if route == "/v1/chat/completions":
        body = {"model": "tiny", "messages": [{"role": "user", "content": rng.choice(
            ["hi", "tell me more", "a b c", "\U0001f600 ok"])}],
            "max_tokens": rng.randint(1, 3), "temperature": rng.choice([0, 0.7, 1])}
        if rng.random() < 0.3:
            body["stream"] = True
            body["stream_options"] = {"include_usage": rng.random() < 0.5}
        if rng.random() < 0.2:
            body["prompt_cache_key"] = f"k{rng.randint(0, 3)}"
        if rng.random() < 0.2:
            body["seed"] = rng.randint(0, 2**63 - 1)
        return body
    if route == "/v1/responses":
        body = {"model": "tiny", "input": rng.choice(
            ["hi", [{"role": "user", "content": "x"}],
             [{"type": "message", "role": "user", "content": [{"type": "input_text",
                                                               "text": "y"}]}]]),
                "max_output_tokens": rng.randint(1, 3), "temperature": 0}
        if rng.random() < 0.3:
            body["stream"] = True
        if rng.random() < 0.3:
            body["store"] = rng.random() < 0.5
        if rng.random() < 0.2:
            body["metadata"] = {"a": "b"}
        return body
    if route == "/v1/completions":
        body = {"model": "tiny", "prompt": rng.choice(["hi", [1, 2, 3], ["x y"], [[4, 5]]]),
                "max_tokens": rng.randint(1, 3), "temperature": rng.choice([0, 1])}
        if rng.random() < 0.3:
            body["stream"] = True
        if rng.random() < 0.3:
            body["stop"] = rng.choice(["a", ["b", "c"], "\n"])
        return body
    if route == "/tokenize":
        return rng.choice([{"prompt": "hi there"},
                           {"model": "tiny", "messages": [{"role": "user", "content": "x"}]}])
    if route == "/detokenize":
        return {"tokens": [rng.randint(0, 60) for _ in range(rng.randint(0, 5))]}
    return {"session": f"k{rng.randint(0, 3)}"}


def _value(rng: random.Random, depth: int = 0):
    """Anything JSON can hold, the awkward cases over-represented."""
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice(_WEIRD_NUMBERS)
    if kind == 3:
        return rng.randint(-10**6, 10**6)
    if kind == 4:
        return rng.choice(_WEIRD_STRINGS)
    if kind == 5:
        return "".join(chr(rng.randint(1, 0x2FFF)) for _ in range(rng.randint(0, 12)))
    if kind == 6:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == 7:
        return {rng.choice(["role", "content", "type", "text", "x", ""]): _value(rng, depth + 1)
                for _ in range(rng.randint(0, 3))}
    return rng.choice([[], {}, [{}], {"role": "user"}, {"type": "text", "text": 1}])


def _mutated(rng: random.Random, route: str) -> dict:
    body = _valid(rng, route)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(5)
        field = rng.choice(_FIELDS[route])
        if op == 0:
            body[field] = _value(rng)                          # wrong type or range
        elif op == 1:
            body.pop(field, None)                              # a required field missing
        elif op == 2:
            body[rng.choice(["logprobs", "tools", "x", "Model", "__proto__"])] = _value(rng)
        elif op == 3:
            body[field] = SURROGATE if rng.random() < 0.5 else f"ok{SURROGATE}ok"
        else:
            msgs = body.get("messages") or body.get("input")
            if isinstance(msgs, list) and msgs and isinstance(msgs[0], dict):
                msgs[0][rng.choice(["role", "content", "name", "type", "colour"])] = \
                    _value(rng)
    return body


def _raw(rng: random.Random, route: str) -> bytes:
    """Bodies that are not well-formed JSON objects, or only barely."""
    kind = rng.randrange(8)
    valid = json.dumps(_valid(rng, route)).encode()
    if kind == 0:
        return rng.choice([b"", b" ", b"\n", b"{", b"}", b"null", b"[]", b"0", b'"x"', b"{}"])
    if kind == 1:                                              # cut short
        return valid[:rng.randrange(len(valid))]
    if kind == 2:                                              # bytes that are not UTF-8
        i = rng.randrange(len(valid))
        return valid[:i] + bytes(rng.choice([0x80, 0xC3, 0xFF, 0xFE, 0xED])
                                 for _ in range(rng.randint(1, 3))) + valid[i:]
    if kind == 3:                                              # random bytes
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    if kind == 4:                                              # deep nesting somewhere
        n = rng.choice([33, 100, 1000, 20_000, 60_000])
        open_, close = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
        return valid[:-1] + b', "metadata": ' + open_ * n + b"1" + close * n + b"}"
    if kind == 5:                                              # huge numbers in the text
        return valid[:-1] + b', "max_tokens": ' + rng.choice(
            [b"9" * 5000, b"1e999", b"-1e999", b"NaN", b"Infinity", b"-0", b"1.5e-400"]) + b"}"
    if kind == 6:                                              # escapes that decode badly
        esc = rng.choice([b"\\ud800", b"\\udfff", b"\\ud800\\ud800", b"\\u0000", b"\\x41",
                          b"\\uZZZZ", b"\\"])
        return valid.replace(b'"tiny"', b'"' + esc + b'"', 1)
    return valid.replace(b"{", b'{"a": 1, "a": 2, ', 1)         # duplicate keys


def bodies(seed: int, n: int):
    rng = random.Random(seed)
    for _ in range(n):
        route = rng.choice(ROUTES)
        r = rng.random()
        if r < 0.04:
            yield route, json.dumps(_valid(rng, route)).encode()
        elif r < 0.65:
            yield route, json.dumps(_mutated(rng, route)).encode()
        else:
            yield route, _raw(rng, route)


@pytest.fixture(scope="module")
def fuzz_server(tiny_model, tmp_path_factory):
    profile = {**base_profile(tiny_model), "max_context": 96}
    with Server(tmp_path_factory.mktemp("fuzz10k"), profile) as s:
        yield s


def test_generator_is_seeded():
    first = list(bodies(SEED, 50))
    assert first == list(bodies(SEED, 50)) and first != list(bodies(SEED + 1, 50))


def test_ten_thousand_bodies_no_5xx(fuzz_server):
    statuses: dict[int, int] = {}
    health_checks = 0
    connects: list[str] = []

    def trace(name, _info):
        if name == "connection.connect_tcp.complete":
            connects.append(name)

    # one keep-alive client: a connection the server drops shows up as a second connect
    with fuzz_server.client() as c:
        for i, (route, body) in enumerate(bodies(SEED, BODIES)):
            r = c.post(route, content=body, headers={"content-type": "application/json"},
                       extensions={"trace": trace})
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            assert r.status_code < 500, (route, body[:2000], r.text[:2000])
            assert r.headers.get("connection", "").lower() != "close", (route, body[:2000])
            if r.status_code >= 400:
                assert r.json()["error"]["code"], (route, body[:2000])
            if i % HEALTH_EVERY == 0:
                h = c.get("/health")
                assert h.status_code == 200 and h.json() == {"status": "ok"}
                health_checks += 1
        assert c.get("/health").status_code == 200
    assert sum(statuses.values()) == BODIES >= 10_000
    assert health_checks >= BODIES // HEALTH_EVERY
    # the connection was opened once and never dropped
    assert len(connects) == 1, f"{len(connects)} connections opened"
    # most bodies are refused by validation; enough are served to exercise generation
    assert statuses.get(400, 0) > BODIES // 2 and statuses.get(200, 0) > 250, statuses
