"""The build-host container: a real second machine for build b (hosts/build_container.py)."""
import platform
import sys

import docker
import pytest

from builders import variations
from hosts import build_container


def _gone(name: str) -> bool:
    try:
        docker.from_env().containers.get(name)
    except docker.errors.NotFound:
        return True
    return False


@pytest.mark.docker
def test_the_container_is_another_host_with_this_toolchain_and_every_variation():
    with build_container.build_container("b", "assay-build-b-varied") as host:
        name = host.container_name
        assert host.run(["cat", "/proc/sys/kernel/hostname"]).check().stdout.strip() == "assay-build-b-varied"
        assert host.run(["id", "-u"]).check().stdout.strip() == "0"
        # The very interpreter and packages of this machine, read-only at the same paths.
        out = host.run([sys.executable, "-c", "import platform, triton, hatchling, build; "
                        "print(platform.python_version(), triton.__version__)"]).check().stdout.split()
        assert out == [platform.python_version(), "3.6.0"]
        assert host.run(["touch", sys.executable + "-written"]).exit_code != 0  # mounted read-only
        # No network: nothing can be pulled from inside a build.
        assert host.run(["ls", "/sys/class/net"]).check().stdout.split() == ["lo"]
        # Every variation can be made real in it: hostname, uid, clock and disorderfs included.
        assert variations.probe(host, sys.executable) == {}
    assert _gone(name)


@pytest.mark.docker
def test_the_container_is_removed_when_the_build_fails():
    with pytest.raises(ZeroDivisionError):
        with build_container.build_container("b", "assay-build-b-varied") as host:
            name = host.container_name
            1 / 0
    assert _gone(name)


@pytest.mark.docker
def test_a_toolchain_that_cannot_run_there_is_refused_and_nothing_is_left(tmp_path):
    before = {c.name for c in docker.from_env().containers.list(all=True, filters={"label": "assay.build-host=1"})}
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexec %s \"$@\"\n" % sys.executable)  # runs here; its folder is not mounted there
    fake.chmod(0o755)
    with pytest.raises(build_container.BuildContainerError, match="does not run in the build-host container"):
        build_container.start("b", "assay-build-b-varied", python=str(fake))
    after = {c.name for c in docker.from_env().containers.list(all=True, filters={"label": "assay.build-host=1"})}
    assert after <= before


def test_docker_unavailable_says_why(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    why = build_container.docker_unavailable()
    assert why is not None and "no docker daemon answers" in why
