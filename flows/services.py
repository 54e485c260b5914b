"""Local background services for `make run` and the tests: a Prefect server (SQLite under the
state directory) and a process worker, each started detached with a pid file so that `make stop`
can end exactly what was started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

PREFECT = [sys.executable, "-m", "prefect"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        # A server stopped a moment ago leaves its port in TIME_WAIT; it can be bound again.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def prefect_env(home: Path, api_url: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "true",
        "PREFECT_LOGGING_LEVEL": env.get("PREFECT_LOGGING_LEVEL", "INFO"),
    })
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return env


@dataclass
class Service:
    name: str
    pid: int
    url: str | None = None


def _pidfile(run_dir: Path, name: str) -> Path:
    return run_dir / f"{name}.pid"


def running(run_dir: Path, name: str) -> Service | None:
    pidfile = _pidfile(run_dir, name)
    if not pidfile.exists():
        return None
    pid_text, _, url = pidfile.read_text().partition(" ")
    try:
        os.kill(int(pid_text), 0)
    except (ProcessLookupError, ValueError):
        pidfile.unlink()
        return None
    return Service(name, int(pid_text), url.strip() or None)


def wait_healthy(api_url: str, timeout_s: float = 120, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the Prefect server exited with code {proc.returncode} before answering")
        try:
            if httpx.get(f"{api_url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the Prefect server at {api_url} did not answer /health within {timeout_s:.0f}s")


def start_server(home: Path, run_dir: Path, port: int, log: Path, detached: bool = True) -> tuple[Service, subprocess.Popen]:
    """Start `prefect server start` on 127.0.0.1:port and wait until it answers."""
    home.mkdir(parents=True, exist_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    api_url = f"http://127.0.0.1:{port}/api"
    env = prefect_env(home)
    env["PREFECT_SERVER_API_HOST"] = "127.0.0.1"
    env["PREFECT_SERVER_API_PORT"] = str(port)
    env["PREFECT_UI_API_URL"] = api_url
    with open(log, "ab") as out:
        proc = subprocess.Popen(PREFECT + ["server", "start", "--host", "127.0.0.1", "--port", str(port)],
                                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=detached)
    try:
        wait_healthy(api_url, proc=proc)
    except Exception:
        stop_pid(proc.pid)
        raise
    _pidfile(run_dir, "prefect-server").write_text(f"{proc.pid} {api_url}")
    return Service("prefect-server", proc.pid, api_url), proc


def start_worker(home: Path, run_dir: Path, api_url: str, pool: str, cwd: Path, log: Path) -> Service:
    env = prefect_env(home, api_url)
    with open(log, "ab") as out:
        proc = subprocess.Popen(PREFECT + ["worker", "start", "--pool", pool, "--type", "process"],
                                env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    _pidfile(run_dir, "prefect-worker").write_text(f"{proc.pid}")
    return Service("prefect-worker", proc.pid)


def stop_pid(pid: int, grace_s: float = 15) -> bool:
    """TERM the process group, then KILL what is left; True when something was stopped."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return False
    target = (lambda sig: os.killpg(pgid, sig)) if pgid == pid else (lambda sig: os.kill(pid, sig))
    try:
        target(signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.2)
    try:
        target(signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def stop_all(run_dir: Path) -> list[str]:
    stopped = []
    for name in ("prefect-worker", "prefect-server"):
        service = running(run_dir, name)
        if service and stop_pid(service.pid):
            stopped.append(name)
        _pidfile(run_dir, name).unlink(missing_ok=True)
    return stopped
