"""The current release's engine as a service: started daemonised (its own session, output to
DIR/run/engine.log), described by DIR/run/service.json (pid, its start time, port and how it was
started), stopped only when the pid file names a process this installer started (same pid AND same
start time). A port held by any other process is refused before anything changes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from releases.atomic import write_atomic
from releases.install import ports
from releases.install.errors import InstallError
from releases.install.layout import Prefix
from releases.install.venv import clean_env

HOST = "127.0.0.1"
DEFAULT_PROFILE = {"model": {"name": "assay-engine"}}


def read_service(prefix: Prefix) -> dict | None:
    try:
        return json.loads(prefix.service_file.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def is_ours(svc: dict | None) -> bool:
    """The recorded process still runs and is the one we started (pid reuse is caught by start time)."""
    return bool(svc) and ports.start_time(svc["pid"]) == svc["start_time"] and _alive(svc["pid"])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def status(prefix: Prefix) -> dict:
    svc = read_service(prefix)
    running = is_ours(svc)
    return {"current": prefix.current_version(), "previous_release": prefix.previous_version(),
            "service": {"pid": svc["pid"] if svc else None, "port": svc["port"] if svc else None,
                        "version": svc.get("version") if svc else None, "running": running,
                        # what starting it again as it runs takes (the acceptance window restores it so)
                        **{k: svc.get(k) if svc else None for k in ("api_key_file", "model", "profile")}}}


def _refuse_port(port: int) -> None:
    held = ports.holders(port)
    if held:
        h = held[0]
        who = f"pid {h.pid} ({h.cmdline[:120]})" if h.pid is not None else "a process this user cannot see"
        raise InstallError(f"port {port} is held by {who}, which this installer did not start; "
                           "nothing was changed", where=f"port {port}")
    if not ports.can_bind(HOST, port):
        raise InstallError(f"port {port} cannot be bound on {HOST}; nothing was changed", where=f"port {port}")


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/health", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _log_tail(prefix: Prefix, limit: int = 600) -> str:
    try:
        data = prefix.log.read_bytes()[-limit:]
    except FileNotFoundError:
        return ""
    return " | ".join(data.decode("utf-8", "replace").strip().splitlines()[-3:])


def start(prefix: Prefix, *, port: int, api_key_file: str, model: str | None = None, profile: str | None = None,
          timeout: float = 300, version: str | None = None) -> dict:
    """Start the current release (or VERSION) on PORT and wait for /health. Refuses a held port."""
    version = version or prefix.current_version()
    if version is None:
        raise InstallError("no current release; install one first", where=str(prefix.current))
    python = prefix.python(version)
    if not python.exists():
        raise InstallError("the release has no environment", where=str(python.parent.parent))
    svc = read_service(prefix)
    if is_ours(svc):
        if svc["port"] == port and svc["version"] == version:
            return {"status": "already_running", **status(prefix)["service"]}
        raise InstallError(f"the service already runs (pid {svc['pid']}, port {svc['port']}, {svc['version']}); "
                           "stop it first", where=str(prefix.service_file))
    if not Path(api_key_file).is_file():
        raise InstallError("API key file not found", where=api_key_file)
    _refuse_port(port)
    prefix.run.mkdir(parents=True, exist_ok=True)
    if profile is None:
        profile = str(prefix.run / "profile.json")
        if not os.path.exists(profile):
            write_atomic(Path(profile), json.dumps(DEFAULT_PROFILE).encode())
    argv = [str(python), "-m", "engine", "serve", "--profile", os.path.abspath(profile), "--host", HOST,
            "--port", str(port), "--api-key-file", os.path.abspath(api_key_file)]
    if model:
        argv += ["--model", os.path.abspath(model)]
    with open(prefix.log, "ab") as log:
        # A new session: the engine outlives this command and no terminal signal reaches it.
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=prefix.run, env=clean_env(str(prefix.run)), start_new_session=True)
    record = {"pid": proc.pid, "start_time": ports.start_time(proc.pid), "port": port, "version": version,
              "api_key_file": os.path.abspath(api_key_file), "model": os.path.abspath(model) if model else None,
              "profile": os.path.abspath(profile), "started_at": time.time()}
    write_atomic(prefix.service_file, json.dumps(record, indent=1, sort_keys=True).encode())
    deadline = time.monotonic() + timeout
    t0 = time.monotonic()
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            prefix.service_file.unlink(missing_ok=True)
            raise InstallError(f"the engine of {version} exited {code} before it was healthy: {_log_tail(prefix)}",
                               where=str(prefix.log))
        if _healthy(port):
            return {"status": "started", "pid": proc.pid, "port": port, "version": version,
                    "ready_s": round(time.monotonic() - t0, 3)}
        time.sleep(0.25)
    stop(prefix)
    raise InstallError(f"the engine of {version} was not healthy within {timeout:g}s: {_log_tail(prefix)}",
                       where=str(prefix.log))


def stop(prefix: Prefix, timeout: float = 60) -> dict:
    """Stop the service this installer started (SIGTERM, then SIGKILL after TIMEOUT). Idempotent;
    a pid file naming any other process is removed without signalling anything."""
    svc = read_service(prefix)
    if svc is None:
        return {"status": "not_running"}
    if not is_ours(svc):
        prefix.service_file.unlink(missing_ok=True)
        return {"status": "not_running", "stale_pid_file": True}
    pid = svc["pid"]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and is_ours(svc):
        _reap(pid)
        time.sleep(0.1)
    killed = False
    if is_ours(svc):
        os.kill(pid, signal.SIGKILL)
        killed = True
        while is_ours(svc):
            _reap(pid)
            time.sleep(0.05)
    prefix.service_file.unlink(missing_ok=True)
    return {"status": "stopped", "pid": pid, "port": svc["port"], "version": svc["version"], "killed": killed}


def _reap(pid: int) -> None:
    """When this very process started the engine (upgrade in one call), collect its exit status."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
