"""verify and show treat every input as data: names and values printed literally, bounded JSON,
sizes checked before reading, and a clean error with the right exit code, never a traceback."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from typer.testing import CliRunner

from releases.canonical import load_json_bytes
from releases.cli import app
from releases.errors import RecordError
from releases.keys import key_id
from releases.verify import verify_release
from tests.releases.fixtures import build_release

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
DEEP = b"[" * 100_000 + b"]" * 100_000
HUGE_INT = b'{"n": ' + b"9" * 5000 + b"}"


def _verify(rel, *args: str):
    return runner.invoke(app, ["verify", str(rel.root), "--expect-key-id", key_id(rel.public_key), *args],
                         env={"COLUMNS": "400"})


def _clean(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name", ["[/red]x", "[reverse]OK[red]x.txt", ":warning: [bold]", "a\x1b[31mred"])
def test_file_names_are_printed_literally(published_release, name):
    path = published_release.root / name  # "[/red]x" is the file "red]x" in a folder "["
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"x")
    result = _verify(published_release)
    _clean(result)
    assert result.exit_code == 1
    shown = name.replace("\x1b", "\\x1b")
    assert shown in result.stdout
    assert "\x1b[31m" not in result.stdout


def test_record_values_are_printed_literally(published_release):
    path = published_release.root / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["version"] = "[/red][reverse]OK"
    path.write_text(json.dumps(manifest))
    result = _verify(published_release)
    _clean(result)
    assert result.exit_code == 1 and "[/red][reverse]OK" in result.stdout


@pytest.mark.parametrize("payload, fragment", [(DEEP, "nested deeper than 64 levels"),
                                               (HUGE_INT, "(5000 digits) is outside")])
@pytest.mark.parametrize("role", ["manifest.json", "receipt-lane-h200", "sbom", "manifest.sig"])
def test_hostile_json_is_a_failure_naming_the_file(published_release, payload, fragment, role):
    rel = published_release.files[role]
    (published_release.root / rel).write_bytes(payload)
    for args in ((), ("--json",)):
        result = _verify(published_release, *args)
        _clean(result)
        assert result.exit_code == 1
        if args:
            failures = json.loads(result.stdout)["failures"]
            assert any(f["file"] == rel and fragment in f["message"] for f in failures), failures


@pytest.mark.parametrize("payload, fragment", [(DEEP, "nested deeper"), (HUGE_INT, "digits"), (b"\xff\xfe", "UTF-8")])
def test_show_refuses_hostile_manifest_as_bad_input(published_release, payload, fragment):
    (published_release.root / "manifest.json").write_bytes(payload)
    result = runner.invoke(app, ["show", str(published_release.root)])
    _clean(result)
    assert result.exit_code == 3
    assert fragment in result.stderr and "manifest.json" in result.stderr


def test_not_a_directory_is_bad_input(tmp_path):
    result = runner.invoke(app, ["verify", str(tmp_path / "absent")])
    _clean(result)
    assert result.exit_code == 3 and "not a directory" in result.stderr


def test_sparse_3gib_artifact_is_refused_by_size_unread(published_release):
    rel = published_release.files["artifact"]
    with open(published_release.root / rel, "r+b") as fh:
        fh.truncate(3 << 30)  # sparse: no disk used, 3 GiB apparent
    # Under a 1 GiB address-space limit, reading the file whole would fail with MemoryError.
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "from releases.cli import main; sys.argv = ['assay-verify'] + sys.argv[1:]; main()")
    proc = subprocess.run([sys.executable, "-c", code, "verify", "--json", "--expect-key-id",
                           key_id(published_release.public_key), str(published_release.root)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1
    failures = json.loads(proc.stdout)["failures"]
    assert {"file": rel, "field": "size"} in [{k: f[k] for k in ("file", "field")} for f in failures]
    assert any("not read" in f["message"] for f in failures if f["file"] == rel)


_json_text = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                          max_leaves=12).map(lambda o: json.dumps(o).encode())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=200), _json_text,
                      st.integers(1, 300).map(lambda n: b"{\"a\":" * n + b"1" + b"}" * n)),
       role=st.sampled_from(["manifest.json", "receipt-approval", "ledger", "waiver"]))
def test_any_bytes_in_any_record_give_failures_not_exceptions(published_release, data, role):
    rel = published_release.files[role]
    path = published_release.root / rel
    original = path.read_bytes()
    try:
        path.write_bytes(data)
        report = verify_release(published_release.root, require_ready=True)
        assert not report.ok and report.failures
        assert all(isinstance(f.message, str) and f.file for f in report.failures)
    finally:
        path.write_bytes(original)


@given(depth=st.integers(65, 5000))
@settings(max_examples=20, deadline=None)
def test_loader_bounds_depth(depth):
    with pytest.raises(RecordError, match="nested deeper"):
        load_json_bytes(b"[" * depth + b"]" * depth, where="x.json")


@given(digits=st.integers(310, 20_000))
@settings(max_examples=20, deadline=None)
def test_loader_bounds_integers(digits):
    with pytest.raises(RecordError, match=f"{digits} digits") as info:
        load_json_bytes(b"[" + b"7" * digits + b"]", where="x.json")
    assert info.value.where == "x.json"


def test_loader_reads_numbers_as_rfc8785_does():
    assert load_json_bytes(b"[9007199254740991, -9007199254740991, 1.5e300]") == [2**53 - 1, -(2**53 - 1), 1.5e300]
    big = load_json_bytes(b"[9007199254740993, 1" + b"0" * 308 + b"]")
    assert big == [float(2**53), 1e308]  # doubles, as in every other JSON reader
    with pytest.raises(RecordError, match="out of range"):
        load_json_bytes(b"[1e999]")
    assert load_json_bytes(b'["[[[[", "]]]]"]') == ["[[[[", "]]]]"]  # brackets in strings do not nest


def test_brackets_in_file_names_under_release_root(tmp_path):
    rel = build_release(tmp_path / "[red]" / "1.2.3")
    result = _verify(rel)
    _clean(result)
    assert result.exit_code == 0 and "[red]" in result.stdout


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(alphabet="[]/:abOK \\=#", min_size=1, max_size=24)
       .map(lambda t: t.strip("/ ").replace("//", "/"))
       .filter(lambda t: t and all(part not in ("", ".", "..") for part in t.split("/"))))
def test_any_bracketed_name_is_printed_as_it_is(published_release, name):
    path = published_release.root / "extra" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    try:
        result = _verify(published_release)
        _clean(result)
        assert result.exit_code == 1
        assert f"extra/{name}" in result.stdout.replace("\n", "") or f"extra/{name}" in result.stdout
    finally:
        import shutil

        shutil.rmtree(published_release.root / "extra")


def test_trust_file_that_is_a_directory_is_bad_input(published_release, tmp_path):
    result = runner.invoke(app, ["verify", str(published_release.root), "--trust", str(tmp_path)])
    _clean(result)
    assert result.exit_code == 3 and "is a directory" in result.stderr
