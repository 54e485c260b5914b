"""DockerHost: in a named running container of the test bed, and in an ephemeral one."""
import os
import time

import docker
import pytest

from hosts import CommandTimeout, Host, HostLost
from hosts.base import file_sha256
from hosts.docker_host import DockerHost
from hosts.inventory import load_inventory

pytestmark = pytest.mark.docker


@pytest.fixture
def host(testbed):
    h = load_inventory(testbed).connect("tb1-docker")
    yield h
    h.close()


def test_run(host):
    assert isinstance(host, Host)
    r = host.run(["sh", "-c", "echo out; echo err >&2; exit 4"])
    assert (r.exit_code, r.stdout, r.stderr) == (4, "out\n", "err\n")
    r = host.run("printf '%s|' \"$A\" \"$(pwd)\"; cat", env={"A": "v w"}, cwd="/tmp", stdin="piped")
    assert r.stdout == "v w|/tmp|piped"
    assert host.run(["/usr/bin/env"], env={"ONLY": "1"}, replace_env=True).stdout == "ONLY=1\n"


def test_a_silent_command_outlives_the_api_timeout(testbed):
    """A command that prints nothing for longer than the docker client's timeout still finishes
    with its exit code (the kernels step of a build is silent for minutes)."""
    name = load_inventory(testbed).connect("tb1-docker").container_name
    h = DockerHost("silent", container=name, api_timeout=2.0)
    try:
        r = h.run(["sh", "-c", "sleep 5; echo done; exit 3"], timeout=60)
        assert (r.exit_code, r.stdout) == (3, "done\n")
    finally:
        h.close()


def test_timeout_kills_the_whole_group(host):
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout):
        host.run("sleep 311 & sleep 312", timeout=1.5)
    assert time.monotonic() - t0 < 8
    assert host.run("pgrep -f 'sleep 31[12]' || true").stdout == ""


def test_file_and_tree_round_trip(host, tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(3 * 2**20))
    d = host.put(src, "/root/dx/f.bin")
    assert d == file_sha256(src) and host.get("/root/dx/f.bin", tmp_path / "g.bin") == d
    tree = tmp_path / "t"
    (tree / "s").mkdir(parents=True)
    (tree / "s" / "x").write_text("x")
    (tree / "y").write_text("y")
    td = host.put(tree, "/root/dx/t")
    assert host.get("/root/dx/t", tmp_path / "t2") == td
    assert (tmp_path / "t2" / "s" / "x").read_text() == "x"
    host.remove("/root/dx")
    assert not host.exists("/root/dx")


def test_ephemeral_container_with_mount(testbed, tmp_path):
    image = docker.from_env().containers.get(load_inventory(testbed).entry("tb0-docker").container).image.tags[0]
    (tmp_path / "shared.txt").write_text("from outside")
    host = DockerHost.ephemeral("eph", image, mounts=[f"{tmp_path}:/mnt/in:ro"])
    name = host.container_name
    try:
        assert host.run(["cat", "/mnt/in/shared.txt"]).stdout == "from outside"
        assert host.run(["touch", "/mnt/in/nope"]).exit_code != 0
    finally:
        host.close()
    assert not docker.from_env().containers.list(all=True, filters={"name": name})
    with pytest.raises(HostLost, match="gone"):
        host.run(["true"])


def test_cancellation_kills_the_group(host):
    def cancel(stream, text):
        if "started" in text:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        host.run("sleep 331 & echo started; wait", on_output=cancel, timeout=60)
    assert host.run("pgrep -f 'sleep 33[1]' || true").stdout == ""
