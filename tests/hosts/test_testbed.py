"""The test bed's own pieces: mirror discovery, the cached image, the up/down command."""
import subprocess
import sys
import uuid

import docker
import pytest

from hosts.inventory import load_inventory
from hosts import rootfs_image as image


def test_mirror_from_deb822_and_one_line_sources(tmp_path):
    a = tmp_path / "debian.sources"
    a.write_text("Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
                 "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n")
    assert image.debian_mirror([str(a)]) == "http://mirror.example/debian"
    b = tmp_path / "sources.list"
    b.write_text("# comment\ndeb [arch=amd64] http://other.example/debian bookworm main\n")
    assert image.debian_mirror([str(b)]) == "http://other.example/debian"
    with pytest.raises(image.TestbedError, match="no Debian mirror"):
        image.debian_mirror([str(tmp_path / "none")])


def test_recipe_hash_changes_with_the_recipe():
    r = image.recipe("http://m/debian")
    assert image.recipe_hash(r) == image.recipe_hash(dict(r))
    assert image.recipe_hash(r) != image.recipe_hash({**r, "include": r["include"] + ["curl"]})


@pytest.mark.docker
def test_up_and_down_command(testbed, tmp_path, monkeypatch):
    # The session fixture built the image; a second bring-up must reuse it, never debootstrap.
    monkeypatch.setattr(image, "rootfs_tarball", lambda *a, **k: pytest.fail("image rebuilt"))
    client = docker.from_env()
    assert image.ensure_image(client).startswith("assay-testbed:")
    bed = "cli" + uuid.uuid4().hex[:6]
    inv = tmp_path / "bed" / "hosts.toml"
    try:
        up = subprocess.run([sys.executable, "-m", "tests.testbed", "up", "--count", "1", "--inventory", str(inv),
                             "--bed", bed], capture_output=True, text=True, timeout=180)
        assert up.returncode == 0, up.stderr
        entry = load_inventory(inv).entry("tb0")
        assert entry.address == "127.0.0.1" and (inv.parent / "id_ed25519").stat().st_mode & 0o077 == 0
        c = client.containers.get(load_inventory(inv).entry("tb0-docker").container)
        ports = c.attrs["NetworkSettings"]["Ports"]["22/tcp"]
        assert [p["HostIp"] for p in ports] == ["127.0.0.1"]
        assert load_inventory(inv).connect("tb0").run(["whoami"]).stdout == "root\n"
    finally:
        down = subprocess.run([sys.executable, "-m", "tests.testbed", "down", "--bed", bed],
                              capture_output=True, text=True, timeout=120)
    assert down.returncode == 0 and "removed 1" in down.stdout
    assert client.containers.list(all=True, filters={"label": f"assay.testbed.bed={bed}"}) == []
