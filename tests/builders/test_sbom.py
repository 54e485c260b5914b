import hashlib
import json
import uuid
import zipfile

from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from spdx_tools.spdx.parser.parse_anything import parse_file
from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

from builders.sbom import write_sboms
from releases.canonical import file_sha256


def test_sboms_validate_and_are_byte_identical_across_runs(built_fixture, tmp_path):
    first = write_sboms(built_fixture.wheel_a, built_fixture.candidate, tmp_path / "one")
    second = write_sboms(built_fixture.b.artifacts[0], built_fixture.candidate, tmp_path / "two")
    for kind in ("spdx-2.3", "cyclonedx-1.5"):
        assert first[kind].read_bytes() == second[kind].read_bytes(), kind
        assert str(tmp_path).encode() not in first[kind].read_bytes()
        assert str(built_fixture.root).encode() not in first[kind].read_bytes()
    assert first["spdx-2.3"].name == "fixture_pkg-1.2.3-py3-none-any.spdx.json"
    assert validate_full_spdx_document(parse_file(str(first["spdx-2.3"]))) == []
    assert JsonStrictValidator(SchemaVersion.V1_5).validate_str(first["cyclonedx-1.5"].read_text()) is None


def test_spdx_content(built_fixture, tmp_path):
    wheel = built_fixture.wheel_a
    doc = json.loads(write_sboms(wheel, built_fixture.candidate, tmp_path)["spdx-2.3"].read_text())
    assert doc["spdxVersion"] == "SPDX-2.3"
    assert doc["creationInfo"]["created"] == "2025-01-02T03:04:05Z"
    assert str(uuid.uuid5(uuid.NAMESPACE_URL, f"sha256:{file_sha256(wheel)}")) in doc["documentNamespace"]
    pkgs = {p["name"]: p for p in doc["packages"]}
    main = pkgs["fixture-pkg"]
    assert main["versionInfo"] == "1.2.3"
    assert {"algorithm": "SHA256", "checksumValue": file_sha256(wheel)} in main["checksums"]
    rels = {(r["spdxElementId"], r["relationshipType"], r["relatedSpdxElement"]) for r in doc["relationships"]}
    for dep in ("numpy", "jinja2"):
        assert (main["SPDXID"], "DEPENDS_ON", pkgs[dep]["SPDXID"]) in rels
    assert "numpy>=2.0" in pkgs["numpy"]["comment"]
    with zipfile.ZipFile(wheel) as zf:
        expected = {f"./{i.filename}": hashlib.sha256(zf.read(i)).hexdigest() for i in zf.infolist()}
    got = {f["fileName"]: next(c["checksumValue"] for c in f["checksums"] if c["algorithm"] == "SHA256")
           for f in doc["files"]}
    assert got == expected


def test_cyclonedx_content(built_fixture, tmp_path):
    wheel = built_fixture.wheel_a
    bom = json.loads(write_sboms(wheel, built_fixture.candidate, tmp_path)["cyclonedx-1.5"].read_text())
    assert bom["specVersion"] == "1.5"
    assert bom["serialNumber"] == f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, 'sha256:' + file_sha256(wheel))}"
    assert bom["metadata"]["timestamp"].startswith("2025-01-02T03:04:05")
    main = bom["metadata"]["component"]
    assert (main["name"], main["version"]) == ("fixture-pkg", "1.2.3")
    assert main["hashes"] == [{"alg": "SHA-256", "content": file_sha256(wheel)}]
    deps = {d["ref"]: d.get("dependsOn", []) for d in bom["dependencies"]}
    assert deps[main["bom-ref"]] == ["pkg:pypi/jinja2", "pkg:pypi/numpy"]
    props = {p["name"]: p["value"] for p in main["properties"]}
    assert props["assay:git-commit"] == built_fixture.candidate["commit"]


def test_a_different_wheel_gets_a_different_identity(built_fixture, tmp_path):
    other = tmp_path / built_fixture.wheel_a.name
    with zipfile.ZipFile(built_fixture.wheel_a) as src, zipfile.ZipFile(other, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info) + (b"# changed\n" if info.filename.endswith("data.py") else b""))
    one = json.loads(write_sboms(built_fixture.wheel_a, built_fixture.candidate, tmp_path / "1")["spdx-2.3"].read_text())
    two = json.loads(write_sboms(other, built_fixture.candidate, tmp_path / "2")["spdx-2.3"].read_text())
    assert one["documentNamespace"] != two["documentNamespace"]


def test_sboms_and_sums_fit_the_release_directory(built_fixture, tmp_path):
    from releases.release_dir import ReleaseDir
    from tests.builders.test_sums_drift import sums_bytes

    rd = ReleaseDir(tmp_path / "release")
    for path in built_fixture.a.artifacts:
        rd.add_artifact(path, "wheel" if path.suffix == ".whl" else "sdist")
    sboms = write_sboms(built_fixture.wheel_a, built_fixture.candidate, tmp_path / "sbom")
    for fmt, path in sboms.items():
        rd.add_sbom(path, fmt)
    rd.write_sums()
    # The release directory names files as artifacts/<name> and sbom/<name>.
    assert (tmp_path / "release" / "SHA256SUMS").read_bytes() == sums_bytes(built_fixture.a.artifacts, sboms.values())


def test_the_kernels_artifact_is_named_in_both_sboms(built_fixture, tmp_path):
    kernels = tmp_path / "fixture_pkg-1.2.3-kernels.tar"
    kernels.write_bytes(b"cubins stand in here: the SBOM names the artifact by its digests\n")
    paths = write_sboms(built_fixture.wheel_a, built_fixture.candidate, tmp_path / "sbom", kernels=kernels)
    assert validate_full_spdx_document(parse_file(str(paths["spdx-2.3"]))) == []
    assert JsonStrictValidator(SchemaVersion.V1_5).validate_str(paths["cyclonedx-1.5"].read_text()) is None
    sha = file_sha256(kernels)
    spdx = json.loads(paths["spdx-2.3"].read_text())
    [pkg] = [p for p in spdx["packages"] if p["name"] == kernels.name]
    assert {"algorithm": "SHA256", "checksumValue": sha} in pkg["checksums"]
    rels = {(r["spdxElementId"], r["relationshipType"], r["relatedSpdxElement"]) for r in spdx["relationships"]}
    assert (pkg["SPDXID"], "GENERATED_FROM", "SPDXRef-Package-fixture-pkg") in rels
    cdx = json.loads(paths["cyclonedx-1.5"].read_text())
    [comp] = [c for c in cdx["components"] if c["name"] == kernels.name]
    assert comp["hashes"] == [{"alg": "SHA-256", "content": sha}]


def test_dependencies_carry_the_versions_resolved_where_the_lanes_run(built_fixture, tmp_path):
    """Purls with versions from the lane environment (here this interpreter, as a local lane's)."""
    import sys

    import numpy

    from builders import resolved_deps
    from builders.wheel_meta import read_wheel
    from hosts.local import LocalHost

    wheel = built_fixture.wheel_a
    names = [d.name for d in read_wheel(wheel).dependencies]
    resolved = resolved_deps.resolve(LocalHost("local"), sys.executable, names)
    assert resolved["versions"]["numpy"] == numpy.__version__
    assert resolved["python"] == ".".join(map(str, sys.version_info[:3]))
    paths = write_sboms(wheel, built_fixture.candidate, tmp_path, resolved=resolved)
    cdx = json.loads(paths["cyclonedx-1.5"].read_text())
    dep = next(c for c in cdx["components"] if c["name"] == "numpy")
    assert (dep["version"], dep["purl"]) == (numpy.__version__, f"pkg:pypi/numpy@{numpy.__version__}")
    spdx = json.loads(paths["spdx-2.3"].read_text())
    pkg = next(p for p in spdx["packages"] if p["name"] == "numpy")
    assert pkg["versionInfo"] == numpy.__version__
    assert [r["referenceLocator"] for r in pkg["externalRefs"]] == [f"pkg:pypi/numpy@{numpy.__version__}"]
    assert validate_full_spdx_document(parse_file(str(paths["spdx-2.3"]))) == []
    assert JsonStrictValidator(SchemaVersion.V1_5).validate_str(paths["cyclonedx-1.5"].read_text()) is None
