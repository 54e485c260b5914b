"""The engine's OCI image: deterministic layers and layout from a root fs tarball + a wheel, and
the real thing loaded into the docker daemon and run."""
import io
import json
import shutil
import subprocess
import sys
import tarfile
import uuid
import zipfile
from pathlib import Path

import pytest

from builders import oci_image
from builders.oci_image import ImageError, build_image

ENGINE = Path(__file__).resolve().parents[2] / "engine"
SDE = 1700000000


def _rootfs(path: Path, *, mtime: int, uid: int, reverse: bool = False) -> Path:
    """A small stand-in root fs: a python dir, a hard link, an ssh host key, a device node."""
    entries = [("./", tarfile.DIRTYPE, b""), ("./usr/lib/python3.11/os.py", tarfile.REGTYPE, b"# os\n"),
               ("./usr/bin/python3.11", tarfile.REGTYPE, b"\x7fELF"), ("./etc/ssh/ssh_host_ed25519_key",
                                                                        tarfile.REGTYPE, b"PRIVATE KEY"),
               ("./etc/ssh/sshd_config", tarfile.REGTYPE, b"Port 22\n"), ("./dev/null", tarfile.CHRTYPE, b"")]
    with tarfile.open(path, "w") as t:
        for name, type_, data in (reversed(entries) if reverse else entries):
            ti = tarfile.TarInfo(name)
            ti.type, ti.size, ti.mtime, ti.uid, ti.uname = type_, len(data), mtime, uid, f"user{uid}"
            ti.mode = 0o755 if type_ == tarfile.DIRTYPE else 0o644
            t.addfile(ti, io.BytesIO(data) if data else None)
        link = tarfile.TarInfo("./usr/bin/python3")
        link.type, link.linkname, link.mtime = tarfile.LNKTYPE, "./usr/bin/python3.11", mtime
        t.addfile(link)
    return path


def _wheel(path: Path, body: str = "__version__ = '1.0'\n") -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("demo/__init__.py", body)
        z.writestr("demo-1.0.data/scripts/demo-tool", "#!python\nprint('tool')\n")
        z.writestr("demo-1.0.dist-info/METADATA", "Metadata-Version: 2.4\nName: demo\nVersion: 1.0\n")
        z.writestr("demo-1.0.dist-info/entry_points.txt", "[console_scripts]\ndemo = demo.cli:main\n")
        z.writestr("demo-1.0.dist-info/RECORD", "stale,,\n")
    return path


def _members(tar_bytes: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as t:
        return {m.name: m for m in t.getmembers()}


def _blob(image: Path, digest: str) -> bytes:
    with tarfile.open(image) as t:
        return t.extractfile(f"blobs/sha256/{digest.removeprefix('sha256:')}").read()


def test_two_builds_give_the_same_image_whatever_the_input_metadata(tmp_path):
    wheel = _wheel(tmp_path / "demo-1.0-py3-none-any.whl")
    a = build_image(_rootfs(tmp_path / "a.tar", mtime=1, uid=0), wheel, tmp_path / "a.oci.tar", SDE,
                    ref_name="demo:1", workdir=tmp_path / "wa")
    # Another root fs tarball of the same files: other mtimes, owner, member order.
    b = build_image(_rootfs(tmp_path / "b.tar", mtime=999999, uid=1000, reverse=True), wheel,
                    tmp_path / "b.oci.tar", SDE, ref_name="demo:1", workdir=tmp_path / "wb")
    assert (tmp_path / "a.oci.tar").read_bytes() == (tmp_path / "b.oci.tar").read_bytes()
    assert a == {**b, "name": "a.oci.tar"}
    assert a["python"] == "3.11"
    assert [la["role"] for la in a["layers"]] == ["base", "wheel"]

    later = build_image(tmp_path / "a.tar", wheel, tmp_path / "c.oci.tar", SDE + 1, ref_name="demo:1",
                        workdir=tmp_path / "wc")
    assert later["image_digest"] != a["image_digest"]


def test_layout_blobs_and_layers(tmp_path):
    rec = build_image(_rootfs(tmp_path / "r.tar", mtime=5, uid=7), _wheel(tmp_path / "demo-1.0-py3-none-any.whl"),
                      tmp_path / "i.oci.tar", SDE, ref_name="demo:1", workdir=tmp_path / "w")
    image = tmp_path / "i.oci.tar"
    with tarfile.open(image) as t:
        names = t.getnames()
        index = json.load(t.extractfile("index.json"))
        docker_manifest = json.load(t.extractfile("manifest.json"))
        assert all(m.mtime == SDE and m.uid == 0 and m.gid == 0 for m in t.getmembers())
    assert names == sorted(names)
    assert {"oci-layout", "index.json", "manifest.json"} <= set(names)
    assert index["manifests"][0]["digest"] == rec["image_digest"]
    manifest = json.loads(_blob(image, rec["image_digest"]))
    assert [la["digest"] for la in manifest["layers"]] == [la["digest"] for la in rec["layers"]]
    config = json.loads(_blob(image, rec["config_digest"]))
    assert config["rootfs"]["diff_ids"] == [la["digest"] for la in rec["layers"]]
    assert config["created"] == "2023-11-14T22:13:20Z"
    assert docker_manifest[0]["RepoTags"] == ["demo:1"]

    base = _members(_blob(image, rec["layers"][0]["digest"]))
    # Host keys, devices and the root entry are left out; the hard link became a plain file.
    assert sorted(base) == ["etc/ssh/sshd_config", "usr/bin/python3", "usr/bin/python3.11",
                            "usr/lib/python3.11/os.py"]
    assert base["usr/bin/python3"].isfile() and base["usr/bin/python3"].size == 4
    assert {(m.uid, m.uname, m.mtime) for m in base.values()} == {(0, "", SDE)}

    layer_bytes = _blob(image, rec["layers"][1]["digest"])
    wheel = _members(layer_bytes)
    site = "usr/local/lib/python3.11/dist-packages"
    assert f"{site}/demo/__init__.py" in wheel
    assert wheel["usr/local/bin/demo"].mode == 0o755
    with tarfile.open(fileobj=io.BytesIO(layer_bytes)) as t:
        script = t.extractfile("usr/local/bin/demo").read().decode()
        tool = t.extractfile("usr/local/bin/demo-tool").read().decode()
        record = t.extractfile(f"{site}/demo-1.0.dist-info/RECORD").read().decode().splitlines()
        installer = t.extractfile(f"{site}/demo-1.0.dist-info/INSTALLER").read()
    assert script.startswith("#!/usr/bin/python3\n") and "from demo.cli import main" in script
    assert tool.startswith("#!/usr/bin/python3\n")
    assert installer == b"assay-oci-image\n"
    assert "demo-1.0.dist-info/RECORD,," in record and "stale,," not in record
    assert any(r.startswith("../../../../usr/local/bin/demo,sha256=") for r in record)


def test_bad_inputs_are_named(tmp_path):
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tar")
    with pytest.raises(ImageError, match="junk.tar: not a readable tar"):
        build_image(junk, _wheel(tmp_path / "d.whl"), tmp_path / "o.tar", SDE, ref_name="d:1", workdir=tmp_path / "w")
    nopy = tmp_path / "nopy.tar"
    with tarfile.open(nopy, "w") as t:
        t.addfile(tarfile.TarInfo("etc"))
    with pytest.raises(ImageError, match="no usr/lib/python3.X/os.py"):
        build_image(nopy, _wheel(tmp_path / "d.whl"), tmp_path / "o.tar", SDE, ref_name="d:1", workdir=tmp_path / "w")
    bad = tmp_path / "bad.whl"
    bad.write_bytes(b"zip? no")
    with pytest.raises(ImageError, match="bad.whl: not a readable zip"):
        build_image(_rootfs(tmp_path / "r.tar", mtime=1, uid=0), bad, tmp_path / "o.tar", SDE, ref_name="d:1",
                    workdir=tmp_path / "w")


@pytest.mark.docker
@pytest.mark.slow
def test_the_engine_image_loads_and_imports_in_docker(tmp_path):
    import docker

    from hosts.rootfs_image import ensure_image

    base_tag = ensure_image(docker.from_env(), log=lambda *_: None)
    rootfs = oci_image.rootfs_from_docker_image(base_tag, tmp_path / "rootfs.tar")
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", str(ENGINE), "-o",
                    str(tmp_path / "dist")], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("assay_engine-*.whl"))
    tag = f"assay-engine-test:{uuid.uuid4().hex[:10]}"
    rec = build_image(rootfs, wheel, tmp_path / "engine.oci.tar", SDE, ref_name=tag, workdir=tmp_path / "w")
    try:
        load = subprocess.run(["docker", "load", "-i", str(tmp_path / "engine.oci.tar")], capture_output=True,
                              text=True, timeout=300)
        assert load.returncode == 0, load.stderr
        assert f"Loaded image: {tag}" in load.stdout
        inspect = json.loads(subprocess.run(["docker", "image", "inspect", tag], capture_output=True, text=True,
                                            check=True).stdout)[0]
        # The daemon's image id is the config digest, its layers the diff ids we recorded.
        assert inspect["Id"] == rec["config_digest"]
        assert inspect["RootFS"]["Layers"] == [la["digest"] for la in rec["layers"]]
        run = subprocess.run(["docker", "run", "--rm", "--network", "none", tag, "python3", "-c",
                              "import engine; print(engine.__version__, engine.__file__)"],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == ["0.1.0", "/usr/local/lib/python3.11/dist-packages/engine/__init__.py"]
        cli = subprocess.run(["docker", "run", "--rm", "--network", "none", tag], capture_output=True, text=True,
                             timeout=120)
        assert cli.returncode == 0 and "make-tiny-model" in cli.stdout
        keys = subprocess.run(["docker", "run", "--rm", "--network", "none", tag, "sh", "-c",
                               "ls /etc/ssh | grep -c ssh_host_ || true"], capture_output=True, text=True, timeout=120)
        assert keys.stdout.strip() == "0"
        from builders.image_sbom import image_bom

        purls = {c["purl"].split("@")[0] for c in image_bom(tmp_path / "engine.oci.tar", SDE)["components"]}
        assert {"pkg:deb/debian/python3", "pkg:deb/debian/openssh-server", "pkg:pypi/assay-engine"} <= purls
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def _copied(result, into: Path):
    """RESULT with its artifacts copied into INTO (the session fixture's own stay untouched)."""
    from dataclasses import replace

    into.mkdir(parents=True)
    return replace(result, artifacts=[Path(shutil.copy2(p, into / p.name)) for p in result.artifacts])


def test_each_build_gets_its_image_in_its_receipt_and_the_comparison(built_fixture, tmp_path):
    from builders.compare import compare
    from builders.recipe import with_image

    rootfs = _rootfs(tmp_path / "rootfs.tar", mtime=3, uid=0)
    a = with_image(_copied(built_fixture.a, tmp_path / "artifacts" / "a"), built_fixture.candidate, rootfs)
    b = with_image(_copied(built_fixture.b, tmp_path / "artifacts" / "b"), built_fixture.candidate, rootfs)
    image_a = next(p for p in a.artifacts if p.name.endswith(oci_image.SUFFIX))
    assert image_a.parent == tmp_path / "artifacts" / "a"
    assert a.subjects[-1] == {"name": image_a.name, "digest": {"sha256": oci_image._sha256(image_a)}}
    assert a.record["buildDefinition"]["externalParameters"]["targets"][-1] == "image"
    env = a.record["buildDefinition"]["internalParameters"]["environment"]["image"]
    assert env == b.record["buildDefinition"]["internalParameters"]["environment"]["image"]
    assert [la["role"] for la in env["layers"]] == ["base", "wheel"]
    byproducts = {p["name"]: p["digest"]["sha256"] for p in a.record["runDetails"]["byproducts"]}
    assert byproducts[f"{image_a.name}#layer-1-wheel"] == env["layers"][1]["digest"].removeprefix("sha256:")
    record = compare(image_a.parent, tmp_path / "artifacts" / "b", built_fixture.candidate)
    assert record["verdict"] == "reproducible"
    assert {f["name"]: f["identical"] for f in record["files"]}[image_a.name] is True


def test_an_image_difference_is_named_by_layer_and_member(built_fixture, tmp_path):
    from builders.compare import compare

    rootfs = _rootfs(tmp_path / "rootfs.tar", mtime=3, uid=0)
    for side, body in (("a", "x = 1\n"), ("b", "x = 2\n")):
        (tmp_path / side).mkdir()
        (tmp_path / f"wheel-{side}").mkdir()
        build_image(rootfs, _wheel(tmp_path / f"wheel-{side}" / "demo-1.0-py3-none-any.whl", body), tmp_path / side / "demo-1.0.oci.tar", SDE,
                    ref_name="demo:1", workdir=tmp_path / f"w{side}")
    record = compare(tmp_path / "a", tmp_path / "b", built_fixture.candidate)
    assert record["verdict"] == "not_reproducible" and record["unexplained"] == 0
    diffs = record["files"][0]["differences"]
    assert ("layer 1 (wheel)/usr/local/lib/python3.11/dist-packages/demo/__init__.py", "content") in \
        {(d["member"], d["kind"]) for d in diffs}
    # RECORD lists the changed file's hash, so it differs too; the base layer and config do not.
    assert not any(d["member"].startswith(("layer 0", "config")) for d in diffs)


def test_the_image_sbom_lists_the_dpkg_packages_and_the_wheel_with_versions(tmp_path):
    from builders.image_sbom import image_bom

    rootfs = _rootfs(tmp_path / "rootfs.tar", mtime=3, uid=0)
    status = (b"Package: python3\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-1+b1\n\n"
              b"Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n")
    with tarfile.open(rootfs, "a") as t:
        ti = tarfile.TarInfo("./var/lib/dpkg/status")
        ti.size = len(status)
        t.addfile(ti, io.BytesIO(status))
    rec = build_image(rootfs, _wheel(tmp_path / "demo-1.0-py3-none-any.whl"), tmp_path / "i.oci.tar", SDE,
                      ref_name="demo:1", workdir=tmp_path / "w")
    bom = image_bom(tmp_path / "i.oci.tar", SDE)
    assert sorted(c["purl"] for c in bom["components"]) == [
        "pkg:deb/debian/python3@3.11.2-1%2Bb1?arch=amd64&distro=debian-12", "pkg:pypi/demo@1.0"]
    assert bom["metadata"]["component"]["bom-ref"] == rec["image_digest"]
    assert bom == image_bom(tmp_path / "i.oci.tar", SDE)
