"""Small server parts without an engine: store, SSE, auth, log, metrics, admission arithmetic."""
import json

import pytest

from engine.server.admission import decide
from engine.server.auth import Authenticator, KeyFileError, read_keys
from engine.server.errors import APIError
from engine.server.metrics import ServerMetrics
from engine.server.request_log import RequestLog, read_log
from engine.server.response_store import ResponseStore, StoredResponse
from engine.server.sse import DONE, ResponsesEventWriter, sse_data


def _entry(n, owner="t1"):
    return StoredResponse(response={"id": n, "pad": "x" * 100}, input_items=[], owner=owner)


def test_store_bounds_by_count_and_bytes():
    s = ResponseStore(max_responses=2, max_bytes=10_000)
    for i in range(3):
        s.put(f"r{i}", _entry(i))
    assert s.get("r0", "t1") is None and s.get("r2", "t1") is not None
    assert s.stats()["evicted"] == 1
    small = ResponseStore(max_responses=100, max_bytes=300)
    for i in range(5):
        small.put(f"r{i}", _entry(i))
    assert small.stats()["bytes"] <= 300 and small.get("r4", "t1") is not None
    assert small.delete("r4", "t1") and not small.delete("r4", "t1")


def test_store_entries_belong_to_their_tenant():
    s = ResponseStore(max_responses=10, max_bytes=10_000)
    s.put("r1", _entry(1, owner="t1"))
    assert s.get("r1", "t2") is None
    assert s.delete("r1", "t2") is False
    assert s.get("r1", "t1").response["id"] == 1 and s.stats()["responses"] == 1


def test_sse_framing():
    assert sse_data({"a": 1}) == b'data: {"a":1}\n\n'
    assert DONE == b"data: [DONE]\n\n"
    w = ResponsesEventWriter()
    first, second = w("response.created", response={}), w("response.completed", response={})
    assert first.startswith(b"event: response.created\ndata: ")
    assert json.loads(second.split(b"data: ")[1])["sequence_number"] == 1


def test_auth(tmp_path):
    f = tmp_path / "keys"
    f.write_text("# comment\n\nsecret-1\n")
    f.chmod(0o600)
    a = Authenticator(read_keys(f))
    assert a.check("Bearer secret-1")
    assert not a.check("Bearer secret-2") and not a.check(None) and not a.check("secret-1")
    assert Authenticator([]).check(None)
    (tmp_path / "empty").write_text("\n# nothing\n")
    (tmp_path / "empty").chmod(0o600)
    with pytest.raises(KeyFileError, match="no key"):
        read_keys(tmp_path / "empty")


def test_error_shape():
    e = APIError("unknown_parameter", "Unrecognized parameter: foo", "foo")
    assert e.status == 400
    assert e.body() == {"error": {"message": "Unrecognized parameter: foo",
                                  "type": "invalid_request_error", "param": "foo",
                                  "code": "unknown_parameter"}}
    with pytest.raises(ValueError):
        APIError("made_up", "x")


def test_request_log(tmp_path):
    log = RequestLog(tmp_path / "r.jsonl")
    log.write("request_start", id="a")
    log.write("request_done", id="a", total_s=0.5)
    with pytest.raises(ValueError):
        log.write("nonsense")
    log.close()
    recs = read_log(tmp_path / "r.jsonl")
    assert [r["event"] for r in recs] == ["request_start", "request_done"]


def test_metrics_private_registry():
    m = ServerMetrics(lambda: {"pool": {"blocks_used": 3, "blocks_total": 10}})
    m.requests.labels(route="/x", status="200").inc()
    m.observe_tokens(0.01, [0.002, 0.003])
    m.observe_spec({"attempted": [4, 2], "accepted": [3, 0]})
    text = m.render().decode()
    assert 'engine_requests_total{route="/x",status="200"} 1.0' in text
    assert "engine_kv_pool_blocks_used 3.0" in text
    assert 'engine_spec_decode_position_tokens_total{kind="accepted",position="0"} 3.0' in text
    assert 'kind="accepted",position="1"' not in text
    assert "engine_inter_token_latency_seconds_count 2.0" in text
    # a second instance does not collide: the registry is not the global one
    ServerMetrics()


def test_admission_arithmetic():
    kw = dict(device="cpu", free_source="host_memory_mib", weights=1000, per_token=10,
              headroom_bytes=500, block_size=16, min_tokens=32)
    fixed = decide(free_bytes=2000, kv_capacity=50, **kw)
    assert fixed.admitted and fixed.kv_bytes == 500
    assert not decide(free_bytes=1999, kv_capacity=50, **kw).admitted
    auto = decide(free_bytes=2000, kv_capacity="auto", **kw)
    assert auto.kv_capacity_tokens == 48 and auto.admitted       # 500 B spare: 3 blocks of 160 B
    assert not decide(free_bytes=1600, kv_capacity="auto", **kw).admitted
    assert "weights 1000 B" in fixed.message() and "headroom 500 B" in fixed.message()


def _stop_run(stops, deltas):
    from engine.server.stop_strings import StopStrings
    s = StopStrings(stops)
    shown = [s.feed(d) for d in deltas] + [s.flush()]
    return shown, s.hit


def test_stop_strings_hold_back_only_possible_starts():
    assert _stop_run(["END"], ["abc E", "N", "D more"]) == (["abc ", "", "", ""], True)
    # "EN" was held back; when it does not become "END" it is released whole
    assert _stop_run(["END"], ["abc E", "N", "x"]) == (["abc ", "", "ENx", ""], False)
    assert _stop_run(["\n\n", "stop"], ["a\n", "b st", "op!"]) == (["a", "\nb ", "", ""], True)
    assert _stop_run(["zz", "y"], ["xyzz"]) == (["x", ""], True)   # the earliest stop wins
    assert _stop_run(["END"], ["abc E"]) == (["abc ", "E"], False)  # held text flushed at end


def test_json_body_limits():
    from engine.server.json_body import MAX_DEPTH, BodyError, decode_json_body
    assert decode_json_body(b'{"a": [1, {"b": "\\ud83d\\ude00"}]}') == {
        "a": [1, {"b": "\U0001f600"}]}   # a surrogate pair is one character: accepted
    # the body and MAX_DEPTH - 1 arrays inside it: at the limit
    ok = decode_json_body(b'{"a":' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}")
    depth, inner = 1, ok
    while isinstance(inner, (dict, list)) and inner:
        inner, depth = (inner["a"] if isinstance(inner, dict) else inner[0]), depth + 1
    assert depth == MAX_DEPTH
    deeper = b'{"a":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}"
    for body, param in [(deeper, "a" + "[0]" * (MAX_DEPTH - 1)),
                        (b'{"a": [0, "\\ud800"]}', "a[1]"), (b'{"\\udfff": 1}', None),
                        (b"", None), (b"[]", None), (b"\xff", None),
                        (b"[" * 200_000 + b"]" * 200_000, None)]:
        with pytest.raises(BodyError) as e:
            decode_json_body(body)
        assert e.value.param == param, body[:40]


def test_gate_answers_a_bug_with_500_and_connection_close():
    # The gate alone in front of a route with a bug; no engine is needed to exercise it.
    import asyncio
    from types import SimpleNamespace

    import httpx

    from engine.server.gate import Gate

    async def buggy(scope, receive, send):
        raise KeyError("a bug")

    log = RequestLog(None)
    written = []
    log.write = lambda event, **f: written.append((event, f)) or {}
    state = SimpleNamespace(auth=Authenticator([]), metrics=ServerMetrics(), log=log)

    async def call():
        transport = httpx.ASGITransport(app=Gate(buggy, state))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await c.post("/v1/chat/completions", json={})

    r = asyncio.run(call())
    assert r.status_code == 500 and r.headers["connection"] == "close"
    assert r.json()["error"]["code"] == "internal_error" and "KeyError" in r.json()["error"][
        "message"]
    assert written == [("request_error", {"route": "/v1/chat/completions",
                                          "reason": "KeyError"})]
    assert 'engine_requests_total{route="unmatched",status="500"} 1.0' in \
        state.metrics.render().decode()


def test_admission_keeps_memory_for_a_prefill_pass(tmp_path):
    """The headroom is the profile's plus one prefill pass at the profile's chunk ("auto": the
    device's default, on the CPU the whole context), and a fixed KV capacity that fits only
    without that pass is refused, naming it."""
    from engine.model.config import ModelConfig
    from engine.model.tiny import make_tiny_model
    from engine.server.admission import MIB, AdmissionRefused, admit
    from engine.server.profile import DEFAULTS
    model = make_tiny_model(tmp_path / "tiny", "llama", seed=0)
    cfg = ModelConfig.from_dir(model)
    profile = {**DEFAULTS, "model": {"path": str(model)}, "device": "cpu", "dtype": "float32",
               "max_context": 256, "kv_capacity": 512, "host_memory_mib": 64, "admission_headroom_mib": 1}
    assert DEFAULTS["prefill_chunk"] == "auto"
    d = admit(profile)
    assert d.prefill_chunk == 256 and d.prefill_bytes == cfg.prefill_pass_bytes(256, 256, 4, 4)
    assert d.headroom_bytes == MIB + d.prefill_bytes
    assert f"of which a 256-token prefill pass {d.prefill_bytes} B" in d.message()
    small = admit({**profile, "prefill_chunk": 32})
    assert small.prefill_chunk == 32 and small.prefill_bytes == cfg.prefill_pass_bytes(32, 256, 4, 4)
    assert small.prefill_bytes < d.prefill_bytes
    # a fixed capacity that leaves room for the profile's headroom but not for the pass: refused
    free = 64 * MIB
    tokens = (free - d.weights_bytes - MIB - d.prefill_bytes // 2) // d.kv_bytes_per_token
    assert d.weights_bytes + tokens * d.kv_bytes_per_token + MIB < free
    with pytest.raises(AdmissionRefused, match="prefill pass") as refused:
        admit({**profile, "kv_capacity": tokens})
    assert not refused.value.decision.admitted and refused.value.decision.kv_capacity_tokens == tokens
