"""logprobs / top_logprobs, penalties and response_format through the running server, with
the official openai client; log-probabilities checked against transformers in float32."""
import pytest
import torch
import transformers

from engine.model.tokenizer import Tokenizer

pytestmark = pytest.mark.slow

MESSAGES = [{"role": "user", "content": "Tell me about the harbour at dawn."}]
PROMPT = "The harbour at dawn was quiet, and the boats"
N = 8
ATOL = 1e-4          # fp32 engine vs fp32 transformers


@pytest.fixture(scope="module")
def client(server):
    import openai
    with openai.OpenAI(base_url=server.url + "/v1", api_key=server.key, timeout=60,
                       max_retries=0) as c:
        yield c


@pytest.fixture(scope="module")
def reference(tiny_model):
    """Greedy continuation and per-step log-softmax from transformers, float32."""
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tiny_model),
                                                              dtype=torch.float32).eval()
    tok = Tokenizer(tiny_model)

    def run(ids: list[int], n: int = N):
        seq, rows = list(ids), []
        with torch.no_grad():
            for _ in range(n):
                lp = torch.log_softmax(model(torch.tensor([seq])).logits[0, -1].double(), -1)
                rows.append(lp)
                seq.append(int(torch.argmax(lp)))
        return seq[len(ids):], rows
    return run, tok


def _ids(server, **body) -> list[int]:
    with server.client() as c:
        return c.post("/tokenize", json=body).json()["tokens"]


def test_chat_logprobs_match_float32_reference(client, server, reference):
    run, tok = reference
    want, rows = run(_ids(server, messages=MESSAGES))
    r = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=N,
                                       temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert r.choices[0].finish_reason == "length" and len(content) == N
    assert [c.token for c in content] == [tok.decode([t]) for t in want]
    assert "".join(c.token for c in content) == r.choices[0].message.content
    for c, t, row in zip(content, want, rows):
        assert c.logprob == pytest.approx(float(row[t]), abs=ATOL)
        assert c.bytes == list(c.token.encode("utf-8"))
        vals, ids = torch.topk(row, 3)
        assert [x.logprob for x in c.top_logprobs] == pytest.approx(vals.tolist(), abs=ATOL)
        assert c.top_logprobs[0].token == tok.decode([int(ids[0])]) == c.token
    streamed = list(client.chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=N, temperature=0, logprobs=True,
        top_logprobs=3, stream=True))
    got = [x for ch in streamed if ch.choices and ch.choices[0].logprobs
           for x in ch.choices[0].logprobs.content]
    assert [(x.token, x.logprob) for x in got] == [(c.token, c.logprob) for c in content]
    plain = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=N,
                                           temperature=0)
    assert plain.choices[0].logprobs is None
    assert plain.choices[0].message.content == r.choices[0].message.content


def test_completions_legacy_logprobs(client, server, reference):
    run, tok = reference
    want, rows = run(_ids(server, prompt=PROMPT))
    r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=N, temperature=0,
                                  logprobs=2)
    lp = r.choices[0].logprobs
    assert lp.tokens == [tok.decode([t]) for t in want]
    assert lp.token_logprobs == pytest.approx([float(row[t]) for t, row in zip(want, rows)],
                                              abs=ATOL)
    assert all(len(m) <= 2 for m in lp.top_logprobs)
    assert lp.text_offset == [sum(len(s) for s in lp.tokens[:i]) for i in range(N)]
    for m, t, row in zip(lp.top_logprobs, want, rows):
        assert m[tok.decode([t])] == pytest.approx(float(row[t]), abs=ATOL)
    chunks = list(client.completions.create(model="tiny", prompt=PROMPT, max_tokens=N,
                                            temperature=0, logprobs=2, stream=True))
    toks = [t for c in chunks if c.choices and c.choices[0].logprobs
            for t in c.choices[0].logprobs.tokens]
    offs = [o for c in chunks if c.choices and c.choices[0].logprobs
            for o in c.choices[0].logprobs.text_offset]
    assert toks == lp.tokens and offs == lp.text_offset


def test_penalties(client):
    def text(**kw):
        return client.completions.create(model="tiny", prompt=PROMPT, max_tokens=24,
                                         temperature=0, **kw).choices[0].text
    plain = text()
    assert text(presence_penalty=0, frequency_penalty=0.0,
                extra_body={"repetition_penalty": 1.0}) == plain
    assert text(frequency_penalty=2.0) != plain
    assert text(extra_body={"repetition_penalty": 1.8}) != plain
    for name, value in [("frequency_penalty", 2.5), ("presence_penalty", -3),
                        ("repetition_penalty", 0)]:
        with pytest.raises(Exception) as e:
            client.completions.create(model="tiny", prompt=PROMPT, max_tokens=2,
                                      extra_body={name: value})
        assert e.value.status_code == 400 and e.value.body["param"] == name


def test_response_format_and_logprob_bounds(server):
    base = {"model": "tiny", "max_tokens": 2, "messages": MESSAGES}
    with server.client() as c:
        assert c.post("/v1/chat/completions",
                      json={**base, "response_format": {"type": "text"}}).status_code == 200
        for fmt in ({"type": "json_object"},
                    {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
                    {"type": "xml"}):
            for route, body in (("/v1/chat/completions", base),
                                ("/v1/completions", {"model": "tiny", "prompt": "x",
                                                     "max_tokens": 2})):
                r = c.post(route, json={**body, "response_format": fmt})
                err = r.json()["error"]
                assert r.status_code == 400 and err["param"] == "response_format", r.text
                assert fmt["type"] in err["message"] or "text" in err["message"]
        r = c.post("/v1/chat/completions", json={**base, "top_logprobs": 2})
        assert r.status_code == 400 and r.json()["error"]["param"] == "top_logprobs"
        r = c.post("/v1/chat/completions", json={**base, "logprobs": True, "top_logprobs": 21})
        assert r.status_code == 400 and r.json()["error"]["param"] == "top_logprobs"
        r = c.post("/v1/completions", json={"model": "tiny", "prompt": "x", "logprobs": 21})
        assert r.status_code == 400 and r.json()["error"]["param"] == "logprobs"
