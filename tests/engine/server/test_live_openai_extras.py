"""What tools written for OpenAI and vLLM expect: /v1/completions, stop strings, seeds,
/tokenize, /detokenize, /version, vLLM's metric names, and the unknown-parameter switch."""
import re

import httpx
import openai
import pytest

import engine
from tests.engine.server.live import Server, base_profile

pytestmark = pytest.mark.slow

PROMPT = "The harbour at dawn was quiet, and the boats"


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key=server.key, timeout=60,
                       max_retries=0) as c:
        yield c


def test_completions_text_stream_and_ids(client, server):
    plain = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=12, temperature=0)
    choice = plain.choices[0]
    assert plain.object == "text_completion" and choice.finish_reason in ("length", "stop")
    assert plain.usage.completion_tokens == 12 or choice.finish_reason == "stop"
    streamed = list(client.completions.create(model="tiny", prompt=PROMPT, max_tokens=12,
                                              temperature=0, stream=True,
                                              stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in streamed if c.choices) == choice.text
    assert streamed[-1].usage.completion_tokens == plain.usage.completion_tokens
    with server.client() as c:
        ids = c.post("/tokenize", json={"prompt": PROMPT}).json()["tokens"]
    assert len(ids) == plain.usage.prompt_tokens
    by_ids = client.completions.create(model="tiny", prompt=ids, max_tokens=12, temperature=0)
    assert by_ids.choices[0].text == choice.text
    default = client.completions.create(model="tiny", prompt=PROMPT, temperature=0)
    assert default.usage.completion_tokens <= 16   # OpenAI's default max_tokens


def _stop_in(text: str) -> str:
    """A stop string that first occurs somewhere in the middle of text."""
    for k in range(len(text) // 3, len(text) - 2):
        cand = text[k:k + 2]
        if cand.strip() and text.find(cand) >= 2:
            return cand
    pytest.skip(f"no usable stop string in {text!r}")


def test_completions_stop(client):
    full = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=32,
                                     temperature=0).choices[0].text
    stop = _stop_in(full)
    want = full[:full.find(stop)]
    cut = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=32, temperature=0,
                                    stop=[stop, "never-there"])
    assert cut.choices[0].text == want and cut.choices[0].finish_reason == "stop"
    chunks = list(client.completions.create(model="tiny", prompt=PROMPT, max_tokens=32,
                                            temperature=0, stop=stop, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == want
    assert chunks[-1].choices[0].finish_reason == "stop"
    # a stop string that never occurs changes nothing
    same = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=32, temperature=0,
                                     stop="never-there")
    assert same.choices[0].text == full


def _stops_by_token(tokens: list[str]) -> dict[str, int]:
    """Stop strings that first complete at different output tokens, each with that token's
    count: the last two characters of each token's text, where they occur nowhere earlier
    (and are whole characters: a token ending inside one shows U+FFFD until the next)."""
    out: dict[str, int] = {}
    for k in range(2, len(tokens)):
        text = "".join(tokens[:k])
        cand = text[-2:]
        if cand.strip() and "\ufffd" not in cand and text.find(cand) == len(text) - 2:
            out[cand] = k
    return out


def test_stop_usage_counts_tokens_up_to_the_stop(client):
    """The engine may make a few tokens past a stop string before its cancel lands (a step
    that accepts several speculated tokens, say); the usage counts the output the client got:
    every token up to the one that completes the stop string, and its logprobs as many."""
    full = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=32, temperature=0,
                                     logprobs=1)
    tokens = full.choices[0].logprobs.tokens
    assert "".join(tokens) == full.choices[0].text
    stops = _stops_by_token(tokens)
    assert len(stops) >= 4, tokens
    for stop, upto in stops.items():
        cut = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=32,
                                        temperature=0, stop=stop, logprobs=1)
        assert cut.choices[0].finish_reason == "stop"
        assert (stop, cut.usage.completion_tokens) == (stop, upto)
        assert cut.choices[0].logprobs.tokens == tokens[:upto]
        chunks = list(client.completions.create(model="tiny", prompt=PROMPT, max_tokens=32,
                                                temperature=0, stop=stop, stream=True,
                                                stream_options={"include_usage": True}))
        assert (stop, chunks[-1].usage.completion_tokens) == (stop, upto)


def test_chat_stop(client):
    msgs = [{"role": "user", "content": "Tell me about the weather on the coast."}]
    full = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=32,
                                          temperature=0).choices[0].message.content
    stop = _stop_in(full)
    cut = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=32,
                                         temperature=0, stop=stop)
    assert cut.choices[0].message.content == full[:full.find(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_completions_seed(client):
    kw = dict(model="tiny", prompt=PROMPT, max_tokens=16, temperature=1.0)
    a = client.completions.create(seed=7, **kw).choices[0].text
    b = client.completions.create(seed=7, **kw).choices[0].text
    c = client.completions.create(seed=8, **kw).choices[0].text
    assert a == b and a != c


def test_completions_bad_prompts(server):
    with server.client() as c:
        for prompt, param in [("", "prompt"), ([], "prompt"), ([1, 10**9], "prompt[1]"),
                              ([-1], "prompt[0]"), (["a", "b"], "prompt"), ([[1], [2]], "prompt"),
                              ([True], "prompt[0]"), ([1, "a"], "prompt[1]"),
                              ([[1, "x"]], "prompt[0][1]"), (5, "prompt")]:
            r = c.post("/v1/completions", json={"model": "tiny", "prompt": prompt})
            assert r.status_code == 400, (prompt, r.text)
            assert r.json()["error"]["param"] == param, (prompt, r.text)


def test_union_errors_describe_the_value_by_its_own_kind(server):
    """A parameter of several accepted forms: the error is about the form of the value's own
    kind (a list's bad item), or names the value's kind against the forms accepted."""
    with server.client() as c:
        def message(body: dict, route: str = "/v1/completions") -> str:
            r = c.post(route, json={"model": "tiny", **body})
            assert r.status_code == 400, r.text
            return r.json()["error"]["message"]
        assert message({"prompt": 5}) == ("Invalid value for 'prompt': expected str or "
                                          "list[int] or list[str] or list[list[int]], got int")
        assert message({"prompt": ["a", "b"]}) == (
            "Invalid value for 'prompt': List should have at most 1 item after validation, "
            "not 2")
        assert message({"prompt": "x", "stop": ["a", 3]}) == (
            "Invalid value for 'stop[1]': Input should be a valid string")
        assert message({"prompt": "x", "stop": {"a": 1}}) == (
            "Invalid value for 'stop': expected str or list[str], got dict")
        assert message({"messages": [{"role": "user", "content": None}]},
                       "/v1/chat/completions") == ("Invalid value for 'messages[0].content': "
                                                   "expected str or list[TextPart], got null")
        assert message({"input": [{"role": "user", "content": 3}]}, "/v1/responses") == (
            "Invalid value for 'input[0].content': expected str or list[InputTextPart], got int")


def test_tokenize_detokenize_version(server):
    with server.client() as c:
        t = c.post("/tokenize", json={"model": "tiny", "prompt": "hello there"}).json()
        assert t["count"] == len(t["tokens"]) > 0 and t["max_model_len"] == 256
        assert c.post("/detokenize", json={"tokens": t["tokens"]}).json() == {
            "prompt": "hello there"}
        msgs = [{"role": "user", "content": "hi"}]
        chat = c.post("/tokenize", json={"messages": msgs}).json()
        r = c.post("/v1/chat/completions", json={"model": "tiny", "messages": msgs,
                                                 "max_tokens": 1})
        assert chat["count"] == r.json()["usage"]["prompt_tokens"]
        bare = c.post("/tokenize", json={"messages": msgs, "add_generation_prompt": False})
        assert bare.json()["count"] < chat["count"]
        bad = c.post("/detokenize", json={"tokens": [10**9]})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "tokens[0]"
        both = c.post("/tokenize", json={"prompt": "x", "messages": msgs})
        assert both.status_code == 400
        assert c.get("/version").json() == {"version": engine.__version__}
        assert httpx.get(server.url + "/version").status_code == 401


VLLM = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_count", "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_count", "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total"]


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(vllm:[a-z0-9_]+)\{model_name="tiny"\} (\S+)$', line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def test_vllm_metrics(client, server):
    with server.client() as c:
        before = _samples(c.get("/metrics").text)
        # a prompt_cache_key keeps the request's KV cached afterwards: usage above zero
        r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=10, temperature=0,
                                      extra_body={"prompt_cache_key": "metrics"})
        after = _samples(c.get("/metrics").text)
    for name in VLLM:
        assert name in after, name
    assert after["vllm:generation_tokens_total"] - before.get(
        "vllm:generation_tokens_total", 0) == r.usage.completion_tokens
    assert after["vllm:prompt_tokens_total"] - before.get(
        "vllm:prompt_tokens_total", 0) == r.usage.prompt_tokens
    assert after["vllm:e2e_request_latency_seconds_count"] - before.get(
        "vllm:e2e_request_latency_seconds_count", 0) == 1
    assert 0 < after["vllm:kv_cache_usage_perc"] <= 1
    assert after["vllm:num_requests_running"] == 0 and after["vllm:num_requests_waiting"] == 0


def test_unknown_parameters_strict_by_default(server):
    with server.client() as c:
        r = c.post("/v1/completions", json={"model": "tiny", "prompt": "x", "best_of": 2})
    assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_parameter"
    assert r.json()["error"]["param"] == "best_of"


def test_unknown_parameters_lenient(tiny_model, tmp_path):
    profile = {**base_profile(tiny_model), "unknown_parameters": "lenient"}
    with Server(tmp_path, profile) as s, s.client() as c:
        r = c.post("/v1/chat/completions", json={
            "model": "tiny", "max_tokens": 2, "frequency_penalty": 0, "logit_bias": {},
            "parallel_tool_calls": True, "response_format": {"type": "text"},
            "messages": [{"role": "user", "content": "hi", "colour": "red"}]})
        assert r.status_code == 200, r.text
        wrong = c.post("/v1/chat/completions", json={
            "model": "tiny", "max_tokens": "2", "metadata_x": 1,
            "messages": [{"role": "user", "content": "hi"}]})
        # lenient ignores what it does not know, never what it knows but is wrong
        assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "max_tokens"
        # nor what asks for something this server does not do: that would change the answer
        for name, value in [("response_format", {"type": "json_object"}), ("echo", True),
                            ("logit_bias", {"5": 1}), ("tools", [{"type": "function"}])]:
            refused = c.post("/v1/chat/completions", json={
                "model": "tiny", "max_tokens": 2, name: value,
                "messages": [{"role": "user", "content": "hi"}]})
            assert refused.status_code == 400 and refused.json()["error"]["param"] == name
    ignored = [e for e in s.log() if e["event"] == "parameters_ignored"]
    assert ignored[0]["route"] == "/v1/chat/completions"
    # frequency_penalty and response_format are known parameters now: not ignored
    assert sorted(ignored[0]["params"]) == ["logit_bias", "messages[0].colour",
                                            "parallel_tool_calls"]


def test_openapi_document(server):
    with server.client() as c:
        doc = c.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/tokenize",
                 "/detokenize", "/version", "/v1/models"):
        assert path in doc["paths"], path
    ref = doc["paths"]["/v1/completions"]["post"]["requestBody"]["content"][
        "application/json"]["schema"]["$ref"]
    body = doc["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert {"model", "prompt", "stop", "max_tokens"} <= set(body["properties"])
    assert body["additionalProperties"] is False and body["required"] == ["model", "prompt"]
    assert httpx.get(server.url + "/openapi.json").status_code == 401
