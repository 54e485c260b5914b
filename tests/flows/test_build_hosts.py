"""The embedded defaults build a on this machine and b in a build-host container; the two build
receipts record different path, hostname, uid, umask, TZ, locale, clock and file-system order, and
the artifacts are identical. These tests fail if build b stops being varied or stops running in a
container."""
import docker
import pytest

from builders import recipe, snapshot
from flows import build_hosts
from flows.config import load_config
from hosts.docker_host import DockerHost
from hosts.local import LocalHost

# What the receipts must say, per variation: (build a's value, build b's value).
EXPECTED = {
    "hostname": ("assay-build-a", "assay-build-b-varied"),
    "user": ("assay-builder-a (host uid)", "assay-builder-b (uid 4242 in a user namespace)"),
    "umask": ("022", "002"),
    "tz": ("UTC", "Etc/GMT-14"),
    "locale": ("C.UTF-8", "fr_CH.UTF-8"),
    "time": ("host clock", "clock +397 days (libfaketime)"),
    "fs_order": ("the file system's own order", "directory entries shuffled (disorderfs)"),
    "build_path": ("${WORKROOT}/a", "${WORKROOT}/bb/build-b-longer-path"),
}


def _varied(build) -> dict:
    return build.record["buildDefinition"]["internalParameters"]["varied"]


def test_the_embedded_defaults_name_a_local_and_a_container_build_host():
    assert load_config().build_hosts == ["local", "container"]


@pytest.mark.docker
@pytest.mark.slow
def test_defaults_build_b_in_a_container_with_every_variation_recorded(engine_repo, tmp_path):
    cfg = load_config()
    # The engine's source with its kernels step cut to a subset (tests/kernels_subset.py): the whole
    # registry under libfaketime and disorderfs takes minutes, and the variations are the subject here.
    candidate = snapshot.freeze(engine_repo, ref="HEAD", subdir=cfg.subdir)
    source = snapshot.export_source(engine_repo, candidate, tmp_path / "source")
    with build_hosts.opened(cfg, log=lambda line: None) as bh:
        host_a, host_b = bh.hosts
        assert isinstance(host_a, LocalHost) and isinstance(host_b, DockerHost)
        container = host_b.container_name
        a, b = recipe.build_twice(host_a, host_b, candidate, source, str(tmp_path / "builds"),
                                  local_dir=tmp_path / "artifacts", python_a=bh.pythons[0], python_b=bh.pythons[1],
                                  placements=bh.placements, kernel_archs=cfg.kernel_archs)
    with pytest.raises(docker.errors.NotFound):  # started for the build, removed after it
        docker.from_env().containers.get(container)
    va, vb = _varied(a), _varied(b)
    assert va["placement"] == {"kind": "local", "host": "local"}
    assert vb["placement"]["kind"] == "container" and vb["placement"]["hostname"] == "assay-build-b-varied"
    assert "fallback" not in vb["placement"]
    for name, (value_a, value_b) in EXPECTED.items():
        got = (va["variations"][name]["value"], vb["variations"][name]["value"])
        assert got == (value_a, value_b), name
    for side in (va, vb):
        assert [n for n, v in side["variations"].items() if "not_varied" in v] == []
    assert (va["variables"]["TZ"], vb["variables"]["TZ"]) == ("UTC", "Etc/GMT-14")
    assert [p.read_bytes() for p in a.artifacts] == [p.read_bytes() for p in b.artifacts]


def test_without_docker_b_builds_here_and_the_placement_says_so(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    lines = []
    with build_hosts.opened(load_config(), log=lines.append) as bh:
        assert all(isinstance(h, LocalHost) for h in bh.hosts)
        a, b = bh.placements
    assert a == {"kind": "local", "host": "local"}
    assert b["kind"] == "local" and b["host"] == "container" and "no docker daemon answers" in b["fallback"]
    assert any("building on this machine instead" in line for line in lines)
