"""SHA256SUMS format: sorted, two spaces, LF; strict parsing."""
from __future__ import annotations

import pytest

from releases.errors import RecordError
from releases.sums import compute_sums, format_sums, parse_sums

A, B = "a" * 64, "b" * 64


def test_format_is_sorted_lf():
    data = format_sums({"sbom/x.cdx.json": B, "artifacts/y.whl": A})
    assert data == f"{A}  artifacts/y.whl\n{B}  sbom/x.cdx.json\n".encode()
    assert parse_sums(data) == {"artifacts/y.whl": A, "sbom/x.cdx.json": B}
    assert format_sums({}) == b"" and parse_sums(b"") == {}


@pytest.mark.parametrize("data, fragment", [
    (f"{A}  b\n{B}  a\n".encode(), "line 2: not sorted"),
    (f"{A}  a\r\n".encode(), "line 1 is not"),
    (f"{A} a\n".encode(), "line 1 is not"),
    (f"{A.upper()}  a\n".encode(), "line 1 is not"),
    (f"{A}  a\n{A}  a\n".encode(), "duplicate path a"),
    (f"{A}  a".encode(), "does not end with LF"),
    (f"{A}  /etc/passwd\n".encode(), "line 1 is not"),
])
def test_parse_rejects(data, fragment):
    with pytest.raises(RecordError, match=fragment) as info:
        parse_sums(data)
    assert info.value.where == "SHA256SUMS"


def test_format_rejects_bad_input():
    with pytest.raises(RecordError, match="not a sha256"):
        format_sums({"a": "xyz"})
    with pytest.raises(RecordError, match="relative"):
        format_sums({"../a": A})


def test_compute_covers_artifacts_and_sbom_only(tmp_path):
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "sbom").mkdir()
    (tmp_path / "artifacts" / "w.whl").write_bytes(b"")
    (tmp_path / "sbom" / "s.spdx.json").write_bytes(b"{}")
    (tmp_path / "ledger.json").write_bytes(b"{}")
    sums = compute_sums(tmp_path)
    assert sums == {"artifacts/w.whl": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                    "sbom/s.spdx.json": "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}
