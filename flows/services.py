"""Local background services for `make run` and the tests: a Prefect server (SQLite under the
state directory) and a process worker, each started detached with a pid file so that `make stop`
can end exactly what was started.

A pid file outlives its process, and pids are reused: before anything is signalled, or a server
is taken as already running, the process must be the one that was started — the same command
line and the same start time as recorded in the pid file. A pid file naming any other process is
stale: it is removed, and that process is left alone."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from flows.errors import ServiceFailed

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
    cmdline: list[str] | None = None  # as started; None in a pid file of the older "<pid> <url>" form
    create_time: float | None = None  # the process's start time (psutil), which a reused pid does not share
    worker: str | None = None  # a worker's name on its pool: the label of the runs it took (flows/recovery.py)
    boot_start: float | None = None  # seconds from boot to its start (Linux), which no clock change moves


def _boot_start(pid: int) -> float | None:
    """Seconds from boot to the process's start: /proc/<pid>/stat's starttime (field 22), in
    clock ticks. psutil's create_time adds to it the boot time that the kernel derives from the
    wall clock, in whole seconds, so a clock step, or a slew that carries it across a second,
    moves it. None where /proc has no such file."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2:].split()[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _pidfile(run_dir: Path, name: str) -> Path:
    return run_dir / f"{name}.pid"


def write_pidfile(run_dir: Path, name: str, pid: int, cmdline: list[str], url: str | None = None,
                  worker: str | None = None) -> Service:
    """Record what was started: its pid, its command line and its start time."""
    try:
        service = Service(name, pid, url, list(cmdline), psutil.Process(pid).create_time(), worker, _boot_start(pid))
    except psutil.NoSuchProcess:
        raise ServiceFailed(f"{name} (pid {pid}) exited as soon as it started; see its log under {run_dir.parent}/logs") from None
    _pidfile(run_dir, name).write_text(json.dumps({"pid": pid, "url": url, "cmdline": service.cmdline,
                                                   "create_time": service.create_time, "worker": worker,
                                                   "boot_start": service.boot_start}))
    return service


def read_pidfile(run_dir: Path, name: str) -> Service | None:
    """The service a pid file names (None when there is none or it is unreadable: nothing to trust)."""
    try:
        text = _pidfile(run_dir, name).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    try:
        data = json.loads(text)
        worker, boot_start = data.get("worker"), data.get("boot_start")
        return Service(name, int(data["pid"]), data.get("url"), [str(a) for a in data["cmdline"]],
                       float(data["create_time"]), str(worker) if worker is not None else None,
                       float(boot_start) if boot_start is not None else None)
    except (ValueError, TypeError, KeyError):
        pid, _, url = text.partition(" ")  # the older form: "<pid> <url>"
        return Service(name, int(pid), url.strip() or None) if pid.strip().isdigit() else None


# What an older pid file's process must look like: its command line was not recorded.
_LEGACY_SHAPE = {"prefect-server": ["-m", "prefect", "server", "start"], "prefect-worker": ["-m", "prefect", "worker", "start"]}


def not_ours(service: Service) -> str | None:
    """None when the pid is the process that was started; otherwise why it is not."""
    try:
        proc = psutil.Process(service.pid)
        cmdline, created = proc.cmdline(), proc.create_time()
        if proc.status() == psutil.STATUS_ZOMBIE:
            return f"pid {service.pid} has exited"
    except psutil.NoSuchProcess:
        return f"pid {service.pid} is not running"
    except psutil.AccessDenied:
        return f"pid {service.pid} belongs to another user"
    if service.cmdline is None:
        if cmdline[1:5] != _LEGACY_SHAPE.get(service.name):
            return f"pid {service.pid} is now {' '.join(cmdline)!r}, not a {service.name}"
        return None
    boot_start = _boot_start(service.pid) if service.boot_start is not None else None
    if boot_start is not None:     # the same clock tick since boot: the same process, whatever the wall clock did
        same_start = abs(boot_start - service.boot_start) < 1e-6
    else:                          # a pid file without it, or no /proc: the wall-clock start time
        same_start = service.create_time is not None and abs(created - service.create_time) <= 0.5
    if cmdline != service.cmdline or not same_start:
        return f"pid {service.pid} is now {' '.join(cmdline)!r}, not the {service.name} that was started"
    return None


def running(run_dir: Path, name: str, on_stale=None) -> Service | None:
    """The service if its pid file names the very process that was started; a stale pid file is
    removed (on_stale(reason) says why) and nothing is signalled."""
    service = read_pidfile(run_dir, name)
    if service is None:
        _pidfile(run_dir, name).unlink(missing_ok=True)
        return None
    reason = not_ours(service)
    if reason is None:
        return service
    _pidfile(run_dir, name).unlink(missing_ok=True)
    if on_stale:
        on_stale(f"{name}: stale pid file removed ({reason}); nothing was signalled")
    return None


def wait_healthy(api_url: str, timeout_s: float = 120, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ServiceFailed(f"the Prefect server exited with code {proc.returncode} before answering")
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
    argv = PREFECT + ["server", "start", "--host", "127.0.0.1", "--port", str(port)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=detached)
    try:
        wait_healthy(api_url, proc=proc)
    except Exception:
        stop_pid(proc.pid)
        raise
    return write_pidfile(run_dir, "prefect-server", proc.pid, argv, api_url), proc


def start_worker(home: Path, run_dir: Path, api_url: str, pool: str, cwd: Path, log: Path,
                 results: Path | None = None, env: dict[str, str] | None = None) -> Service:
    """Start a process worker on `pool` under a name of its own (the label of every run it takes,
    which tells flows/recovery.py whose runs a dead worker left). `results`: where the flow runs
    it starts persist their task results (PREFECT_LOCAL_STORAGE_PATH; default under PREFECT_HOME)."""
    env = {**prefect_env(home, api_url), **(env or {})}
    if results is not None:
        results.mkdir(parents=True, exist_ok=True)
        env["PREFECT_LOCAL_STORAGE_PATH"] = str(results)
    name = f"{pool}-{uuid.uuid4().hex[:8]}"
    argv = PREFECT + ["worker", "start", "--pool", pool, "--type", "process", "--name", name]
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    return write_pidfile(run_dir, "prefect-worker", proc.pid, argv, worker=name)


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


def stop_all(run_dir: Path, on_stale=None) -> list[str]:
    """Stop the worker, then the server: only processes their pid files prove were started here."""
    stopped = []
    for name in ("prefect-worker", "prefect-server"):
        service = running(run_dir, name, on_stale)
        if service and stop_pid(service.pid):
            stopped.append(name)
        _pidfile(run_dir, name).unlink(missing_ok=True)
    return stopped
