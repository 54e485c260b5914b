"""The cpu-reference lane: serve the real reference model (SmolLM2-135M-Instruct) from the candidate
wheel on the CPU and ask it things only a trained model answers: a fact, and an exact code planted
in a ~1,000-token context. Talks to the engine only through its CLI and its HTTP API."""

from __future__ import annotations

import json
import posixpath
import secrets
import shlex
from pathlib import Path

from gates.install import check_identity, install_wheel
from gates.phases import Phase, PhaseFailed

PROBE = Path(__file__).with_name("probes") / "chat_probe.py"

# The serving profile the lane writes: keys documented in the engine's docs/API.md.
PROFILE = {
    "model": {"sha256": None, "name": "reference"},
    "device": "cpu", "dtype": "float32", "kv_dtype": "float32",
    "max_context": 2048, "kv_capacity": 8192, "prefill_chunk": 256,
    "max_concurrency": 2, "max_pending_requests": 8, "pending_timeout_ms": 600000,
    "host_memory_mib": 8192, "admission_headroom_mib": 256,
}


def _free_port(host) -> int:
    """A free port on the lane host (asked there, since the engine listens there)."""
    out = host.run(["python3", "-c", "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); "
                    "print(s.getsockname()[1])"], timeout=60).check()
    return int(out.stdout.strip())


def cpu_reference_phases(host, wheel: Path, workdir: str, base_python: str, expected_version: str,
                         model: str | None) -> list[Phase]:
    if not model:
        raise ValueError("lane kind cpu-reference needs `model` (the imported model directory on the host)")
    state: dict = {}
    key_file, profile_file = posixpath.join(workdir, "api-key"), posixpath.join(workdir, "profile.json")
    probe = posixpath.join(workdir, "chat_probe.py")

    def install() -> dict:
        state["installed"], facts = install_wheel(host, wheel, workdir, base_python)
        return facts

    def identity() -> dict:
        return check_identity(host, state["installed"], expected_version)

    def serve() -> dict:
        port = _free_port(host)
        state["base"] = f"http://127.0.0.1:{port}"
        host.run(f"umask 077; printf %s {secrets.token_hex(16)} > {shlex.quote(key_file)}", timeout=30).check()
        host.run(f"cat > {shlex.quote(profile_file)}", stdin=json.dumps(PROFILE), timeout=30).check()
        host.put(PROBE, probe)
        python = state["installed"].python
        log = posixpath.join(workdir, "serve.log")
        cmd = (f"cd {shlex.quote(state['installed'].cwd)} && nohup {shlex.quote(python)} -m engine serve --profile {shlex.quote(profile_file)} "
               f"--model {shlex.quote(model)} --host 127.0.0.1 --port {port} --api-key-file {shlex.quote(key_file)} "
               f"> {shlex.quote(log)} 2>&1 & echo $!")
        installed = state["installed"]
        state["pid"] = int(host.run(cmd, env=installed.env, replace_env=True, timeout=30).check().stdout.strip())
        ready = _probe("wait")
        if not ready["ready"]:
            tail = host.run(["tail", "-c", "2000", log], timeout=30).stdout
            raise PhaseFailed("the engine did not become ready", {"log_tail": tail})
        return {"port_kind": "loopback", "ready": True}

    def _probe(what: str) -> dict:
        out = host.run([state["installed"].python, probe, state["base"], key_file, PROFILE["model"]["name"], what],
                       cwd=state["installed"].cwd, env=state["installed"].env, replace_env=True, timeout=900)
        if out.exit_code != 0:
            raise PhaseFailed(f"probe {what} failed", {"stderr_tail": out.stderr[-2000:]})
        return json.loads(out.stdout.strip().splitlines()[-1])

    def capital() -> dict:
        facts = _probe("capital")
        if not facts["contains_expected"]:
            raise PhaseFailed("the model did not name the capital of France", facts)
        return facts

    def retrieval() -> dict:
        facts = _probe("retrieval")
        if facts["exact"] != facts["total"]:
            raise PhaseFailed(f"exact retrieval {facts['exact']}/{facts['total']}", facts)
        return facts

    def stop() -> dict:
        result = host.run(f"kill -TERM {state['pid']}; for i in $(seq 100); do kill -0 {state['pid']} 2>/dev/null "
                          f"|| exit 0; sleep 0.2; done; exit 1", timeout=60)
        if result.exit_code != 0:
            raise PhaseFailed("the engine did not stop within 20 s of SIGTERM")
        return {"stopped": True}

    return [("install", install), ("identity", identity), ("serve", serve), ("capital", capital),
            ("retrieval", retrieval), ("stop", stop)]
