"""GPU-owner leases on a real sshd host (and on LocalHost for the rule without docker)."""
import subprocess
import threading
import time
import uuid

import pytest

from hosts import LeaseHeld, LocalHost
from hosts.inventory import load_inventory
from hosts.lease import Lease, break_lease, lease_state, read_breaks


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _plant(host, path, *, pid, holder_host=None, age=1000):
    """A lease left behind by a holder: acquired, its heartbeat stopped, its mtime backdated."""
    lease = Lease(host, path, run_id="left-behind", pid=pid, holder_host=holder_host,
                  stale_after=60, heartbeat_interval=30).acquire()
    lease.abandon()
    host.run(f"touch -d @$(( $(date +%s) - {age} )) {lease.file}").check()
    return lease


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "leases" / "gpu")


def test_local_stale_lease_with_dead_holder_is_broken_and_recorded(path):
    host = LocalHost()
    _plant(host, path, pid=_dead_pid())
    with Lease(host, path, run_id="new", stale_after=60, heartbeat_interval=30) as lease:
        assert lease_state(host, path)["run_id"] == "new"
        assert len(lease.broke) == 1
    breaks = read_breaks(host, path + ".breaks.log")
    assert [b["stale_holder"]["run_id"] for b in breaks] == ["left-behind"]
    assert breaks[0]["broken_by"]["run_id"] == "new" and breaks[0]["heartbeat_age_s"] >= 999
    assert lease_state(host, path) is None


def test_local_stale_heartbeat_but_living_holder_is_not_broken(path):
    host = LocalHost()
    _plant(host, path, pid=os_getpid())
    with pytest.raises(LeaseHeld, match="alive") as e:
        Lease(host, path, run_id="new", stale_after=60, heartbeat_interval=30).acquire()
    assert e.value.holder["run_id"] == "left-behind"
    assert read_breaks(host, path + ".breaks.log") == []


def test_local_fresh_lease_is_held_and_third_machine_needs_explicit_break(path):
    host = LocalHost()
    _plant(host, path, pid=_dead_pid(), age=0)
    with pytest.raises(LeaseHeld, match="heartbeat"):
        Lease(host, path, run_id="x", stale_after=60, heartbeat_interval=30).acquire()
    host.remove(path)
    _plant(host, path, pid=_dead_pid(), holder_host="elsewhere")
    with pytest.raises(LeaseHeld, match="cannot be checked"):
        Lease(host, path, run_id="x", stale_after=60, heartbeat_interval=30).acquire()
    record = break_lease(host, path, by="operator", reason="machine decommissioned")
    assert "left-behind" in record["stale_holder"]
    with Lease(host, path, run_id="x", stale_after=60, heartbeat_interval=30):
        pass
    assert [b["reason"] for b in read_breaks(host, path + ".breaks.log")] == ["explicit: machine decommissioned"]


def test_heartbeat_keeps_it_fresh_and_release_in_finally(path):
    host = LocalHost()
    with pytest.raises(RuntimeError):
        with Lease(host, path, run_id="hb", stale_after=3, heartbeat_interval=0.3):
            host.run(f"touch -d @$(( $(date +%s) - 100 )) {path}/holder.json").check()
            time.sleep(1.0)
            age = int(host.run(f"echo $(( $(date +%s) - $(stat -c %Y {path}/holder.json) ))").stdout)
            assert age <= 1
            raise RuntimeError("work failed")
    assert not host.exists(path)


def os_getpid():
    import os
    return os.getpid()


@pytest.mark.docker
def test_two_holders_contend_exactly_one_wins(testbed):
    inv = load_inventory(testbed)
    path = f"/tmp/lease-{uuid.uuid4().hex[:6]}/gpu"
    hosts = [inv.connect("tb0"), inv.connect("tb0")]
    barrier = threading.Barrier(2)
    outcome: dict = {}

    def contend(i):
        barrier.wait()
        try:
            lease = Lease(hosts[i], path, run_id=f"run-{i}", stale_after=60, heartbeat_interval=5).acquire()
            outcome[i] = lease
        except LeaseHeld as e:
            outcome[i] = e

    threads = [threading.Thread(target=contend, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    winners = [v for v in outcome.values() if isinstance(v, Lease)]
    losers = [v for v in outcome.values() if isinstance(v, LeaseHeld)]
    assert len(winners) == 1 and len(losers) == 1
    assert losers[0].holder["run_id"] == winners[0].run_id
    winners[0].release()
    assert lease_state(hosts[0], path) is None
    for h in hosts:
        h.close()


@pytest.mark.docker
def test_stale_lease_on_ssh_host_is_broken_and_recorded(testbed):
    host = load_inventory(testbed).connect("tb1")
    path = f"/tmp/lease-{uuid.uuid4().hex[:6]}/gpu"
    _plant(host, path, pid=_dead_pid())
    with Lease(host, path, run_id="breaker", stale_after=60, heartbeat_interval=30):
        assert lease_state(host, path)["run_id"] == "breaker"
    (record,) = read_breaks(host, path + ".breaks.log")
    assert record["stale_holder"]["run_id"] == "left-behind" and record["broken_by"]["run_id"] == "breaker"
    host.close()
