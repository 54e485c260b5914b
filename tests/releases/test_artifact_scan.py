"""Private markers in shipped artifacts: planted in a wheel member, the release fails verification and
publishing, and the failure names the file and the member (and the line)."""
import gzip
import io
import tarfile
import zipfile

import pytest

from releases.errors import VerificationFailed
from releases.publish import publish_release
from releases.stores import LocalStore
from releases.verify import verify_release
from releases.verify.artifact_scan import MAX_MEMBER_BYTES, scan_artifact
from tests.releases.fixtures import build_release

WHEEL = "artifacts/assay_engine-1.2.3-py3-none-any.whl"


def test_a_private_path_planted_in_a_wheel_member_fails_the_release(tmp_path):
    planted = {"engine/paths.py": "import os\nCACHE = '/home/builder/.cache/assay'\n"}
    rel = build_release(tmp_path / "1.2.3", state="published", wheel_members=planted)
    report = verify_release(rel.root, public_key=rel.public_key)
    assert not report.ok
    assert [(f.file, f.field) for f in report.failures] == [(WHEEL, "engine/paths.py line 2")]
    assert "home directory" in report.failures[0].message
    with pytest.raises(VerificationFailed) as err:
        publish_release(rel.root, LocalStore(tmp_path / "store"), "1.2.3", public_key=rel.public_key)
    assert WHEEL in str(err.value) and "engine/paths.py line 2" in str(err.value)
    assert not (tmp_path / "store" / "1.2.3").exists()


def test_configured_markers_build_paths_and_binary_members_are_found(tmp_path):
    planted = {"engine/_native.so": b"\x7fELF\x00\x00" + b"/srv/ci/build-7/engine/kernels.cu\x00" + b"\x00" * 8,
               "engine/keys.txt": "-----BEGIN OPENSSH PRIVATE KEY-----\n"}
    rel = build_release(tmp_path / "1.2.3", state="published", wheel_members=planted)
    report = verify_release(rel.root, public_key=rel.public_key, private_markers=["/srv/ci/"])
    found = {(f.file, f.field, f.message) for f in report.failures}
    assert found == {(WHEEL, "engine/_native.so (binary)", "private marker: private string '/srv/ci/'"),
                     (WHEEL, "engine/keys.txt line 1", "private marker: PEM private key")}
    # Without the configured marker the build path is not a known pattern: only the key is caught.
    report = verify_release(rel.root, public_key=rel.public_key)
    assert [f.field for f in report.failures] == ["engine/keys.txt line 1"]


def test_a_clean_release_passes_the_artifact_scan(tmp_path):
    rel = build_release(tmp_path / "1.2.3", state="published")
    assert verify_release(rel.root, public_key=rel.public_key, private_markers=["/srv/ci/"]).ok


def test_sdist_members_are_scanned_and_oversized_members_fail_closed(tmp_path):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        for name, body in (("pkg-1/setup.cfg", b"[x]\ntoken = ghp_" + b"a" * 36 + b"\n"),
                           ("pkg-1/README", b"fine\n")):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tf.addfile(info, io.BytesIO(body))
    sdist = tmp_path / "pkg-1.tar.gz"
    sdist.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    assert scan_artifact(sdist) == [("pkg-1/setup.cfg line 2", "private marker: GitHub token")]

    big = tmp_path / "big.whl"
    with zipfile.ZipFile(big, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("huge.bin", b"\0" * (MAX_MEMBER_BYTES + 1))
    assert scan_artifact(big) == [("huge.bin", f"not scanned: larger than {MAX_MEMBER_BYTES} bytes")]
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"not a zip")
    [(where, what)] = scan_artifact(broken)
    assert where == "" and what.startswith("not scanned: the archive cannot be read")


def test_kernels_tar_members_are_scanned(tmp_path):
    # A cubin compiled with line info names the directory its kernel sources were imported from.
    cubin = b"\x7fELF\x02\x01" + b"\x00" * 16 + b"/srv/ci/build-7/kernels/site/engine/kernels\x00" + b"\x00" * 8
    kernels = tmp_path / "assay_engine-1.2.3-kernels.tar"
    with tarfile.open(kernels, "w", format=tarfile.USTAR_FORMAT) as tf:
        for name, body in (("cache/KEY/_decode_split_kernel.cubin", cubin), ("index.json", b"{}\n")):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tf.addfile(info, io.BytesIO(body))
    assert scan_artifact(kernels, ["/srv/ci/"]) == [
        ("cache/KEY/_decode_split_kernel.cubin (binary)", "private marker: private string '/srv/ci/'")]
