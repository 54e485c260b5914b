"""Snapshot -> change the host -> restore: the diff is empty, and what cannot be undone is
reported (RestoreIncomplete), on a real sshd host."""
import uuid

import pytest

from hosts import RestoreIncomplete
from hosts.errors import PowerControlRefused
from hosts.inventory import load_inventory
from hosts.power import ALLOW_ENV, PowerControl
from hosts.snapshot import SnapshotSpec, diff, discard, restore, take_snapshot

pytestmark = pytest.mark.docker

# No GPU can run here: a stand-in nvidia-smi on the test host answers the power-limit query
# from a file, so that the restore's handling of a changed limit is exercised for real.
FAKE_SMI = """#!/bin/sh
case "$*" in
  *power.limit*) echo "0, $(cat /var/tmp/fake-gpu-limit)";;
  *) echo "fake nvidia-smi: $*" >&2; exit 9;;
esac
"""


@pytest.fixture
def host(testbed):
    h = load_inventory(testbed).connect("tb1")
    yield h
    h.run("pkill -f 'http[.]server' ; rm -f /usr/local/bin/nvidia-smi /var/tmp/fake-gpu-limit; exit 0")
    h.close()


def _serve(host, port):
    host.run(f"nohup python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &").check()
    host.run(f"for i in $(seq 50); do ss -H -ltn | grep -q :{port} && exit 0; sleep 0.1; done; exit 1").check()


def _spec():
    tag = uuid.uuid4().hex[:6]
    return SnapshotSpec(process_pattern=r"http\.server", files=[f"/root/conf-{tag}.txt", f"/root/new-{tag}.txt"],
                        lease_path=f"/tmp/lease-{tag}/gpu", save_dir=f"/var/tmp/snap-{tag}")


def test_restore_undoes_processes_ports_and_files(host):
    spec = _spec()
    host.run(["sh", "-c", f"echo original > {spec.files[0]}"]).check()
    before = take_snapshot(host, spec)
    assert before.processes == {} and before.files[spec.files[1]] is None

    _serve(host, 8321)
    host.run(["sh", "-c", f"echo tampered > {spec.files[0]}; echo new > {spec.files[1]}"]).check()
    changed = diff(before, take_snapshot(host, spec, save=False))
    assert any(d.startswith("process started:") and "http.server" in d for d in changed)
    assert any(d.endswith("127.0.0.1:8321") and d.startswith("port opened: tcp") for d in changed)
    assert sum(d.startswith("file changed:") for d in changed) == 2

    assert restore(host, before, spec) == []
    assert host.run(["cat", spec.files[0]]).stdout == "original\n"
    assert not host.exists(spec.files[1])
    discard(host, before)
    assert not host.exists(next(iter(before.saved.values())))


def test_what_cannot_be_undone_is_reported(host):
    spec = _spec()
    _serve(host, 8322)  # an engine that was running before the window
    host.run("cat > /usr/local/bin/nvidia-smi; chmod +x /usr/local/bin/nvidia-smi; "
             "echo 700.00 > /var/tmp/fake-gpu-limit", stdin=FAKE_SMI).check()
    power = PowerControl(host)  # dry run: it may only log
    before = take_snapshot(host, spec, power)
    assert before.power_limits == {0: 700.0} and len(before.processes) == 1

    host.run("pkill -f 'http[.]server'; echo 450.00 > /var/tmp/fake-gpu-limit").check()
    with pytest.raises(RestoreIncomplete) as e:
        restore(host, before, spec, power)
    remaining = e.value.remaining
    assert any(r.startswith("process gone:") and "8322" in r for r in remaining)
    assert "port closed: tcp 127.0.0.1:8322" in remaining
    assert "power limit gpu0: 700.0 W -> 450.0 W" in remaining
    assert power.would_run == ["nvidia-smi -i 0 -pl 700"]
    assert "RESTORE INCOMPLETE" in str(e.value)


def test_power_control_refuses_without_explicit_permission(host, monkeypatch):
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    with pytest.raises(PowerControlRefused, match=ALLOW_ENV):
        PowerControl(host, dry_run=False).set_limit(0, 300)
    assert PowerControl(host).read_limits() == {}
