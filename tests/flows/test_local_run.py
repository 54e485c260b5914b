"""`make stop` and `make run` as a person meets them: stale pid files and an already published commit.

No Prefect server is needed: what is under test is what happens before one would be touched."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from flows.services import free_port, read_pidfile, running, write_pidfile

ROOT = Path(__file__).resolve().parents[2]


def make_stop(assay_root: Path) -> subprocess.CompletedProcess:
    # The Makefile's own target, pointed at a throwaway state directory (ASSAY_ROOT on the command line).
    return subprocess.run(["make", "-s", "-C", str(ROOT), "stop", f"ASSAY_ROOT={assay_root}"], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def sleeper():
    started = []

    def start() -> subprocess.Popen:
        proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
        started.append(proc)
        # Popen returns once the child is forked, not once it has exec'd `sleep`: until then
        # its command line is the parent's or empty (about 1 start in 300 here), and a pid
        # file checked at once would rightly call it a stranger (CI failed so, at random).
        deadline = time.monotonic() + 30
        while psutil.Process(proc.pid).cmdline() != ["sleep", "300"]:
            assert time.monotonic() < deadline, f"sleep (pid {proc.pid}) never exec'd"
            time.sleep(0.001)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_make_stop_never_signals_a_process_a_stale_pidfile_names(tmp_path, sleeper):
    run_dir = tmp_path / ".assay" / "run"
    run_dir.mkdir(parents=True)
    legacy, reused = sleeper(), sleeper()
    # The older "<pid> <url>" form, naming a process that is no Prefect server.
    (run_dir / "prefect-server.pid").write_text(f"{legacy.pid} http://127.0.0.1:4200/api")
    # A recorded worker whose pid now belongs to another process (command line and start time differ).
    write_pidfile(run_dir, "prefect-worker", reused.pid, ["sleep", "300"])
    (run_dir / "prefect-worker.pid").write_text((run_dir / "prefect-worker.pid").read_text()
                                               .replace('"sleep", "300"', '"python", "-m", "prefect", "worker", "start"'))

    out = make_stop(tmp_path)
    assert out.returncode == 0, out.stderr
    time.sleep(0.5)
    assert legacy.poll() is None and reused.poll() is None  # both alive: nothing was signalled
    assert f"prefect-server: stale pid file removed (pid {legacy.pid} is now 'sleep 300'" in out.stdout
    assert f"prefect-worker: stale pid file removed (pid {reused.pid} is now 'sleep 300'" in out.stdout
    assert "stopped: nothing was running" in out.stdout
    assert sorted(os.listdir(run_dir)) == []


def test_make_stop_ends_exactly_the_process_it_started(tmp_path, sleeper):
    run_dir = tmp_path / ".assay" / "run"
    run_dir.mkdir(parents=True)
    ours = sleeper()
    write_pidfile(run_dir, "prefect-worker", ours.pid, ["sleep", "300"])
    out = make_stop(tmp_path)
    assert out.returncode == 0 and "stopped: prefect-worker" in out.stdout, out.stdout + out.stderr
    assert ours.wait(timeout=30) == -15  # SIGTERM, to its process group
    assert not (run_dir / "prefect-worker.pid").exists()


def test_running_trusts_only_the_recorded_process(tmp_path, sleeper):
    proc = sleeper()
    service = write_pidfile(tmp_path, "prefect-server", proc.pid, ["sleep", "300"], "http://127.0.0.1:9/api")
    assert service.create_time == psutil.Process(proc.pid).create_time()
    assert running(tmp_path, "prefect-server") == read_pidfile(tmp_path, "prefect-server") == service
    proc.kill()
    proc.wait()
    reasons = []
    assert running(tmp_path, "prefect-server", on_stale=reasons.append) is None
    assert reasons == [f"prefect-server: stale pid file removed (pid {proc.pid} is not running); nothing was signalled"]
    (tmp_path / "prefect-server.pid").write_text("not a pid file \x00")
    assert running(tmp_path, "prefect-server") is None and not (tmp_path / "prefect-server.pid").exists()


def test_a_clock_step_does_not_make_the_recorded_process_a_stranger(tmp_path, sleeper):
    """psutil's wall-clock start time moves when the clock does; the start in ticks since boot
    does not, and decides."""
    proc = sleeper()
    service = write_pidfile(tmp_path, "prefect-server", proc.pid, ["sleep", "300"], "http://127.0.0.1:9/api")
    assert service.boot_start is not None and 0 < service.boot_start <= time.clock_gettime(time.CLOCK_BOOTTIME)
    pidfile = tmp_path / "prefect-server.pid"
    data = json.loads(pidfile.read_text())
    assert data["boot_start"] == service.boot_start
    stepped = dict(data, create_time=data["create_time"] + 1.0)    # the record, read after a 1 s step
    pidfile.write_text(json.dumps(stepped))
    assert running(tmp_path, "prefect-server") == read_pidfile(tmp_path, "prefect-server") is not None
    other = dict(data, boot_start=data["boot_start"] + 0.01)       # another start tick: another process
    pidfile.write_text(json.dumps(other))
    reasons = []
    assert running(tmp_path, "prefect-server", on_stale=reasons.append) is None
    assert reasons == [f"prefect-server: stale pid file removed (pid {proc.pid} is now 'sleep 300', not the "
                       "prefect-server that was started); nothing was signalled"]
    older = {k: v for k, v in data.items() if k != "boot_start"}    # a pid file written before boot_start
    pidfile.write_text(json.dumps(older))
    assert running(tmp_path, "prefect-server").create_time == service.create_time
    pidfile.write_text(json.dumps(dict(older, create_time=data["create_time"] + 1.0)))
    assert running(tmp_path, "prefect-server") is None             # ... falls back to the wall clock


def test_a_dead_workers_pidfile_still_names_the_worker(tmp_path, sleeper):
    """What flows/recovery.py needs after a worker died: its name on the pool, from the stale pid file."""
    proc = sleeper()
    write_pidfile(tmp_path, "prefect-worker", proc.pid, ["sleep", "300"], worker="assay-local-0123abcd")
    proc.kill()
    proc.wait()
    assert read_pidfile(tmp_path, "prefect-worker").worker == "assay-local-0123abcd"
    assert running(tmp_path, "prefect-worker") is None  # and it is stale: nothing to signal


@pytest.fixture
def published_checkout(engine_repo, tmp_path):
    """A clone of the engine repository whose HEAD is already published in its default store."""
    from builders import snapshot
    from tests.releases.fixtures import build_release

    repo = tmp_path / "checkout"
    shutil.copytree(engine_repo, repo, symlinks=True)
    record = snapshot.freeze(repo, ref="HEAD", subdir="engine")
    version = f"{record['release_version']}+g{record['commit'][:12]}"
    build_release(repo / ".assay" / "store" / version, version=version, key_dir=repo / ".assay" / "keys")
    (repo / ".gitignore").write_text((repo / ".gitignore").read_text() + ".assay/\n")
    yield repo, version
    from flows.services import stop_all

    stop_all(repo / ".assay" / "run")  # only if something was started after all (the bug this guards)


def test_make_run_on_a_published_commit_reports_the_release_and_verifies_it(published_checkout):
    repo, version = published_checkout
    env = {**os.environ, "ASSAY_ROOT": str(repo), "ASSAY_PREFECT_PORT": str(free_port())}
    env.pop("PREFECT_API_URL", None)
    out = subprocess.run([sys.executable, "-m", "flows.local_run", "start"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"Release {version} of this commit is already published: .assay/store/{version}" in out.stdout
    assert f"assay verify --require-ready --key .assay/keys/release.pub.pem .assay/store/{version}" in out.stdout
    assert "state=published" in out.stdout  # what assay verify printed
    assert not (repo / ".assay" / "run").exists()  # no Prefect server, no worker: nothing to run


def test_a_real_prefect_server_is_recognised_then_stopped(tmp_path):
    """The pid file of a server start_server started names it exactly (its command line as run)."""
    from flows.services import start_server, stop_all

    run_dir = tmp_path / "run"
    service, proc = start_server(tmp_path / "home", run_dir, free_port(), tmp_path / "server.log")
    try:
        assert running(run_dir, "prefect-server") == service
        assert service.cmdline == psutil.Process(proc.pid).cmdline()
        assert stop_all(run_dir) == ["prefect-server"]
        assert proc.wait(timeout=60) is not None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_local_worker_polls_every_two_seconds_unless_told_otherwise(monkeypatch):
    from flows.local_run import worker_env

    monkeypatch.delenv("PREFECT_WORKER_QUERY_SECONDS", raising=False)
    assert worker_env() == {"PREFECT_WORKER_QUERY_SECONDS": "2"}
    monkeypatch.setenv("PREFECT_WORKER_QUERY_SECONDS", "7")
    assert worker_env() == {"PREFECT_WORKER_QUERY_SECONDS": "7"}
