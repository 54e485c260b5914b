"""Snapshot and restore on LocalHost (no docker): processes and chosen files come back."""
import subprocess
import sys
import uuid

from hosts import LocalHost
from hosts.snapshot import SnapshotSpec, restore, take_snapshot


def test_local_restore(tmp_path):
    host = LocalHost()
    tag = uuid.uuid4().hex[:8]
    conf = tmp_path / "conf.txt"
    conf.write_text("v1")
    spec = SnapshotSpec(process_pattern=f"assay-fake-engine-{tag}", files=[str(conf)],
                        save_dir=str(tmp_path / "saved"))
    before = take_snapshot(host, spec)
    assert before.processes == {} and before.power_limits == {}
    # A process whose command line carries the pattern, started outside the host's control.
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", f"assay-fake-engine-{tag}"],
                            start_new_session=True)
    try:
        conf.write_text("v2")
        assert set(take_snapshot(host, spec, save=False).processes) == {proc.pid}
        assert restore(host, before, spec) == []
        assert proc.wait(timeout=10) != 0
        assert conf.read_text() == "v1"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
