"""The installer CLI against a real host, end to end: real signed release directories whose wheel
is the real engine, installed into a real prefix, the engine really started on the reference model.

Host: this machine, for upgrade and rollback (which tests/releases/test_installer_testbed.py does not
cover on a test-bed container) and for the zipapp."""
from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.releases.installable import MODEL, engine_members, installable_release, public_key

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
OLD, NEW = "1.0.0", "1.1.0"


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("rel")
    members = engine_members(base / "wheel")
    keys = base / "keys"
    out = {v: installable_release(base / f"release-{v}", v, keys, members).root for v in (OLD, NEW)}
    out["key"] = public_key(keys)
    return out


def cli(*args: str, env: dict | None = None, timeout: float = 600) -> tuple[int, dict | None, str]:
    proc = subprocess.run([sys.executable, "-m", "releases.install", *args, "--json"], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})
    lines = proc.stdout.strip().splitlines()
    return proc.returncode, json.loads(lines[-1]) if lines else None, proc.stderr


def tree_digest(root: Path) -> str:
    """Every path, link target, mode and file content under ROOT."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        h.update(f"{p.relative_to(root)}\0{st.st_mode}\0".encode())
        if p.is_symlink():
            h.update(os.readlink(p).encode())
        elif p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def not_running(pid: int, wait: float = 10) -> bool:
    """Gone, or a zombie not yet collected by whoever adopted it (the CLI that started it has exited)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_corrupted_asset_is_refused_before_anything_is_created(tmp_path, releases):
    bad = tmp_path / "bad"
    subprocess.run(["cp", "-a", str(releases[OLD]), str(bad)], check=True)
    (wheel,) = bad.glob("artifacts/*.whl")
    data = bytearray(wheel.read_bytes())
    data[100] ^= 0xFF
    wheel.write_bytes(bytes(data))
    prefix = tmp_path / "prefix"
    rc, out, err = cli("install", str(bad), "--prefix", str(prefix), "--key", str(releases["key"]))
    assert rc != 0 and out["status"] == "error"
    assert wheel.name in err, err
    assert "Traceback" not in err
    assert not prefix.exists()


def test_install_journal_and_already_installed_changes_nothing(tmp_path, releases):
    prefix = tmp_path / "prefix"
    rc, out, err = cli("install", str(releases[OLD]), "--prefix", str(prefix), "--key", str(releases["key"]))
    assert rc == 0, err
    assert out["status"] == "installed" and out["version"] == OLD and out["previous_release"] is None
    assert out["targets"] >= 4  # prefix, state folder, releases/1.0.0, current (at least)
    assert os.readlink(prefix / "current").endswith(f"releases/{OLD}")
    assert not (prefix / ".assay-install" / "transaction.json").exists()  # committed
    before = tree_digest(prefix)
    rc, out, err = cli("install", str(releases[OLD]), "--prefix", str(prefix), "--key", str(releases["key"]))
    assert rc == 0, err
    assert out == {"status": "already_installed", "version": OLD, "previous_release": None, "targets": 0}
    assert tree_digest(prefix) == before


def test_a_failed_install_removes_every_target_it_recorded(tmp_path, releases):
    prefix = tmp_path / "prefix"
    rc, out, err = cli("install", str(releases[OLD]), "--prefix", str(prefix), "--key", str(releases["key"]),
                       env={"ASSAY_INSTALL_FAULT": "fail:venv"})
    assert rc != 0 and "transaction undone" in err, err
    assert not prefix.exists()  # the prefix itself was a target of this transaction


def test_repair_after_a_real_kill_at_activation(tmp_path, releases):
    prefix = tmp_path / "prefix"
    assert cli("install", str(releases[OLD]), "--prefix", str(prefix), "--key", str(releases["key"]))[0] == 0
    rc, _, _ = cli("install", str(releases[NEW]), "--prefix", str(prefix), "--key", str(releases["key"]),
                   env={"ASSAY_INSTALL_FAULT": "kill:activation"})
    assert rc == -9  # SIGKILL: no handler ran
    journal = json.loads((prefix / ".assay-install" / "transaction.json").read_text())
    assert journal["version"] == NEW and journal["phase"] == "activating"
    # Without --repair the installer refuses to go on over the pending transaction.
    rc, _, err = cli("install", str(releases[NEW]), "--prefix", str(prefix), "--key", str(releases["key"]))
    assert rc != 0 and "--repair" in err
    rc, out, err = cli("install", str(releases[NEW]), "--prefix", str(prefix), "--key", str(releases["key"]),
                       "--repair")
    assert rc == 0, err
    assert out["repair"]["action"] == "undone" and out["repair"]["deleted_targets"] >= 1
    assert out["status"] == "installed" and out["version"] == NEW and out["previous_release"] == OLD
    assert os.readlink(prefix / "current").endswith(f"releases/{NEW}")
    assert (prefix / "previous_release").read_text().strip() == OLD


def test_start_port_refusal_upgrade_and_rollback(tmp_path, releases):
    assert (MODEL / "config.json").exists(), "the reference model is missing: run `make model`"
    prefix, port = tmp_path / "prefix", free_port()
    key_file = tmp_path / "api-key"
    key_file.write_text("test-key-0123456789\n")
    key_file.chmod(0o600)
    serve = ("--port", str(port), "--api-key-file", str(key_file), "--model", str(MODEL))
    assert cli("install", str(releases[OLD]), "--prefix", str(prefix), "--key", str(releases["key"]))[0] == 0

    # A process this installer did not start holds the port: refused, that process untouched.
    other = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            subprocess.run(["sleep", "0.1"])
        rc, out, err = cli("start", "--prefix", str(prefix), *serve)
        assert rc != 0 and f"port {port}" in err and str(other.pid) in err, err
        assert other.poll() is None
        assert not (prefix / "run" / "service.json").exists()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            assert s.recv(12).startswith(b"HTTP/1.0 200")
    finally:
        other.terminate()
        other.wait(timeout=10)

    try:
        rc, out, err = cli("start", "--prefix", str(prefix), *serve)
        assert rc == 0, err
        assert out["status"] == "started" and out["version"] == OLD
        old_pid = out["pid"]
        rc, out, err = cli("upgrade", str(releases[NEW]), "--prefix", str(prefix), "--key", str(releases["key"]),
                           *serve)
        assert rc == 0, err
        assert out["rolled_back"] is False and out["version"] == NEW and out["previous_release"] == OLD
        assert out["stopped"]["pid"] == old_pid and out["stopped"]["killed"] is False  # SIGTERM sufficed
        assert not_running(old_pid)
        rc, out, err = cli("status", "--prefix", str(prefix))
        assert out["current"] == NEW and out["service"]["running"] is True and out["service"]["version"] == NEW
        rc, out, err = cli("rollback", "--prefix", str(prefix))
        assert rc == 0, err
        assert out["current"] == OLD and out["rolled_back_from"] == NEW and out["service"]["version"] == OLD
        assert os.readlink(prefix / "current").endswith(f"releases/{OLD}")
    finally:
        rc, out, err = cli("stop", "--prefix", str(prefix))
    assert rc == 0, err
    rc, out, _ = cli("status", "--prefix", str(prefix))
    assert out["service"]["running"] is False


def test_the_zipapp_is_deterministic_and_installs(tmp_path, releases):
    from releases.install.zipapp import build_zipapp

    a, b = build_zipapp(tmp_path / "a", NEW), build_zipapp(tmp_path / "b", NEW)
    assert a.name == f"assay-install-{NEW}.pyz" and a.read_bytes() == b.read_bytes()
    prefix = tmp_path / "prefix"
    # Run from outside the checkout, so the code comes from the zipapp, not from releases/ on disk.
    proc = subprocess.run([sys.executable, str(a), "install", str(releases[NEW]), "--prefix", str(prefix),
                           "--key", str(releases["key"]), "--json"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=600, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "installed"
    assert os.readlink(prefix / "current").endswith(f"releases/{NEW}")
