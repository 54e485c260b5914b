"""Admission under load: max_concurrency honoured, a full queue gives 429, a long wait 503."""
import threading
import time

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


class _Running:
    """A long streamed request. The server answers a stream's headers only once the request
    holds the slot and has its first token, so `started` marks it running, as the engine saw it:
    the requests after it are ordered by what the engine saw, not by when threads ran."""

    def __init__(self, server, body):
        self.started, self.status, self.chunks = threading.Event(), None, 0
        self._thread = threading.Thread(target=self._run, args=(server, {**body, "stream": True}))
        self._thread.start()
        assert self.started.wait(120), "the long request never started"

    def _run(self, server, body):
        with httpx.Client(base_url=server.url, headers=server.headers, timeout=120) as c:
            with c.stream("POST", "/v1/chat/completions", json=body) as r:
                self.status = r.status_code
                self.started.set()
                self.chunks = sum(1 for line in r.iter_lines() if line.startswith("data: "))

    def join(self) -> int:
        self._thread.join(180)
        return self.status


class _Posted:
    """A request posted from a thread; join() gives its response."""

    def __init__(self, server, body):
        self.response = None
        self._thread = threading.Thread(target=self._post, args=(server, body))
        self._thread.start()

    def _post(self, server, body):
        with httpx.Client(base_url=server.url, headers=server.headers, timeout=120) as c:
            self.response = c.post("/v1/chat/completions", json=body)

    def join(self) -> httpx.Response:
        self._thread.join(180)
        return self.response


def _events(server, event):
    return [r for r in server.log() if r["event"] == event]


def _profile(tiny_model, pending_timeout_ms):
    # One slot, one place in the queue; the long request (480 tokens) holds the slot while the
    # others arrive.
    return {**base_profile(tiny_model), "max_concurrency": 1, "max_pending_requests": 1,
            "pending_timeout_ms": pending_timeout_ms, "max_context": 512}


def test_a_full_queue_answers_429(tiny_model, tmp_path):
    # A long pending timeout keeps the queued request in its place, so the third meets a full
    # queue whenever it comes while the first still runs.
    with Server(tmp_path, _profile(tiny_model, 60000)) as s:
        running = _Running(s, _body(0, 480))
        queued = _Posted(s, _body(1, 8))
        deadline = time.monotonic() + 60
        while len(_events(s, "request_start")) < 2:    # written once the submit has queued it
            assert time.monotonic() < deadline, "the second request was never queued"
            time.sleep(0.01)
        with s.client() as c:
            refused = c.post("/v1/chat/completions", json=_body(2, 8))
        assert running.join() == 200 and running.chunks > 400
        assert queued.join().status_code == 200
        done = {r["id"]: r for r in _events(s, "request_done")}
        first = next(r for r in done.values() if r["completion_tokens"] == 480)
        rejected = _events(s, "request_rejected")
        assert [r["code"] for r in rejected] == ["server_overloaded"], rejected
        # the refusal came while the first request ran: the test measured what it meant to
        assert rejected[0]["ts"] < first["finished_at"]
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "server_overloaded"
        with s.client() as c:
            metrics = c.get("/metrics").text
        assert 'route="/v1/chat/completions",status="429"' in metrics


def test_a_long_wait_for_a_slot_answers_503(tiny_model, tmp_path):
    # A short limit: the tiny model makes 480 tokens fast enough on the 2-core VM that a limit of
    # 300 ms could outlast the rest of the long request, and the waiting one was then served.
    with Server(tmp_path, _profile(tiny_model, 50)) as s:
        running = _Running(s, _body(0, 480))
        with s.client() as c:
            waited = c.post("/v1/chat/completions", json=_body(1, 8))
        assert running.join() == 200
        assert waited.status_code == 503, waited.text
        assert waited.json()["error"]["code"] == "request_queue_timeout"
        assert "(limit 0.05s)" in waited.json()["error"]["message"]
        with s.client() as c:
            metrics = c.get("/metrics").text
        assert 'route="/v1/chat/completions",status="503"' in metrics
    assert [r["code"] for r in _events(s, "request_rejected")] == ["request_queue_timeout"]
