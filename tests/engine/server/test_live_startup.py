"""Startup admission and profile errors: refused with exit code 2 and the figures."""
import json
import re
import subprocess
import sys

import pytest

from tests.engine.server.live import base_profile, free_port

pytestmark = pytest.mark.slow


def _serve(tmp_path, profile):
    p = tmp_path / "profile.json"
    p.write_text(json.dumps(profile))
    return subprocess.run([sys.executable, "-m", "engine", "serve", "--profile", str(p),
                           "--port", str(free_port())], capture_output=True, text=True,
                          timeout=120)


def test_too_big_to_fit_exits_2_with_bytes(tiny_model, tmp_path):
    prof = {**base_profile(tiny_model), "host_memory_mib": 8, "kv_capacity": 100000,
            "request_log": str(tmp_path / "log.jsonl")}
    proc = _serve(tmp_path, prof)
    assert proc.returncode == 2, proc.stderr
    m = re.search(r"weights (\d+) B \+ KV (\d+) B \((\d+) tokens x (\d+) B\) \+ headroom "
                  r"(\d+) B \(of which a (\d+)-token prefill pass (\d+) B\) = (\d+) B; free (\d+) B", proc.stderr)
    assert m, proc.stderr
    weights, kv, tokens, per_tok, headroom, chunk, prefill, need, free = map(int, m.groups())
    assert tokens == 100000 and kv == tokens * per_tok
    assert chunk == 64 and 0 < prefill and headroom == (16 << 20) + prefill      # the profile's chunk
    assert need == weights + kv + headroom and free == 8 << 20 and need > free
    rec = json.loads((tmp_path / "log.jsonl").read_text().splitlines()[0])
    assert rec["event"] == "server_start" and rec["admitted"] is False
    assert rec["admission"]["kv_bytes"] == kv and rec["admission"]["prefill_bytes"] == prefill


def test_auto_capacity_too_small_exits_2(tiny_model, tmp_path):
    proc = _serve(tmp_path, {**base_profile(tiny_model), "host_memory_mib": 16,
                             "kv_capacity": "auto"})
    assert proc.returncode == 2 and "does not fit" in proc.stderr


def test_unknown_profile_key_exits_2(tiny_model, tmp_path):
    proc = _serve(tmp_path, {**base_profile(tiny_model), "turbo": True})
    assert proc.returncode == 2 and "turbo" in proc.stderr


def test_wrong_model_digest_exits_2(tiny_model, tmp_path):
    prof = base_profile(tiny_model)
    prof["model"] = {**prof["model"], "sha256": "0" * 64}
    proc = _serve(tmp_path, prof)
    assert proc.returncode == 2 and "0" * 64 in proc.stderr


def test_shipped_tiny_profile_serves(tiny_model, tmp_path):
    from pathlib import Path

    import engine
    import httpx

    from tests.engine.server.live import Server
    shipped = Path(engine.__file__).parent / "profiles" / "tiny-cpu.json"
    s = Server(tmp_path, {"model": {"path": "unused"}})
    (tmp_path / "keys").write_text("shipped-key\n")
    (tmp_path / "keys").chmod(0o600)
    s.argv = [sys.executable, "-m", "engine", "serve", "--profile", str(shipped),
              "--model", str(tiny_model), "--port", str(s.port), "--host", "127.0.0.1",
              "--api-key-file", str(tmp_path / "keys")]
    s.key = "shipped-key"
    with s, s.client() as c:
        r = c.post("/v1/chat/completions", json={
            "model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
        assert httpx.get(s.url + "/v1/models").status_code == 401


def test_auto_capacity_fills_what_fits(tiny_model, tmp_path):
    from tests.engine.server.live import Server
    prof = {**base_profile(tiny_model), "device": "cpu", "host_memory_mib": 24,
            "kv_capacity": "auto"}
    with Server(tmp_path, prof) as s, s.client() as c:
        st = c.get("/v1/engine/status").json()
    adm = st["runtime"]["admission"]
    assert adm["kv_capacity_mode"] == "auto" and adm["admitted"]
    assert adm["kv_capacity_tokens"] == st["cache"]["blocks_total"] * 16
    spare = adm["free_bytes"] - adm["weights_bytes"] - adm["headroom_bytes"]
    # the largest whole number of blocks: one more block would not fit
    assert adm["kv_bytes"] <= spare < adm["kv_bytes"] + 16 * adm["kv_bytes_per_token"]
