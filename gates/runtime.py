"""What the phases of one lane share on its host: the installed wheel, the model, the API key,
the probes, and the engine process under test, each made ready on first use so that a resumed
run can start at any phase. Nothing here imports the engine: it is started with its CLI and
spoken to over HTTP by the probes (gates/probes/), which run on the host."""

from __future__ import annotations

import json
import posixpath
import secrets
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gates.install import Installed, install_wheel, kernels_beside, put_kernels
from gates.phases import PhaseFailed
from gates.public import scrub_text
from gates.spec import LaneSpec

PROBES = Path(__file__).with_name("probes")
_FREE_PORT = "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"


@dataclass
class EngineProcess:
    """One `python -m engine serve` on the host, started by probes/launch.py (its parent)."""
    pid: int
    port: int
    state_dir: str
    log: str
    started_at: float
    ready_s: float = 0.0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class LaneRuntime:
    host: Any
    spec: LaneSpec
    version: str
    wheel: Path
    wheel_sha256: str
    workdir: str
    base_python: str
    say: Callable[[str], None] = lambda message: None
    installed: Installed | None = None
    engine: EngineProcess | None = None
    bench_engine: EngineProcess | None = None               # the speed model's engine (kinds with `bench_model`)
    shared: dict[str, Any] = field(default_factory=dict)   # figures one phase hands to a later one
    window: Any = None                                      # the LaneWindow (preflight reads its lease)
    _probes_ready: bool = False
    _key: str | None = None

    # -- places on the host ----------------------------------------------------------------
    def path(self, *parts: str) -> str:
        return posixpath.join(self.workdir, *parts)

    @property
    def model_name(self) -> str:
        return "lane-model"

    @property
    def key_file(self) -> str:
        return self.path("secrets", "api-key")

    @property
    def state_root(self) -> str:
        """The engine's state root: checkpoints and the request log."""
        return self.path("engine-state")

    @property
    def checkpoint_dir(self) -> str:
        return self.path("engine-state", "checkpoints")

    @property
    def request_log(self) -> str:
        return self.path("engine-state", "requests.jsonl")

    def roots(self) -> list[tuple[str, str]]:
        """Host paths and their placeholders, for scrubbing anything that reaches a record."""
        out = [(self.workdir, "<workdir>"), (str(Path(self.wheel).parent), "<artifacts>")]
        if self.spec.model:
            out.append((self.spec.model, "<model>"))
        return out

    def run(self, cmd, *, timeout: float = 600, stdin: str | None = None, cwd: str | None = None):
        installed = self.ensure_installed()
        return self.host.run(cmd, cwd=cwd or installed.cwd, env=installed.env, replace_env=True,
                             timeout=timeout, stdin=stdin)

    def tail(self, text: str, limit: int = 1500) -> str:
        return scrub_text(text[-limit:], self.roots())

    # -- made ready on first use -------------------------------------------------------------
    def ensure_installed(self) -> Installed:
        """The wheel in a fresh venv; reused when this window already installed the same bytes."""
        if self.installed is not None:
            return self.installed
        venv = self.path("venv")
        marker = posixpath.join(venv, "assay-wheel.sha256")
        r = self.host.run(["cat", marker], timeout=60)
        kernels = kernels_beside(self.wheel)   # the build's AOT kernels, when it made them
        if r.exit_code == 0 and r.stdout.strip() == self.wheel_sha256:
            remote = put_kernels(self.host, kernels, self.workdir)[0] if kernels else None
            self.installed = Installed(python=posixpath.join(venv, "bin", "python"), venv=venv,
                                       wheel_sha256=self.wheel_sha256, kernels=remote)
            return self.installed
        self.installed, self.shared["install"] = install_wheel(self.host, self.wheel, self.workdir, self.base_python,
                                                               kernels=kernels)
        self.host.run(f"printf %s {self.wheel_sha256} > {shlex.quote(marker)}", timeout=60).check()
        return self.installed

    def ensure_probes(self) -> str:
        target = self.path("probes")
        if not self._probes_ready:
            self.host.remove(target)
            self.host.put(PROBES, target)
            self._probes_ready = True
        return target

    def ensure_model(self) -> str:
        """The model directory on the host: the lane's, or the tiny model made by the candidate."""
        if self.spec.lane_kind.model == "directory":
            if not self.host.exists(posixpath.join(self.spec.model, "config.json")):
                raise PhaseFailed("the lane's model directory has no config.json on the host", {"model": "<model>"})
            return self.spec.model
        model = self.path("tiny-model")
        if not self.host.exists(posixpath.join(model, "config.json")):
            out = self.run([self.ensure_installed().python, "-m", "engine", "make-tiny-model", model, "--seed", "0"],
                           timeout=600)
            if out.exit_code != 0:
                raise PhaseFailed("make-tiny-model failed", {"exit_code": out.exit_code, "stderr_tail": self.tail(out.stderr)})
        return model

    @property
    def bench_model(self) -> str | None:
        """The preset of the model speed, fit and benchmark phases serve (gates/probes/random_model.py),
        or None when they serve the lane's own model."""
        return self.spec.setting("bench_model")

    def ensure_bench_model(self) -> str:
        """The speed model's directory on the host, made there from a seed on first use."""
        model = self.path("bench-model")
        made = self.probe("random-model", {"out": model, "tokenizer_from": self.ensure_model(),
                                           "preset": self.bench_model, "seed": 0})
        self.shared["bench_model"] = {k: made[k] for k in ("preset", "seed", "device", "parameters", "weights_bytes",
                                                           "zeroed_head_rows", "made_s", "reused")}
        return model

    def api_key(self) -> str:
        """The lane's API key, in a 0600 file under a 0700 folder; kept for a resumed run."""
        if self._key is None:
            r = self.host.run(["cat", self.key_file], timeout=60)
            if r.exit_code == 0 and r.stdout.strip():
                self._key = r.stdout.strip()
            else:
                self._key = secrets.token_hex(24)
                folder = posixpath.dirname(self.key_file)
                self.host.run(f"umask 077; mkdir -p {shlex.quote(folder)} && chmod 700 {shlex.quote(folder)} && "
                              f"cat > {shlex.quote(self.key_file)}", stdin=self._key + "\n", timeout=60).check()
        return self._key

    def free_port(self) -> int:
        return int(self.host.run(["python3", "-c", _FREE_PORT], timeout=60).check().stdout.strip())

    # -- the engine under test ---------------------------------------------------------------
    def profile(self, **overrides: Any) -> dict[str, Any]:
        """The serving profile (keys documented in docs/API.md) from the lane's settings."""
        s = self.spec.setting
        profile = {
            "model": {"name": self.model_name, "sha256": None},
            "device": self.spec.lane_kind.device, "dtype": "float32" if self.spec.lane_kind.device == "cpu" else "auto",
            "kv_dtype": "auto", "max_context": s("max_context"), "kv_capacity": s("kv_capacity"),
            "prefill_chunk": s("prefill_chunk"), "max_concurrency": s("max_concurrency"),
            "max_pending_requests": s("max_pending"), "pending_timeout_ms": int(s("request_timeout_s") * 1000),
            "max_request_bytes": 262144, "host_memory_mib": s("host_memory_mib"), "admission_headroom_mib": 256,
            "checkpoints": {"directory": self.checkpoint_dir, "quota_mib": 2048, "auto_save_min_tokens": 1 << 20},
            "request_log": self.request_log, "shutdown_timeout_s": 30,
        }
        for key, value in overrides.items():
            profile[key] = value
        return profile

    def write_profile(self, name: str, profile: dict[str, Any]) -> str:
        path = self.path("profiles", f"{name}.json")
        self.host.mkdir(posixpath.dirname(path))
        self.host.run(f"umask 077; cat > {shlex.quote(path)}", stdin=json.dumps(profile, indent=1), timeout=60).check()
        return path

    def launch(self, name: str, profile: dict[str, Any], *, key_file: str | None = None,
               wait: bool = True, timeout: float = 600, model: str | None = None) -> EngineProcess | int:
        """Start `engine serve` with this profile. Returns the running process, or the exit code
        when it stopped before becoming ready (a refused start)."""
        installed = self.ensure_installed()
        probes = self.ensure_probes()
        model = model or self.ensure_model()
        key_file = key_file or (self.api_key() and self.key_file)
        profile_path = self.write_profile(name, profile)
        port = self.free_port()
        state = self.path("run", name)
        log = self.path("run", f"{name}.log")
        self.host.remove(state)   # a previous run's pid and exit files must not be read as this one's
        self.host.mkdir(state)
        serve = [installed.python, "-m", "engine", "serve", "--profile", profile_path, "--model", model,
                 "--host", "127.0.0.1", "--port", str(port), "--api-key-file", key_file]
        launcher = [installed.python, posixpath.join(probes, "launch.py"), state, log, "--", *serve]
        # umask 077: the engine's state root (checkpoints, request log) is private to its user.
        script = f"umask 077; nohup {' '.join(shlex.quote(a) for a in launcher)} > /dev/null 2>&1 < /dev/null &"
        t0 = time.monotonic()
        self.run(["sh", "-c", script], timeout=60).check()
        pid = self._wait_for(posixpath.join(state, "pid"), posixpath.join(state, "exit"), 120)
        if pid is None:
            return self._exit_code(state)
        proc = EngineProcess(pid=pid, port=port, state_dir=state, log=log, started_at=time.time())
        if not wait:
            return proc
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self._exit_code(state)
            if code is not None:
                return code
            if self.probe("wait", {"base": proc.base, "timeout": 2}, timeout=60)["ready"]:
                proc.ready_s = round(time.monotonic() - t0, 3)
                return proc
        self.kill(proc)
        raise PhaseFailed("the engine did not become ready", {"waited_s": timeout, "log_tail": self.log_tail(proc)})

    def _wait_for(self, pid_file: str, exit_file: str, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.host.run(f"cat {shlex.quote(pid_file)} 2>/dev/null", timeout=60)
            if r.stdout.strip().isdigit():
                return int(r.stdout.strip())
            if self.host.exists(exit_file):
                return None
            time.sleep(0.1)
        raise PhaseFailed("the engine launcher did not start", {"waited_s": timeout})

    def _exit_code(self, state: str) -> int | None:
        r = self.host.run(["cat", posixpath.join(state, "exit")], timeout=60)
        return int(r.stdout.strip()) if r.exit_code == 0 and r.stdout.strip().lstrip("-").isdigit() else None

    def log_tail(self, proc: EngineProcess | str) -> str:
        log = proc.log if isinstance(proc, EngineProcess) else proc
        return self.tail(self.host.run(["tail", "-c", "3000", log], timeout=60).stdout)

    def ensure_engine(self) -> EngineProcess:
        """The lane's engine, serving its profile; started when this run has none."""
        if self.engine is not None and self.alive(self.engine):
            return self.engine
        started = self.launch("lane", self.profile())
        if not isinstance(started, EngineProcess):
            raise PhaseFailed(f"the engine refused to start (exit {started})", {"exit_code": started,
                                                                               "log_tail": self.log_tail(self.path("run", "lane.log"))})
        self.engine = started
        return started

    def ensure_bench_engine(self) -> EngineProcess:
        """The engine serving the speed model (bf16, the bench profile); started when none runs."""
        if self.bench_engine is not None and self.alive(self.bench_engine):
            return self.bench_engine
        started = self.launch("bench", self.bench_profile(), model=self.ensure_bench_model(), timeout=900)
        if not isinstance(started, EngineProcess):
            raise PhaseFailed(f"the engine refused to start on the speed model (exit {started})",
                              {"exit_code": started, "log_tail": self.log_tail(self.path("run", "bench.log"))})
        self.bench_engine = started
        return started

    def bench_profile(self, **overrides: Any) -> dict[str, Any]:
        """The speed model's serving profile: bf16 weights and KV, the bench sizes."""
        s = self.spec.setting
        return self.profile(**{"model": {"name": self.bench_model_name, "sha256": None}, "dtype": "bfloat16",
                               "max_context": s("bench_max_context"), "kv_capacity": s("bench_kv_capacity"),
                               **overrides})

    @property
    def bench_model_name(self) -> str:
        return "lane-bench-model"

    def bench_http(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The HTTP probe arguments for the engine that speed phases measure."""
        if not self.bench_model:
            return self.http(extra)
        engine = self.ensure_bench_engine()
        return {"base": engine.base, "key": self.api_key(), "model": self.bench_model_name, **(extra or {})}

    def alive(self, proc: EngineProcess) -> bool:
        return self.host.run(["kill", "-0", str(proc.pid)], timeout=60).exit_code == 0

    def stop(self, proc: EngineProcess, timeout: float = 60) -> dict[str, Any]:
        """Graceful stop (SIGTERM, as docs/API.md describes): seconds until exit, and its exit code."""
        t0 = time.monotonic()
        self.host.run(["kill", "-TERM", str(proc.pid)], timeout=60)
        exit_file = posixpath.join(proc.state_dir, "exit")
        while time.monotonic() - t0 < timeout:
            code = self._exit_code(proc.state_dir)
            if code is not None:
                if self.engine is proc:
                    self.engine = None
                if self.bench_engine is proc:
                    self.bench_engine = None
                return {"exit_code": code, "stop_s": round(time.monotonic() - t0, 3)}
            time.sleep(0.1)
        self.kill(proc)
        return {"exit_code": None, "stop_s": round(time.monotonic() - t0, 3), "killed": True,
                "exit_file": self.host.exists(exit_file)}

    def kill(self, proc: EngineProcess) -> None:
        self.host.run(["kill", "-KILL", str(proc.pid)], timeout=60)
        if self.engine is proc:
            self.engine = None
        if self.bench_engine is proc:
            self.bench_engine = None

    def stop_engine(self) -> dict[str, Any] | None:
        """Stop the lane's engine (and the speed model's, when one runs); the lane engine's stop record."""
        if self.bench_engine is not None:
            self.stop(self.bench_engine)
        if self.engine is None:
            return None
        return self.stop(self.engine)

    def stop_bench_engine(self) -> dict[str, Any] | None:
        return self.stop(self.bench_engine) if self.bench_engine is not None else None

    # -- probes on the host ------------------------------------------------------------------
    def probe(self, op: str, args: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        """Run probes/run.py OP on the host with the lane's interpreter; its JSON result."""
        probes = self.ensure_probes()
        python = self.ensure_installed().python
        out = self.run([python, posixpath.join(probes, "run.py"), op], stdin=json.dumps(args),
                       timeout=timeout or self.spec.setting("phase_timeout_s"))
        if out.exit_code != 0:
            raise PhaseFailed(f"probe {op} failed on the host", {"exit_code": out.exit_code,
                                                                 "stderr_tail": self.tail(out.stderr)})
        return json.loads(out.stdout.strip().splitlines()[-1])

    def http(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The arguments every HTTP probe takes: where the engine is, its key and model name."""
        engine = self.ensure_engine()
        return {"base": engine.base, "key": self.api_key(), "model": self.model_name, **(extra or {})}

