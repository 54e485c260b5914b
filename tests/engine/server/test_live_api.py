"""The OpenAI-compatible routes against a live server, through the official openai client."""
import json

import openai
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key=server.key, timeout=60,
                       max_retries=0) as c:
        yield c


MSGS = [{"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Tell me about the weather on the coast."}]


def test_models(client):
    assert [m.id for m in client.models.list().data] == ["tiny"]


def test_chat_stream_equals_nonstream(client):
    plain = client.chat.completions.create(model="tiny", messages=MSGS, max_tokens=24,
                                           temperature=0)
    text = plain.choices[0].message.content
    assert plain.usage.completion_tokens == 24 or plain.choices[0].finish_reason == "stop"
    assert plain.usage.prompt_tokens > 10
    chunks = list(client.chat.completions.create(
        model="tiny", messages=MSGS, max_tokens=24, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == \
        plain.usage.completion_tokens
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == \
        plain.choices[0].finish_reason


def test_seeded_sampling_is_reproducible(client):
    kw = dict(model="tiny", messages=MSGS, max_tokens=16, temperature=1.0, seed=7)
    a = client.chat.completions.create(**kw).choices[0].message.content
    b = client.chat.completions.create(**kw).choices[0].message.content
    c = client.chat.completions.create(**{**kw, "seed": 8}).choices[0].message.content
    assert a == b and a != c


def test_chat_sse_is_terminated_by_done(server):
    body = {"model": "tiny", "messages": MSGS, "max_tokens": 4, "temperature": 0,
            "stream": True}
    with server.client() as c:
        r = c.post("/v1/chat/completions", json=body)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in r.text.split("\n\n") if f]
    assert frames[-1] == "data: [DONE]"
    assert all(f.startswith("data: ") for f in frames)


def test_responses_stream_equals_nonstream(client):
    plain = client.responses.create(model="tiny", input="Hello there, who are you?",
                                    instructions="Answer briefly.", max_output_tokens=20,
                                    temperature=0)
    assert plain.status in ("completed", "incomplete")
    events = list(client.responses.create(model="tiny", input="Hello there, who are you?",
                                          instructions="Answer briefly.",
                                          max_output_tokens=20, temperature=0, stream=True))
    streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert streamed == plain.output_text
    final = events[-1].response
    assert final.usage.output_tokens == plain.usage.output_tokens


def test_responses_event_sequence(server):
    body = {"model": "tiny", "input": "Hello there, who are you?", "max_output_tokens": 6,
            "temperature": 0, "stream": True, "store": False}
    with server.client() as c:
        r = c.post("/v1/responses", json=body)
    events = []
    for frame in r.text.strip().split("\n\n"):
        name_line, data_line = frame.split("\n")
        payload = json.loads(data_line[len("data: "):])
        assert name_line == "event: " + payload["type"]
        events.append(payload)
    types = [e["type"] for e in events]
    n_delta = types.count("response.output_text.delta")
    # how many deltas depends on the random tiny model (some ids decode to nothing)
    head = ["response.created", "response.in_progress", "response.output_item.added",
            "response.content_part.added"]
    tail = ["response.output_text.done", "response.content_part.done",
            "response.output_item.done"]
    assert types[:4] == head and types[4:4 + n_delta] == ["response.output_text.delta"] * n_delta
    assert types[4 + n_delta:-1] == tail
    assert types[-1] in ("response.completed", "response.incomplete")
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    done_text = events[4 + n_delta]["text"]
    assert done_text == "".join(e["delta"] for e in events[4:4 + n_delta])


def test_previous_response_chain_and_delete(client):
    first = client.responses.create(model="tiny", input="My name is Ada.",
                                    max_output_tokens=8, temperature=0)
    second = client.responses.create(model="tiny", input="What is my name?",
                                     previous_response_id=first.id, max_output_tokens=8,
                                     temperature=0)
    alone = client.responses.create(model="tiny", input="What is my name?",
                                    max_output_tokens=8, temperature=0, store=False)
    assert second.usage.input_tokens > alone.usage.input_tokens
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    items = client.responses.input_items.list(second.id)
    texts = [i.content[0].text for i in items.data]
    assert texts[0] == "My name is Ada." and texts[-1] == "What is my name?"
    assert client.responses.retrieve(second.id).id == second.id
    # deleting the parent leaves the child whole and usable
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    third = client.responses.create(model="tiny", input="And again?",
                                    previous_response_id=second.id, max_output_tokens=4,
                                    temperature=0)
    assert third.usage.input_tokens > second.usage.input_tokens
    # a store=False response cannot be continued
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model="tiny", input="x", previous_response_id=alone.id)
    assert e.value.body["code"] == "previous_response_not_found"


def test_prompt_cache_key_reports_reused_tokens(client):
    msgs = [{"role": "user", "content": "A long shared preamble about tides and harbours. " * 3}]
    first = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=8,
                                           temperature=0, prompt_cache_key="cache-test")
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    follow = msgs + [{"role": "assistant", "content": first.choices[0].message.content},
                     {"role": "user", "content": "Go on."}]
    second = client.chat.completions.create(model="tiny", messages=follow, max_tokens=8,
                                            temperature=0, prompt_cache_key="cache-test")
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert first.usage.prompt_tokens <= cached < second.usage.prompt_tokens
    r = client.responses.create(model="tiny", input="A different thing", max_output_tokens=4,
                                temperature=0, prompt_cache_key="cache-resp")
    assert r.usage.input_tokens_details.cached_tokens == 0


def test_status_and_metrics(server, client):
    client.chat.completions.create(model="tiny", messages=MSGS, max_tokens=4, temperature=0)
    with server.client() as c:
        st = c.get("/v1/engine/status").json()
        metrics = c.get("/metrics").text
    ident = st["identity"]
    assert len(ident["model_sha256"]) == 64 and len(ident["profile_sha256"]) == 64
    assert len(ident["package_sha256"]) == 64 and ident["engine_version"]
    adm = st["runtime"]["admission"]
    assert st["runtime"]["memory"]["process_max_rss_bytes"] > adm["weights_bytes"]
    assert adm["admitted"] and adm["kv_capacity_tokens"] == 4096
    assert adm["kv_bytes"] == adm["kv_capacity_tokens"] * adm["kv_bytes_per_token"]
    assert st["scheduler"]["active"] == 0 and st["cache"]["blocks_total"] == 4096 // 16
    assert 'engine_requests_total{route="/v1/chat/completions",status="200"}' in metrics
    assert "engine_time_to_first_token_seconds_count" in metrics
    assert "engine_kv_pool_blocks_total 256.0" in metrics
    attempted = [ln for ln in metrics.splitlines() if ln.startswith(
        'engine_spec_decode_position_tokens_total{kind="attempted",position="0"}')]
    assert attempted and float(attempted[0].split()[-1]) > 0
    assert st["speculative"]["backend"] == "ngram"
    assert sum(st["speculative"]["counters"]["attempted"]) > 0
    # On the CPU: no decode graphs, so no persistent step and no reason asked of one.
    assert st["decode"] == {"cuda_graphs": False, "cuda_graph_error": None, "persistent_decode": False,
                            "persistent_decode_off": None}
    assert st["warmup"] is None          # the prefill warm-up at start runs on CUDA only by default
    start = [r for r in server.log() if r["event"] == "server_start"][0]
    assert start["admission"] == adm and start["identity"] == ident


def test_request_log_has_digests_only(server, client):
    secret = "a very particular sentence that must not be logged"
    client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": secret}],
                                   max_tokens=4, temperature=0)
    text = server.log_path.read_text()
    assert secret not in text
    done = [r for r in server.log() if r["event"] == "request_done"][-1]
    assert done["prompt_tokens"] > 0 and done["completion_tokens"] == 4
    for k in ("queue_s", "ttft_s", "prefill_s", "decode_s", "total_s", "output_digest"):
        assert k in done
    assert done["total_s"] >= done["ttft_s"] >= 0
