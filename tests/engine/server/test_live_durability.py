"""Checkpoints across a SIGTERM and a restart: restored, token-identical, tamper-evident."""
import hashlib

import pytest

from engine.server.tenancy import session_key, tenant_id
from tests.engine.server.live import KEY, Server, base_profile

pytestmark = pytest.mark.slow

FIRST = [{"role": "user", "content": "Tell me about the weather on the coast."}]


def _chat(c, messages, key=None, **kw):
    body = {"model": "tiny", "messages": messages, "max_tokens": 16, "temperature": 1.0,
            "seed": 11, **kw}
    if key:
        body["prompt_cache_key"] = key
    r = c.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    j = r.json()
    return j["choices"][0]["message"]["content"], j["usage"]


def _gen_dir(ckdir, session, key=KEY):
    # checkpoints are kept per tenant: the folder is named by the tenant-scoped session key
    scoped = session_key(tenant_id(key), session)
    sdir = ckdir / hashlib.sha256(scoped.encode()).hexdigest()
    return sdir / (sdir / "current").read_text()


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def profile(tiny_model, tmp_path_factory):
    ck = tmp_path_factory.mktemp("ck")
    p = {**base_profile(tiny_model),
         "checkpoints": {"directory": str(ck), "quota_mib": 64, "require_origin_auth": True,
                         "auto_save_min_tokens": 100000}}
    return p, ck


def test_save_stop_restart_continue(profile, tmp_path):
    prof, ck = profile
    with Server(tmp_path / "a", prof) as a, a.client() as c:
        text1, _ = _chat(c, FIRST, key="conv")
        _chat(c, FIRST, key="other")
        for s in ("conv", "other"):
            r = c.post("/v1/engine/checkpoints", json={"session": s})
            assert r.status_code == 200 and r.json()["status"] == "available", r.text
        assert c.post("/v1/engine/checkpoints", json={"session": "never"}).json()[
            "error"]["code"] == "session_not_found"
    assert a.proc.returncode == 0
    shutdown = [r for r in a.log() if r["event"] == "shutdown"]
    assert len(shutdown) == 1 and shutdown[0]["complete"] is True
    assert shutdown[0]["completed"] == 2 and shutdown[0]["refused"] == 0

    follow = FIRST + [{"role": "assistant", "content": text1},
                      {"role": "user", "content": "And tomorrow?"}]
    _flip(_gen_dir(ck, "other") / "tensors.safetensors")
    with Server(tmp_path / "b", prof) as b, b.client() as c:
        assert c.get("/v1/engine/checkpoints/conv").json()["status"] == "available"
        assert c.get("/v1/engine/checkpoints/other").json()["status"] == "corrupt"
        assert c.get("/v1/engine/checkpoints/none").json()["status"] == "missing"
        warm, wu = _chat(c, follow, key="conv")
        cold, cu = _chat(c, follow)
        assert wu["prompt_tokens_details"]["cached_tokens"] > 0
        assert cu["prompt_tokens_details"]["cached_tokens"] == 0
        assert warm == cold and wu["completion_tokens"] == cu["completion_tokens"]
        # the tampered checkpoint is refused; the request still succeeds by full prefill
        tampered, tu = _chat(c, follow, key="other")
        assert tu["prompt_tokens_details"]["cached_tokens"] == 0 and tampered == cold
    starts = [r for r in b.log() if r["event"] == "request_start"]
    assert [r["checkpoint"] for r in starts] == ["restored", None, "corrupt"]
    done = [r for r in b.log() if r["event"] == "request_done"]
    assert done[0]["output_digest"] == done[1]["output_digest"]


def test_other_origin_key_is_incompatible(profile, tmp_path):
    prof, ck = profile
    with Server(tmp_path / "a", prof) as a, a.client() as c:
        _chat(c, FIRST, key="keyed")
        assert c.post("/v1/engine/checkpoints", json={"session": "keyed"}).status_code == 200
    # The same caller (same key, so the same tenant) on a server whose origin key, the first
    # key of its file, is another one.
    with Server(tmp_path / "b", prof, key="a-different-key", extra_keys=(KEY,)) as b, \
            b.client(headers={"Authorization": f"Bearer {KEY}"}) as c:
        st = c.get("/v1/engine/checkpoints/keyed").json()
        assert st["status"] == "incompatible"
        _, usage = _chat(c, FIRST + [{"role": "user", "content": "more"}], key="keyed")
        assert usage["prompt_tokens_details"]["cached_tokens"] == 0
    assert c.is_closed
