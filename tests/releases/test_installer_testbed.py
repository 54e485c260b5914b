"""The installer on a real test-bed host (an sshd container from the debootstrap image), driven over
ssh: install, already_installed, port refusal leaving the other process running, the engine started
healthy, a real kill at activation then --repair.

The test bed has Debian's python3 (3.11) but no torch: this host's interpreter (same 3.11) and this
checkout are bind-mounted read-only at the same paths, and the installer runs from them with
--base-python pointing at this checkout's venv, so the release's venv reuses torch through its .pth
exactly as on a prepared host. The prefix lives in the container's own (writable) filesystem."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

from tests.releases.installable import MODEL, engine_members, installable_release, public_key

pytestmark = [pytest.mark.slow, pytest.mark.docker]

ROOT = Path(__file__).resolve().parents[2]
VENV_PY = ROOT / ".venv" / "bin" / "python"
OLD, NEW = "1.0.0", "1.1.0"
PREFIX = "/opt/assay"


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    from tests.conftest import require_docker
    from tests.testbed import bed as testbed

    require_docker()
    base = tmp_path_factory.mktemp("tbrel")
    members = engine_members(base / "wheel")
    rels = {v: installable_release(base / f"release-{v}", v, base / "keys", members).root for v in (OLD, NEW)}
    real_python = Path(sys.base_prefix).resolve()
    bed_id = "i" + uuid.uuid4().hex[:8]
    inventory = base / "bed" / "hosts.toml"
    try:
        testbed.up(1, inventory, log=lambda *_: None, bed_id=bed_id,
                   volumes={str(real_python): str(real_python), str(ROOT): str(ROOT), str(base): str(base)})
        host = tomllib.loads(inventory.read_text())["hosts"]["tb0"]
        ssh = ["ssh", "-i", str(inventory.parent / host["key"]), "-o", "BatchMode=yes",
               "-o", f"UserKnownHostsFile={inventory.parent / 'known_hosts'}", "-o", "StrictHostKeyChecking=yes",
               "-p", str(host["port"]), "root@127.0.0.1"]
        yield {"ssh": ssh, "rels": rels, "key": public_key(base / "keys")}
    finally:
        testbed.down(log=lambda *_: None, bed_id=bed_id)


def remote(bed: dict, command: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*bed["ssh"], command], capture_output=True, text=True, timeout=timeout)


def installer(bed: dict, *args: str) -> tuple[int, dict | None, str]:
    cmd = (f"cd {shlex.quote(str(ROOT))} && {shlex.quote(str(VENV_PY))} -m releases.install "
           + " ".join(shlex.quote(a) for a in args) + " --json")
    proc = remote(bed, cmd)
    lines = proc.stdout.strip().splitlines()
    return proc.returncode, json.loads(lines[-1]) if lines else None, proc.stderr


def test_install_start_refuse_and_repair_on_a_testbed_host(bed):
    key, rels = str(bed["key"]), bed["rels"]
    assert remote(bed, "python3 -c 'import sys; print(sys.version_info[:2])'").stdout.strip() == "(3, 11)"
    install = ("install", str(rels[OLD]), "--prefix", PREFIX, "--key", key, "--base-python", str(VENV_PY))
    rc, out, err = installer(bed, *install)
    assert rc == 0, err
    assert out["status"] == "installed" and out["version"] == OLD and out["targets"] >= 4
    digest = "find /opt/assay -printf '%p %y %l %s %m\\n' | sort | sha256sum"
    before = remote(bed, digest).stdout
    rc, out, err = installer(bed, *install)
    assert rc == 0 and out["status"] == "already_installed" and out["targets"] == 0, err
    assert remote(bed, digest).stdout == before

    # Another process holds port 8100: refused, still running afterwards.
    remote(bed, "setsid nohup python3 -m http.server --bind 127.0.0.1 8100 >/dev/null 2>&1 & echo $! > /tmp/other.pid")
    assert remote(bed, "for i in $(seq 50); do python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8100))\" "
                       "2>/dev/null && exit 0; sleep 0.2; done; exit 1").returncode == 0
    remote(bed, "printf 'testbed-key-0123456789\\n' > /root/api-key && chmod 600 /root/api-key")
    serve = ("--api-key-file", "/root/api-key", "--model", str(MODEL))
    rc, out, err = installer(bed, "start", "--prefix", PREFIX, "--port", "8100", *serve)
    other = remote(bed, "cat /tmp/other.pid").stdout.strip()
    assert rc != 0 and "port 8100" in err and other in err, err
    assert remote(bed, f"kill -0 {other}").returncode == 0

    try:
        rc, out, err = installer(bed, "start", "--prefix", PREFIX, "--port", "8101", *serve)
        assert rc == 0, err
        assert out["status"] == "started" and out["version"] == OLD
        health = remote(bed, "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:8101/health').status)\"")
        assert health.stdout.strip() == "200"
    finally:
        rc, out, err = installer(bed, "stop", "--prefix", PREFIX)
    assert rc == 0 and out["status"] == "stopped", err

    # A real SIGKILL at activation, then --repair.
    upgrade = ("install", str(rels[NEW]), "--prefix", PREFIX, "--key", key, "--base-python", str(VENV_PY))
    killed = remote(bed, f"cd {shlex.quote(str(ROOT))} && ASSAY_INSTALL_FAULT=kill:activation "
                         f"{shlex.quote(str(VENV_PY))} -m releases.install "
                         + " ".join(shlex.quote(a) for a in upgrade) + "; echo exit=$?")
    assert killed.stdout.strip().splitlines()[-1] == "exit=137"  # the shell reports the SIGKILL as 128 + 9
    journal = json.loads(remote(bed, f"cat {PREFIX}/.assay-install/transaction.json").stdout)
    assert journal["version"] == NEW and journal["phase"] == "activating"
    rc, out, err = installer(bed, *upgrade, "--repair")
    assert rc == 0, err
    assert out["repair"]["action"] == "undone" and out["status"] == "installed" and out["previous_release"] == OLD
    assert remote(bed, f"readlink {PREFIX}/current").stdout.strip().endswith(f"releases/{NEW}")
    assert remote(bed, f"kill -0 {other}").returncode == 0
