"""SIGTERM: in-flight work finishes, sessions are flushed, the shutdown record says so."""
import threading

import httpx
import pytest

from tests.engine.server.live import Server, base_profile

pytestmark = pytest.mark.slow


def test_sigterm_drains_and_flushes(tiny_model, tmp_path):
    ck = tmp_path / "ck"
    prof = {**base_profile(tiny_model), "max_context": 512,
            "checkpoints": {"directory": str(ck), "auto_save_min_tokens": 64}}
    s = Server(tmp_path / "srv", prof).start()
    try:
        with s.client() as c:
            short = c.post("/v1/chat/completions", json={
                "model": "tiny", "messages": [{"role": "user", "content": "short one"}],
                "max_tokens": 8, "temperature": 0, "prompt_cache_key": "short"})
            assert short.status_code == 200
            # below the threshold: not saved automatically
            assert c.get("/v1/engine/checkpoints/short").json()["status"] == "missing"
        first_bytes = threading.Event()
        body = []

        def stream():
            with httpx.Client(base_url=s.url, headers=s.headers, timeout=120) as c:
                with c.stream("POST", "/v1/chat/completions", json={
                        "model": "tiny", "messages": [{"role": "user", "content": "long"}],
                        "max_tokens": 300, "temperature": 0, "stream": True,
                        "prompt_cache_key": "long"}) as r:
                    for line in r.iter_lines():
                        first_bytes.set()
                        body.append(line)

        t = threading.Thread(target=stream)
        t.start()
        assert first_bytes.wait(60)
        code = s.stop(timeout=60)
        t.join(60)
    finally:
        s.stop()
    assert code == 0
    assert [ln for ln in body if ln][-1] == "data: [DONE]"
    log = s.log()
    done = [r for r in log if r["event"] == "request_done"]
    assert [d["checkpoint_saved"] for d in done] == [False, True]   # "long" crossed 64 tokens
    shut = [r for r in log if r["event"] == "shutdown"]
    assert len(shut) == 1
    assert shut[0]["complete"] is True and shut[0]["drained_complete"] == 1
    assert shut[0]["saved"] == 1 and shut[0]["completed"] == 2 and shut[0]["cancelled"] == 0
    sessions = [d for d in ck.iterdir() if (d / "current").is_file()]
    assert len(sessions) == 2
