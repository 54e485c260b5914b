"""Archives crafted byte by byte, each differing in exactly one way, must be named that way."""
import gzip
import io
import tarfile
import zipfile
import zlib

import pytest

from builders.compare import compare
from builders.errors import ForeignWaiver
from releases.canonical import digest

CANDIDATE = {"id": "c" * 64, "commit": "a" * 40, "tree": "b" * 40}
WHEEL = "demo-1.0-py3-none-any.whl"
SDIST = "demo-1.0.tar.gz"
MEMBERS = [("demo/__init__.py", b"x = 1\n"), ("demo/data.txt", b"hello\n" * 50), ("demo-1.0.dist-info/RECORD", b"r\n")]


def make_zip(path, members=MEMBERS, when=(2025, 1, 2, 3, 4, 4), modes=None, comment=b"", level=6):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=when)
            info.external_attr = (modes or {}).get(name, 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data, compresslevel=level)
        zf.comment = comment


def make_targz(path, members=MEMBERS, mtime=1735787045, modes=None, uid=0, gzip_mtime=1735787045):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(f"demo-1.0/{name}")
            info.size, info.mtime, info.uid = len(data), mtime, uid
            info.mode = (modes or {}).get(name, 0o644)
            tf.addfile(info, io.BytesIO(data))
    with open(path, "wb") as fh, gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=gzip_mtime) as gz:
        gz.write(buf.getvalue())


def pair(tmp_path, make, name, kw_a=None, kw_b=None):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    make(tmp_path / "a" / name, **(kw_a or {}))
    make(tmp_path / "b" / name, **(kw_b or {}))
    return compare(tmp_path / "a", tmp_path / "b", CANDIDATE)


def diffs(record):
    return [(d["member"], d["kind"]) for f in record["files"] for d in f["differences"]]


def test_identical_archives_are_reproducible(tmp_path):
    rec = pair(tmp_path, make_zip, WHEEL)
    assert rec["verdict"] == "reproducible" and rec["files"][0]["identical"]


@pytest.mark.parametrize("kw_b, expected", [
    ({"when": (2026, 11, 29, 17, 0, 0)}, [(m, "timestamp") for m, _ in MEMBERS]),
    ({"modes": {"demo/data.txt": 0o755}}, [("demo/data.txt", "mode")]),
    ({"members": [MEMBERS[1], MEMBERS[0], MEMBERS[2]]}, [("demo/__init__.py", "order")]),
    ({"members": MEMBERS[:2]}, [("demo-1.0.dist-info/RECORD", "missing")]),
    ({"members": MEMBERS + [("demo/new.py", b"")]}, [("demo/new.py", "extra")]),
    ({"comment": b"built on a Tuesday"}, [(None, "header")]),
    ({"level": 1}, [("demo/data.txt", "size")]),
    ({"members": [MEMBERS[0], ("demo/data.txt", b"HELLO\n"), MEMBERS[2]]}, [("demo/data.txt", "content")]),
])
def test_each_wheel_difference_is_named(tmp_path, kw_b, expected):
    rec = pair(tmp_path, make_zip, WHEEL, kw_b=kw_b)
    assert diffs(rec) == expected
    assert rec["verdict"] == "not_reproducible" and rec["unexplained"] == 0
    assert rec["difference_count"] == len(expected)


def test_content_difference_says_where(tmp_path):
    changed = [MEMBERS[0], ("demo/data.txt", b"hello\n" * 10 + b"HELLO\n"), MEMBERS[2]]
    rec = pair(tmp_path, make_zip, WHEEL, kw_b={"members": changed})
    (detail,) = [d["detail"] for d in rec["files"][0]["differences"]]
    assert "first difference at byte 60 (line 11)" in detail and "300 -> 66 bytes" in detail


@pytest.mark.parametrize("kw_b, expected", [
    ({"mtime": 1}, [(f"demo-1.0/{m}", "timestamp") for m, _ in MEMBERS]),
    ({"modes": {"demo/__init__.py": 0o600}}, [("demo-1.0/demo/__init__.py", "mode")]),
    ({"uid": 1000}, [(f"demo-1.0/{m}", "header") for m, _ in MEMBERS]),
    ({"gzip_mtime": 42}, [(None, "header")]),
    ({"members": MEMBERS[:1]}, [("demo-1.0/demo/data.txt", "missing"), ("demo-1.0/demo-1.0.dist-info/RECORD", "missing")]),
])
def test_each_sdist_difference_is_named(tmp_path, kw_b, expected):
    rec = pair(tmp_path, make_targz, SDIST, kw_b=kw_b)
    assert diffs(rec) == expected
    assert rec["unexplained"] == 0


def test_gzip_header_detail_names_the_field(tmp_path):
    rec = pair(tmp_path, make_targz, SDIST, kw_b={"gzip_mtime": 42})
    assert rec["files"][0]["differences"][0]["detail"] == "gzip mtime 1735787045 -> 42"


def test_recompressed_tar_with_identical_content_is_size(tmp_path):
    for side, level in (("a", 9), ("b", 1)):
        (tmp_path / side).mkdir()
        make_targz(tmp_path / side / SDIST)
        raw = gzip.decompress((tmp_path / side / SDIST).read_bytes())
        # Same header, different deflate level: only the compressed stream differs.
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
        body = c.compress(raw) + c.flush()
        header = (tmp_path / side / SDIST).read_bytes()[:10]
        trailer = zlib.crc32(raw).to_bytes(4, "little") + len(raw).to_bytes(4, "little")
        (tmp_path / side / SDIST).write_bytes(header + body + trailer)
    rec = compare(tmp_path / "a", tmp_path / "b", CANDIDATE)
    assert diffs(rec) == [(None, "size")] and rec["unexplained"] == 0


def test_bytes_no_member_explains_are_unexplained_content(tmp_path):
    for side, stub in (("a", b"#!stub-one\n"), ("b", b"#!stub-two\n")):
        (tmp_path / side).mkdir()
        make_zip(tmp_path / side / "raw.zip")
        data = (tmp_path / side / "raw.zip").read_bytes()
        (tmp_path / side / WHEEL).write_bytes(stub + data)  # a prefix zipfile reads past
        (tmp_path / side / "raw.zip").unlink()
    rec = compare(tmp_path / "a", tmp_path / "b", CANDIDATE)
    assert diffs(rec) == [(None, "content")]
    assert rec["unexplained"] == 1 and rec["verdict"] == "not_reproducible"
    assert "no member, order or header difference" in rec["files"][0]["differences"][0]["detail"]


def test_plain_files_and_missing_files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "notes.txt").write_text("one\n")
    (tmp_path / "b" / "notes.txt").write_text("two\n")
    (tmp_path / "a" / "only-a.txt").write_text("x")
    rec = compare(tmp_path / "a", tmp_path / "b", CANDIDATE)
    by_name = {f["name"]: f for f in rec["files"]}
    assert [d["kind"] for d in by_name["notes.txt"]["differences"]] == ["content"]
    assert by_name["only-a.txt"]["b_sha256"] is None
    assert [d["kind"] for d in by_name["only-a.txt"]["differences"]] == ["missing"]


def waiver(subject, cand=CANDIDATE, wid="w-stamp"):
    return {"candidate": cand, "id": wid, "scope": "reproducibility", "subject": subject,
            "measured": "member mtime differs", "approved_by": "release-lead", "reason": "known"}


def test_waivers_cover_named_differences_only(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    make_zip(tmp_path / "a" / WHEEL)
    make_zip(tmp_path / "b" / WHEEL, modes={"demo/data.txt": 0o755})
    ok = compare(tmp_path / "a", tmp_path / "b", CANDIDATE, waivers=[waiver(f"{WHEEL}!demo/data.txt")])
    assert ok["verdict"] == "waived" and ok["waived"] == ["w-stamp"] and ok["difference_count"] == 1
    whole = compare(tmp_path / "a", tmp_path / "b", CANDIDATE, waivers=[waiver(WHEEL)])
    assert whole["verdict"] == "waived"
    other = compare(tmp_path / "a", tmp_path / "b", CANDIDATE, waivers=[waiver(f"{WHEEL}!demo/__init__.py")])
    assert other["verdict"] == "not_reproducible" and other["waived"] == []
    foreign = {**CANDIDATE, "id": digest({"another": "candidate"})}
    with pytest.raises(ForeignWaiver, match="w-stamp"):
        compare(tmp_path / "a", tmp_path / "b", CANDIDATE, waivers=[waiver(WHEEL, cand=foreign)])
