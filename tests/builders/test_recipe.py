import json
import tarfile
import zipfile

import pytest

from builders.compare import compare
from builders.errors import BuilderError, BuildFailed
from builders.recipe import build
from hosts.local import LocalHost
from releases import keys, receipts
from releases.canonical import canonical_json, file_sha256
from releases.schema import validate
from builders.snapshot import export_source, freeze
from tests.builders.conftest import COMMIT_EPOCH, fixture_files, make_repo


def test_two_builds_of_a_fixture_are_identical(built_fixture):
    a, b = built_fixture.a, built_fixture.b
    assert [p.name for p in a.artifacts] == ["fixture_pkg-1.2.3-py3-none-any.whl", "fixture_pkg-1.2.3.tar.gz"]
    assert [p.read_bytes() for p in a.artifacts] == [p.read_bytes() for p in b.artifacts]
    assert a.subjects == b.subjects
    assert a.subjects[0]["digest"]["sha256"] == file_sha256(a.artifacts[0])
    with zipfile.ZipFile(built_fixture.wheel_a) as zf:  # the build really used SOURCE_DATE_EPOCH
        assert {i.date_time for i in zf.infolist()} == {(2025, 1, 2, 3, 4, 4)}
    rec = compare(a.artifacts[0].parent, b.artifacts[0].parent, built_fixture.candidate)
    assert rec["verdict"] == "reproducible"
    assert rec["difference_count"] == 0 and rec["unexplained"] == 0
    assert [f["identical"] for f in rec["files"]] == [True, True]


def test_build_output_streams_to_the_progress_callback(built_fixture):
    for label, result in (("a", built_fixture.a), ("b", built_fixture.b)):
        text = "".join(t for lab, _, t in built_fixture.progress if lab == label)
        assert "Successfully built" in text and "fixture_pkg-1.2.3.tar.gz" in text
        # The log is stdout then stderr; the stream interleaves them as they came.
        assert sorted(text.splitlines()) == sorted(result.log.splitlines())
    assert {stream for _, stream, _ in built_fixture.progress} <= {"stdout", "stderr"}


def test_build_records_are_provenance_and_show_what_varied(built_fixture):
    a, b = built_fixture.a.record, built_fixture.b.record
    for rec in (a, b):
        validate("build", rec, "test")
        assert built_fixture.root.as_posix().encode() not in canonical_json(rec)
    ext = a["buildDefinition"]["externalParameters"]
    assert ext["candidate"]["commit"] == built_fixture.candidate["commit"]
    assert a["buildDefinition"]["resolvedDependencies"][0]["digest"]["gitCommit"] == ext["candidate"]["commit"]
    env = a["buildDefinition"]["internalParameters"]["environment"]
    assert env["variables"]["SOURCE_DATE_EPOCH"] == str(COMMIT_EPOCH)
    assert env["toolchain"]["packages"]["hatchling"] == "1.29.0"
    va = a["buildDefinition"]["internalParameters"]["varied"]
    vb = b["buildDefinition"]["internalParameters"]["varied"]
    assert va["build_dir"] != vb["build_dir"]
    assert va["variables"]["USER"] != vb["variables"]["USER"]
    assert (va["host"], vb["host"]) == ("builder-a", "builder-b")
    assert a["runDetails"]["metadata"]["invocationId"] != b["runDetails"]["metadata"]["invocationId"]


def test_build_record_signs_as_a_slsa_receipt(built_fixture):
    key_path, _ = keys.ensure_local_key(built_fixture.root / "keys")
    env = receipts.sign_receipt("build", built_fixture.a.subjects, built_fixture.a.record,
                                keys.load_private_key(key_path))
    public = keys.load_private_key(key_path).public_key()
    statement, predicate = receipts.open_receipt(env, public, expected_kind="build")
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert predicate == json.loads(canonical_json(built_fixture.a.record))


def test_build_refuses_an_existing_directory_and_reports_failures(built_fixture, tmp_path):
    host = LocalHost()
    with pytest.raises(BuildFailed, match="already exists"):
        build(host, built_fixture.candidate, built_fixture.source, "c", str(built_fixture.workroot / "a"))
    with pytest.raises(BuildFailed, match="does not hold the candidate's source"):
        build(host, built_fixture.candidate, built_fixture.repo, "c", str(tmp_path / "w0"))
    files = fixture_files()
    files["pkg/pyproject.toml"] = files["pkg/pyproject.toml"].replace('"hatchling.build"', '"no_such.backend"')
    repo = make_repo(tmp_path / "broken", files)
    cand = freeze(repo, subdir="pkg")
    src = export_source(repo, cand, tmp_path / "src")
    with pytest.raises(BuildFailed) as err:
        build(host, cand, src, "c", str(tmp_path / "work"), timeout=120)
    assert "exited" in str(err.value) and err.value.label == "c"
    assert "no_such" in err.value.output_tail


def test_a_wheel_only_build_leaves_the_kernels_step_out(tmp_path):
    # A source whose kernels step cannot run: the full build fails in that step; the wheel-only
    # build (the incumbent's, `assay lanes import`'s) never starts it, and stays reproducible.
    files = fixture_files()
    files["pkg/pyproject.toml"] += '\n[tool.assay.kernels]\nmodule = "fixturepkg.no_such_kernels"\narchs = [90]\n'
    repo = make_repo(tmp_path / "kernels-src", files)
    cand = freeze(repo, subdir="pkg")
    src = export_source(repo, cand, tmp_path / "src")
    with pytest.raises(BuildFailed, match="kernels step `python -m fixturepkg.no_such_kernels` exited"):
        build(LocalHost(), cand, src, "a", str(tmp_path / "full"), timeout=120)
    only = build(LocalHost(), cand, src, "a", str(tmp_path / "wheel-only"), timeout=120, kernels_step=False)
    assert [p.name for p in only.artifacts] == ["fixture_pkg-1.2.3-py3-none-any.whl", "fixture_pkg-1.2.3.tar.gz"]
    definition = only.record["buildDefinition"]
    assert definition["externalParameters"]["targets"] == ["wheel", "sdist"]
    assert "kernels" not in definition["internalParameters"]["environment"]
    again = build(LocalHost(), cand, src, "a", str(tmp_path / "again"), timeout=120, kernels_step=False)
    assert only.artifacts[0].read_bytes() == again.artifacts[0].read_bytes()


def test_remote_host_needs_an_interpreter(built_fixture, tmp_path):
    class OtherHost:  # a stand-in only for the type check: nothing runs on it
        name = "elsewhere"

    with pytest.raises(BuilderError, match="python="):
        build(OtherHost(), built_fixture.candidate, built_fixture.source, "c", str(tmp_path / "w"))


def test_a_build_under_a_checkout_takes_nothing_from_the_checkout(tmp_path):
    """Hatchling applies (and ships) the first .gitignore above the source it finds before a .git:
    the build directory's own .git boundary keeps an enclosing checkout's out of the build."""
    repo = make_repo(tmp_path / "src-repo", fixture_files())
    candidate = freeze(repo, subdir="pkg")
    source = export_source(repo, candidate, tmp_path / "export")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".gitignore").write_text("data.py\n")  # would drop a source file from the wheel and sdist
    built = build(LocalHost("h"), candidate, source, "a", str(checkout / "work" / "a"), timeout=300)
    wheel = next(p for p in built.artifacts if p.suffix == ".whl")
    with zipfile.ZipFile(wheel) as zf:
        assert "fixturepkg/data.py" in zf.namelist()
    sdist = next(p for p in built.artifacts if p.name.endswith(".tar.gz"))
    with tarfile.open(sdist) as tf:
        names = tf.getnames()
    assert "fixture_pkg-1.2.3/fixturepkg/data.py" in names and "fixture_pkg-1.2.3/.gitignore" not in names
