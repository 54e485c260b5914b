"""The lane window on the local machine: lease held for the window and released after, what the
window started is stopped by the restore, and a held lease keeps a second window out."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from gates.window import LaneWindow
from hosts.errors import LeaseHeld
from hosts.lease import lease_state
from hosts.local import LocalHost


def _window(tmp_path, run_id="run-1"):
    work = tmp_path / "lane-work"
    work.mkdir(exist_ok=True)
    return LaneWindow(LocalHost(), lane="t", run_id=run_id, lease_path=str(tmp_path / "leases" / "gpu"),
                      process_pattern=re.escape(str(work))), work


def test_window_restores_the_host_and_releases_the_lease(tmp_path):
    window, work = _window(tmp_path)
    with window:
        assert lease_state(LocalHost(), str(tmp_path / "leases" / "gpu"))["run_id"] == "run-1"
        # Something the lane leaves behind: a process whose command line names the lane's work dir.
        stray = subprocess.Popen(["sh", "-c", f"sleep 300; echo {work}"], start_new_session=True)
        time.sleep(0.3)
    assert window.restored is True and window.diff == []
    assert stray.wait(timeout=10) is not None
    assert lease_state(LocalHost(), str(tmp_path / "leases" / "gpu")) is None
    audit = window.audit_outcome()
    assert audit.name == "restore-audit" and audit.status == "pass"
    assert window.record()["restored"] is True


def test_a_held_lease_keeps_a_second_window_out(tmp_path):
    first, _ = _window(tmp_path, "run-a")
    second, _ = _window(tmp_path, "run-b")
    with first:
        with pytest.raises(LeaseHeld) as info:
            second.__enter__()
        assert "run-a" in str(info.value)
    with second:  # free again once the first window closed
        pass
    assert second.restored is True


def test_window_restores_even_when_the_phases_raise(tmp_path):
    window, work = _window(tmp_path)
    with pytest.raises(RuntimeError):
        with window:
            stray = subprocess.Popen(["sh", "-c", f"sleep 300; echo {work}"], start_new_session=True)
            time.sleep(0.3)
            raise RuntimeError("a phase crashed")
    assert stray.wait(timeout=10) is not None
    assert window.restored is True
    assert lease_state(LocalHost(), str(tmp_path / "leases" / "gpu")) is None
