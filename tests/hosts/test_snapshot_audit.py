"""The independent audit (hosts/audit.py) on this machine: it sees a process of the window by
its marker, the port that process listens on, a changed or new path, and a held lease, each as
a failing check; once all is put back every check passes. It reads /proc itself and shares no
code with hosts/snapshot.py."""

from __future__ import annotations

import subprocess
import sys
import time

from hosts import audit
from hosts.local import LocalHost

LISTEN = "import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); " \
         "print(s.getsockname()[1], flush=True); time.sleep(300)"


def test_audit_names_each_difference_and_passes_once_restored(tmp_path):
    host = LocalHost()
    work = tmp_path / "work"
    kept = tmp_path / "kept.txt"
    kept.write_text("as found")
    lease = tmp_path / "lease"
    paths = {"workdir": str(work), "kept": str(kept)}
    before = audit.observe(host, marker=str(work), paths=paths, lease_path=str(lease))
    assert before["processes"] == {} and before["paths"]["workdir"]["exists"] is False

    work.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", LISTEN, str(work)], stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    kept.write_text("changed")
    lease.mkdir()
    (lease / "holder.json").write_text('{"run_id": "r1"}')
    try:
        during = audit.observe(host, marker=str(work), paths=paths, lease_path=str(lease))
        assert list(during["processes"]) == [str(proc.pid)]
        assert any(entry.endswith(f"port {port}") for entry in during["listening"])
        checks = {c["name"]: c for c in audit.compare(before, during)}
        assert {n for n, c in checks.items() if c["status"] == "fail"} == {"processes", "ports", "path:workdir",
                                                                            "path:kept", "lease"}
        assert checks["power"]["status"] == "pass" and not audit.passed(list(checks.values()))
        assert str(tmp_path) not in str(checks)        # details name roles, never host paths
    finally:
        proc.kill()
        proc.wait()
    import shutil
    shutil.rmtree(work)
    shutil.rmtree(lease)
    kept.write_text("as found")
    time.sleep(0.1)
    after = audit.observe(host, marker=str(work), paths=paths, lease_path=str(lease))
    checks = audit.compare(before, after)
    assert audit.passed(checks) and len(checks) == 7
