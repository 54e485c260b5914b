"""The lane window on the local machine: lease held for the window and released after, what the
window started is stopped by the restore and its working directory removed, a held lease keeps a
second window out, and a window resumed after a crash puts the host back as the first run found it."""

from __future__ import annotations

import subprocess
import time

import pytest

from gates.window import LaneWindow
from hosts.errors import LeaseHeld
from hosts.lease import lease_state
from hosts.local import LocalHost


def _window(tmp_path, run_id="run-1", resume=False):
    work = tmp_path / "lane-work"
    return LaneWindow(LocalHost(), lane="t", run_id=run_id, lease_path=str(tmp_path / "leases" / "gpu"),
                      workdir=str(work), state_file=tmp_path / "state" / "window.json", stale_after=2.0,
                      resume=resume), work


def _stray(work):
    work.mkdir(exist_ok=True)
    proc = subprocess.Popen(["sh", "-c", f"sleep 300; echo {work}"], start_new_session=True)
    time.sleep(0.3)
    return proc


def test_window_restores_the_host_and_releases_the_lease(tmp_path):
    window, work = _window(tmp_path)
    window.open()
    assert lease_state(LocalHost(), str(tmp_path / "leases" / "gpu"))["run_id"] == "run-1"
    assert window.lease_holder() == "run-1"
    stray = _stray(work)
    closed = window.close()
    assert closed["restored"] is True and closed["restore_diff"] == [] and closed["held_s"] > 0.3
    assert stray.wait(timeout=10) is not None
    assert not work.exists()
    assert lease_state(LocalHost(), str(tmp_path / "leases" / "gpu")) is None
    assert not (tmp_path / "state" / "window.json").exists()
    assert window.lease_record()["path_sha256"] and "leases" not in str(window.lease_record())


def test_a_held_lease_keeps_a_second_window_out(tmp_path):
    first, _ = _window(tmp_path, "run-a")
    second, _ = _window(tmp_path, "run-b")
    first.open()
    with pytest.raises(LeaseHeld) as info:
        second.open()
    assert "run-a" in str(info.value)
    first.close()
    second.open()      # free again once the first window closed
    assert second.close()["restored"] is True


def test_a_resumed_window_cleans_up_after_a_crashed_one(tmp_path):
    crashed, work = _window(tmp_path, "run-c")
    gone = subprocess.Popen(["true"])
    gone.wait()
    crashed.lease.pid = gone.pid       # the lease names a process that is no longer there
    crashed.open()
    stray = _stray(work)
    crashed.lease._stop.set()          # the crashed process's heartbeat stops with it
    # No close: the process died. The next run of the same run id resumes from the saved state,
    # waiting out the dead holder's lease (stale after 2 s here).
    resumed, _ = _window(tmp_path, "run-c", resume=True)
    resumed.open()
    assert stray.wait(timeout=10) is not None          # the crashed run's process is stopped
    assert resumed.audit_before == crashed.audit_before
    assert resumed.close()["restored"] is True


def test_a_dead_runs_lease_is_broken_before_the_first_look(tmp_path):
    """Another run died holding the lease (its machine rebooted): the next window breaks it, records
    the break, and its audit does not blame the window for the lease the dead run left behind."""
    from hosts import audit

    dead, _ = _window(tmp_path, "run-dead")
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead.lease.pid = gone.pid
    dead.lease.acquire()
    dead.lease._stop.set()             # no heartbeat from a dead process
    # Stale after 2 s here; the lease's age is read in whole seconds (date +%s less stat %Y), so
    # 2.5 s can read as 2 and count as fresh.
    time.sleep(3.5)
    window, _ = _window(tmp_path, "run-next")
    window.open()
    assert window.audit_before["lease"]["exists"] is False    # the first look comes after the break
    assert [b["stale_holder"]["run_id"] for b in window.lease.broke] == ["run-dead"]
    closed = window.close()
    checks = audit.compare(window.audit_before, window.observe())
    assert closed["restored"] is True and audit.passed(checks), checks
    assert "run-dead" in (tmp_path / "leases" / "gpu.breaks.log").read_text()
