"""`make serve`'s script: the reference model served behind a key whose path it prints."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.engine.server.live import free_port

REPO = Path(__file__).resolve().parents[3]


def test_serve_prints_key_path_and_answers_chat_without_special_tokens(model_dir):
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "serve.py")], cwd=REPO,
                            env={**os.environ, "PORT": str(port)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        key_line = next(ln for ln in lines if ln.startswith("API key file: "))
        key_path = REPO / key_line.split(": ", 1)[1].strip()
        assert not Path(key_line.split(": ", 1)[1].strip()).is_absolute()   # a relative path, no machine path
        assert key_path.stat().st_mode & 0o077 == 0
        key = key_path.read_text().strip()
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/v1/engine/status", headers={"Authorization": f"Bearer {key}"},
                             timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, "the server exited before it answered"
            time.sleep(1)
        assert httpx.get(f"{url}/v1/engine/status", timeout=5).status_code == 401
        r = httpx.post(f"{url}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"}, timeout=120,
                       json={"model": "smollm2-135m-instruct", "temperature": 0, "max_tokens": 32,
                             "messages": [{"role": "user", "content": "What is the capital of France?"}]})
        assert r.status_code == 200, r.text
        body = r.json()["choices"][0]
        assert body["finish_reason"] == "stop" and "Paris" in body["message"]["content"]
        assert "<|" not in body["message"]["content"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
