"""The upgrade / rollback / repair rehearsal (kind `rehearsal`): the installer shipped with the
release (releases/install) is run from the incumbent release to the candidate release, through
three scenarios, each in its own fresh prefix, and the predicate of a `rehearsal` receipt is
returned:

  upgrade                running incumbent upgraded: incumbent stopped, candidate healthy,
                         previous_release = incumbent.
  failed_start_rollback  the candidate's first start fails (its port is held by a process the
                         installer did not start): automatic rollback, every target the
                         transaction created deleted, incumbent restarted healthy, the other
                         process untouched.
  interrupted_repair     the candidate's install is killed (SIGKILL) at activation, then
                         `install --repair` undoes the half-made transaction and installs again.

Host: the local host (a remote test-bed mode is not built yet; the installer itself is tested on a
test-bed container in tests/releases/test_installer_testbed.py).
Every engine it starts it stops; the scratch process holding a port is its own."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from releases.install import service
from releases.install.installer import install
from releases.install.layout import Prefix
from releases.install.upgrade import upgrade

HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/health", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def _pid_gone(pid: int) -> bool:
    try:  # the engine is this process's child when started here: collect it, or it lingers as a zombie
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


class _Run:
    def __init__(self, workdir: Path, key: str, model: str, base_python: str | None, timeout: float):
        self.workdir, self.key, self.model, self.base_python, self.timeout = workdir, key, model, base_python, timeout
        self.api_key = workdir / "api-key"
        self.api_key.write_text("rehearsal-" + os.urandom(12).hex() + "\n", encoding="utf-8")
        self.api_key.chmod(0o600)
        self.prefixes: list[Prefix] = []

    def prefix(self, name: str) -> Prefix:
        p = Prefix.at(self.workdir / name)
        self.prefixes.append(p)
        return p

    def install(self, url: str, prefix: Prefix, **kw) -> dict:
        return install(url, prefix, self.key, base_python=self.base_python, **kw)[0]

    def start(self, prefix: Prefix, port: int) -> dict:
        return service.start(prefix, port=port, api_key_file=str(self.api_key), model=self.model, timeout=self.timeout)

    def upgrade(self, url: str, prefix: Prefix, port: int) -> dict:
        return upgrade(url, prefix, self.key, port=port, api_key_file=str(self.api_key), model=self.model,
                       base_python=self.base_python, timeout=self.timeout)

    def stop_all(self) -> None:
        for p in self.prefixes:
            service.stop(p)


def _upgrade(run: _Run, incumbent: str, candidate: str, from_v: str, to_v: str) -> dict:
    prefix, port = run.prefix("upgrade"), _free_port()
    run.install(incumbent, prefix)
    old_pid = run.start(prefix, port)["pid"]
    out = run.upgrade(candidate, prefix, port)
    stopped = out.get("stopped", {})
    checks = {"not_rolled_back": out["rolled_back"] is False,
              "incumbent_stopped_cleanly": stopped.get("status") == "stopped" and stopped.get("killed") is False
              and stopped.get("pid") == old_pid and _pid_gone(old_pid),
              "candidate_current": prefix.current_version() == to_v,
              "candidate_serving": service.status(prefix)["service"]["version"] == to_v and _healthy(port),
              "previous_release_kept": prefix.previous_version() == from_v}
    return {"checks": checks, "targets_created": out.get("targets", 0), "targets_deleted": 0}


def _failed_start_rollback(run: _Run, incumbent: str, candidate: str, from_v: str, to_v: str) -> dict:
    prefix, port, taken = run.prefix("failed-start"), _free_port(), _free_port()
    run.install(incumbent, prefix)
    run.start(prefix, port)
    other = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", HOST, str(taken)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and subprocess.run(
                [sys.executable, "-c", f"import socket; socket.create_connection(('{HOST}', {taken}), 2)"],
                capture_output=True).returncode != 0:
            time.sleep(0.2)
        out = run.upgrade(candidate, prefix, taken)
        other_untouched = other.poll() is None
    finally:
        other.terminate()
        other.wait(timeout=30)
    checks = {"rolled_back": out["rolled_back"] is True,
              "every_created_target_deleted": out["deleted_targets"] == out["created_targets"] > 0,
              "candidate_removed": not prefix.release(to_v).exists(),
              "incumbent_current": prefix.current_version() == from_v,
              "incumbent_serving": service.status(prefix)["service"]["version"] == from_v and _healthy(port),
              "other_process_untouched": other_untouched}
    return {"checks": checks, "targets_created": out.get("created_targets", 0),
            "targets_deleted": out["deleted_targets"]}


def _interrupted_repair(run: _Run, incumbent: str, candidate: str, from_v: str, to_v: str) -> dict:
    prefix = run.prefix("interrupted")
    run.install(incumbent, prefix)
    argv = [sys.executable, "-m", "releases.install", "install", candidate, "--prefix", str(prefix.root),
            "--key", run.key, "--json"] + (["--base-python", run.base_python] if run.base_python else [])
    killed = subprocess.run(argv, capture_output=True, text=True, timeout=run.timeout,
                            env={**os.environ, "ASSAY_INSTALL_FAULT": "kill:activation"})
    journal = json.loads(prefix.journal.read_text(encoding="utf-8")) if prefix.journal.exists() else {}
    out = run.install(candidate, prefix, repair_first=True)
    checks = {"killed_at_activation": killed.returncode == -9 and journal.get("phase") == "activating",
              "repair_undid": out.get("repair", {}).get("action") == "undone",
              "reinstalled": out["status"] == "installed" and prefix.current_version() == to_v,
              "previous_release_kept": prefix.previous_version() == from_v, "journal_closed": not prefix.journal.exists()}
    return {"checks": checks, "targets_created": out["targets"],
            "targets_deleted": out.get("repair", {}).get("deleted_targets", 0)}


SCENARIOS = (("upgrade", _upgrade), ("failed_start_rollback", _failed_start_rollback),
             ("interrupted_repair", _interrupted_repair))


def rehearse(incumbent: str, candidate: str, *, candidate_ref: dict, key: str | Path, model: str | Path,
             workdir: str | Path, from_version: str, to_version: str, base_python: str | None = None,
             timeout: float = 300) -> tuple[dict, dict]:
    """Run the three scenarios from INCUMBENT to CANDIDATE (release directories or URLs, both signed
    by KEY) in fresh prefixes under WORKDIR. Returns (predicate, details): the `rehearsal` receipt's
    predicate, and per scenario the named checks (or the error) that decided `passed`. A scenario
    that raises is recorded as failed; the verdict passes only when all three pass."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    run = _Run(workdir, str(key), str(model), base_python, timeout)
    scenarios, details = [], {}
    try:
        for name, scenario in SCENARIOS:
            t0 = time.monotonic()
            try:
                res = scenario(run, incumbent, candidate, from_version, to_version)
                entry = {"name": name, "passed": all(res["checks"].values()),
                         "targets_created": res["targets_created"], "targets_deleted": res["targets_deleted"]}
                details[name] = {"checks": res["checks"]}
            except Exception as exc:  # one broken scenario must not hide the others: record it
                entry = {"name": name, "passed": False, "targets_created": 0, "targets_deleted": 0}
                details[name] = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
            entry["duration_s"] = round(time.monotonic() - t0, 3)
            scenarios.append(entry)
    finally:
        run.stop_all()
    predicate = {"candidate": candidate_ref, "from_version": from_version, "to_version": to_version,
                 "scenarios": scenarios, "verdict": "pass" if all(s["passed"] for s in scenarios) else "fail"}
    return predicate, details
