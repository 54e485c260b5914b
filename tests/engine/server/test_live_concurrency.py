"""Admission under load: max_concurrency honoured, a full queue gives 429, a long wait 503."""
import threading

import httpx
import pytest

from tests.engine.server.live import Server, base_profile

pytestmark = pytest.mark.slow


def _post_all(server, bodies):
    results = [None] * len(bodies)
    barrier = threading.Barrier(len(bodies))

    def one(i):
        with httpx.Client(base_url=server.url, headers=server.headers, timeout=120) as c:
            barrier.wait()
            results[i] = c.post("/v1/chat/completions", json=bodies[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    return results


def _body(i, n):
    return {"model": "tiny", "messages": [{"role": "user", "content": f"request number {i}"}],
            "max_tokens": n, "temperature": 0}


def test_two_at_a_time(tiny_model, tmp_path):
    prof = {**base_profile(tiny_model), "max_concurrency": 2}
    with Server(tmp_path, prof) as s:
        res = _post_all(s, [_body(i, 64) for i in range(4)])
        assert [r.status_code for r in res] == [200] * 4
    done = [r for r in s.log() if r["event"] == "request_done"]
    assert len(done) == 4
    # engine-side intervals; 20 ms of slack for the wall/engine clock offset per request
    edges = sorted([(r["admitted_at"], 1) for r in done]
                   + [(r["engine_finished_at"] - 0.02, -1) for r in done],
                   key=lambda e: (e[0], e[1]))
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert peak == 2
    waited = sorted(r["queue_s"] for r in done)
    # two ran at once; the other two waited for a slot, at least as long as a decode
    assert waited[-1] > 0 and waited[-2] > 0
    assert min(waited[-2:]) >= 0.5 * min(r["engine_run_s"] for r in done)


def test_full_queue_429_and_pending_timeout_503(tiny_model, tmp_path):
    prof = {**base_profile(tiny_model), "max_concurrency": 1, "max_pending_requests": 1,
            "pending_timeout_ms": 300, "max_context": 512}
    with Server(tmp_path, prof) as s:
        res = _post_all(s, [_body(i, 400) for i in range(3)])
        codes = sorted(r.status_code for r in res)
        errs = {r.json()["error"]["code"] for r in res if r.status_code != 200}
        assert codes == [200, 429, 503], [r.text for r in res]
        assert errs == {"server_overloaded", "request_queue_timeout"}
        with s.client() as c:
            metrics = c.get("/metrics").text
        assert 'route="/v1/chat/completions",status="429"' in metrics
        assert 'route="/v1/chat/completions",status="503"' in metrics
    rejected = [r["code"] for r in s.log() if r["event"] == "request_rejected"]
    assert sorted(rejected) == ["request_queue_timeout", "server_overloaded"]
