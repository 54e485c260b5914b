import shutil
import zipfile

import pytest

from builders.drift import check_drift
from builders.errors import BuilderError
from releases.canonical import file_sha256
from releases.errors import RecordError
from releases.sums import format_sums, parse_sums


def sums_bytes(artifacts, sboms=()):
    """SHA256SUMS as a release directory writes it (releases.sums names the layout)."""
    entries = {f"artifacts/{p.name}": file_sha256(p) for p in artifacts}
    entries.update({f"sbom/{p.name}": file_sha256(p) for p in sboms})
    return format_sums(entries)


def published_sums(built):
    return sums_bytes(built.a.artifacts, [])


def test_sums_list_artifacts_and_sboms_sorted(built_fixture, tmp_path):
    sbom = tmp_path / "x.spdx.json"
    sbom.write_text("{}\n")
    text = sums_bytes(built_fixture.a.artifacts, [sbom])
    entries = parse_sums(text)
    assert list(entries) == sorted(entries)
    assert entries["sbom/x.spdx.json"] == file_sha256(sbom)
    for art in built_fixture.a.artifacts:
        assert entries[f"artifacts/{art.name}"] == file_sha256(art)
    assert text.decode().splitlines()[0] == f"{entries[next(iter(entries))]}  {next(iter(entries))}"


def test_unchanged_rebuild_matches(built_fixture):
    a, b = built_fixture.a.artifacts[0].parent, built_fixture.b.artifacts[0].parent
    rec = check_drift(a, b, published_sums(built_fixture), built_fixture.candidate, "1.2.3")
    assert rec["drift"] is False
    assert [f["status"] for f in rec["files"]] == ["matches", "matches"]
    assert rec["candidate"]["commit"] == built_fixture.candidate["commit"]


def test_assets_the_pipeline_writes_are_not_rebuilt(built_fixture, tmp_path):
    """The release also lists an installer the pipeline wrote: not expected from a rebuild, so only
    the built paths are checked; checking every artifacts/ entry reports it missing."""
    a, b = built_fixture.a.artifacts[0].parent, built_fixture.b.artifacts[0].parent
    installer = tmp_path / "assay-install-1.2.3.pyz"
    installer.write_bytes(b"PK zipapp")
    sums = sums_bytes([*built_fixture.a.artifacts, installer])
    built = [f"artifacts/{p.name}" for p in built_fixture.a.artifacts]
    rec = check_drift(a, b, sums, built_fixture.candidate, "1.2.3", built=built)
    assert rec["drift"] is False and [f["name"] for f in rec["files"]] == sorted(built)
    rec = check_drift(a, b, sums, built_fixture.candidate, "1.2.3")
    assert rec["drift"] is True
    assert {f["name"]: f["status"] for f in rec["files"]}["artifacts/assay-install-1.2.3.pyz"] == "missing"


def test_drifted_artifact_is_explained_against_the_published_copy(built_fixture, tmp_path):
    wheel = built_fixture.wheel_a
    published = tmp_path / "published"
    published.mkdir()
    # The "published" wheel differs from today's rebuild in one member's timestamp.
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(published / wheel.name, "w") as dst:
        for info in src.infolist():
            if info.filename.endswith("data.py"):
                info.date_time = (2020, 1, 1, 0, 0, 0)
            dst.writestr(info, src.read(info))
    sdist = next(p for p in built_fixture.a.artifacts if p.name.endswith(".tar.gz"))
    shutil.copy(sdist, published / sdist.name)
    sums = sums_bytes(sorted(published.iterdir()))
    a, b = wheel.parent, built_fixture.b.artifacts[0].parent
    rec = check_drift(a, b, sums, built_fixture.candidate, "1.2.3", published_artifacts=published)
    by_name = {f["name"]: f for f in rec["files"]}
    assert rec["drift"] is True
    assert by_name[f"artifacts/{sdist.name}"]["status"] == "matches"
    drifted = by_name[f"artifacts/{wheel.name}"]
    assert drifted["status"] == "drifted"
    assert [(d["member"], d["kind"]) for d in drifted["differences"]] == [("fixturepkg/data.py", "timestamp")]


def test_missing_and_unpublished_artifacts(built_fixture, tmp_path):
    sums = ("0" * 64 + "  artifacts/fixture_pkg-0.9.tar.gz\n").encode()
    a, b = built_fixture.a.artifacts[0].parent, built_fixture.b.artifacts[0].parent
    rec = check_drift(a, b, sums, built_fixture.candidate, "0.9")
    status = {f["name"]: f["status"] for f in rec["files"]}
    assert status["artifacts/fixture_pkg-0.9.tar.gz"] == "missing"
    assert status["artifacts/fixture_pkg-1.2.3.tar.gz"] == "drifted"
    with pytest.raises(RecordError, match="line 1"):
        check_drift(a, b, "not a sums line\n", built_fixture.candidate, "0.9")
    with pytest.raises(BuilderError, match="no artifacts/"):
        check_drift(a, b, "0" * 64 + "  sbom/x.cdx.json\n", built_fixture.candidate, "0.9")
