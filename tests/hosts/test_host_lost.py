"""A host that goes away mid-command raises HostLost within the command's timeout."""
import threading
import time
import uuid

import docker
import pytest

from hosts import HostLost
from hosts.inventory import load_inventory
from tests.testbed import bed

pytestmark = pytest.mark.docker


@pytest.fixture
def doomed(testbed, tmp_path):
    """A one-container bed of its own, since the test kills it."""
    bed_id = "lost" + uuid.uuid4().hex[:6]
    inventory = bed.up(1, tmp_path / "hosts.toml", log=lambda *_: None, bed_id=bed_id)
    try:
        yield load_inventory(inventory)
    finally:
        bed.down(log=lambda *_: None, bed_id=bed_id)


def _kill_later(container: str, delay: float, how: str = "kill") -> threading.Thread:
    def kill() -> None:
        time.sleep(delay)
        getattr(docker.from_env(timeout=30).containers.get(container), how)()

    t = threading.Thread(target=kill, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("kind", ["ssh", "docker"])
def test_container_killed_mid_command(doomed, kind):
    host = doomed.connect("tb0" if kind == "ssh" else "tb0-docker")
    assert host.run(["true"]).exit_code == 0
    killer = _kill_later(doomed.entry("tb0-docker").container, 1.5)
    t0 = time.monotonic()
    with pytest.raises(HostLost) as e:
        host.run(["sleep", "60"], timeout=20)
    elapsed = time.monotonic() - t0
    killer.join(5)
    assert elapsed < 20, f"HostLost came after {elapsed:.1f}s"
    assert e.value.host == ("tb0" if kind == "ssh" else "tb0-docker")
    assert e.value.command == ["sleep", "60"]
    with pytest.raises(HostLost):
        host.run(["true"], timeout=15)
    host.close()


@pytest.mark.parametrize("kind", ["ssh", "docker"])
def test_frozen_container_is_lost_within_the_timeout(doomed, kind):
    """A paused container keeps its TCP connection open but answers nothing."""
    host = doomed.connect("tb0" if kind == "ssh" else "tb0-docker")
    assert host.run(["true"]).exit_code == 0
    container = doomed.entry("tb0-docker").container
    freezer = _kill_later(container, 1.5, "pause")
    t0 = time.monotonic()
    try:
        with pytest.raises(HostLost):
            host.run(["sleep", "60"], timeout=20)
        assert time.monotonic() - t0 < 20
    finally:
        freezer.join(10)
        docker.from_env(timeout=30).containers.get(container).unpause()
    host.close()
