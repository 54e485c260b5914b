"""A real `python -m engine serve` subprocess on 127.0.0.1 and a free port, for the live tests."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

KEY = "test-key-one"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_profile(model_dir: Path) -> dict:
    # ASSAY_ENGINE_TEST_DEVICE=cuda runs the live tests on a GPU (the device machine).
    device = os.environ.get("ASSAY_ENGINE_TEST_DEVICE", "cpu")
    return {"model": {"path": str(model_dir), "name": "tiny"}, "device": device,
            "dtype": "float32", "kv_dtype": "float32", "max_context": 256, "kv_capacity": 4096,
            "prefill_chunk": 64, "max_concurrency": 4, "max_pending_requests": 16,
            "pending_timeout_ms": 20000, "admission_headroom_mib": 16, "host_memory_mib": 512,
            "max_request_bytes": 262144, "shutdown_timeout_s": 10}


class Server:
    def __init__(self, workdir: Path, profile: dict, key: str | None = KEY,
                 extra_args: tuple[str, ...] = (), extra_keys: tuple[str, ...] = ()):
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.key = key
        profile = json.loads(json.dumps(profile))
        if key is not None:
            (workdir / "keys").write_text("".join(k + "\n" for k in (key, *extra_keys)))
            (workdir / "keys").chmod(0o600)
            profile["api_key_file"] = "keys"
        profile.setdefault("request_log", "requests.jsonl")
        self.profile_path = workdir / "profile.json"
        self.profile_path.write_text(json.dumps(profile))
        self.log_path = workdir / profile["request_log"]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [sys.executable, "-m", "engine", "serve", "--profile",
                     str(self.profile_path), "--host", "127.0.0.1", "--port", str(self.port),
                     *extra_args]
        self.proc: subprocess.Popen | None = None
        self.stderr_path = workdir / f"stderr-{self.port}.txt"

    @property
    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def start(self, timeout: float = 90.0) -> "Server":
        self._err = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=self._err,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.stderr()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"server not healthy within {timeout}s: {self.stderr()}")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (the graceful path), then SIGKILL if it will not go."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._err.close()
        return self.proc.returncode

    def log(self) -> list[dict]:
        if not self.log_path.exists():
            return []
        return [json.loads(ln) for ln in self.log_path.read_text().splitlines() if ln]

    def client(self, headers: dict | None = None, **kw) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=headers or self.headers, timeout=60, **kw)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
