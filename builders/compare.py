"""Compare the outputs of two builds and explain every difference: the reproducibility record.

Files are compared by SHA-256. When an archive (wheel/zip, sdist/tar.gz, kernels/tar, the OCI
image by layer: builders.oci_diff) differs, its members
are compared one by one and each difference is named (builders.diffutil lists the kinds). If
the bytes differ and no member, order or header difference accounts for it, the archive itself
gets one `content` difference and counts as unexplained; unexplained differences cannot be
waived.

A waiver (scope "reproducibility") waives the differences its subject names: "FILE!MEMBER" for
one member, "FILE" for every difference in FILE. A waiver about another candidate is refused.
"""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Iterable

from builders.diffutil import content_detail, difference
from builders.errors import CompareError, ForeignWaiver
from builders.oci_diff import diff_oci
from builders.snapshot import as_ref
from builders.targz_diff import diff_tar, diff_targz
from builders.zip_diff import diff_zip
from releases.canonical import file_sha256
from releases.schema import validate

ARCHIVE_DIFFS = ((".oci.tar", diff_oci), (".whl", diff_zip), (".zip", diff_zip), (".tar.gz", diff_targz), (".tgz", diff_targz),
                 (".tar", lambda a, b: diff_tar(a.read_bytes(), b.read_bytes())))   # the AOT kernels


def compare(dir_a: str | Path, dir_b: str | Path, candidate: dict,
            waivers: Iterable[dict] = (), builds: tuple[str, str] = ("a", "b")) -> dict:
    """The reproducibility record for the files under DIR_A and DIR_B (validated)."""
    ref = as_ref(candidate)
    waivers = _applicable(waivers, ref)
    files_a, files_b = _files(Path(dir_a)), _files(Path(dir_b))
    if not files_a and not files_b:
        raise CompareError(f"nothing to compare: {dir_a} and {dir_b} hold no files")
    entries, used, unexplained, count, unwaived = [], set(), 0, 0, 0
    for name in sorted(set(files_a) | set(files_b)):
        entry, file_unexplained = compare_file(name, files_a.get(name), files_b.get(name))
        unexplained += file_unexplained
        for diff in entry["differences"]:
            count += 1
            hits = [w["id"] for w in waivers if _covers(w["subject"], name, diff["member"])]
            used.update(hits)
            unwaived += 0 if hits else 1
        entries.append(entry)
    if count == 0:
        verdict = "reproducible"
    elif unwaived == 0 and unexplained == 0:
        verdict = "waived"
    else:
        verdict = "not_reproducible"
    record = {"candidate": ref, "builds": list(builds), "verdict": verdict, "files": entries,
              "difference_count": count, "waived": sorted(used), "unexplained": unexplained}
    validate("reproducibility", record, "reproducibility")
    return record


def compare_file(name: str, path_a: Path | None, path_b: Path | None) -> tuple[dict, int]:
    """(file entry, 1 if its byte difference could not be explained else 0)."""
    sha_a = file_sha256(path_a) if path_a else None
    sha_b = file_sha256(path_b) if path_b else None
    entry = {"name": name, "a_sha256": sha_a, "b_sha256": sha_b,
             "identical": sha_a is not None and sha_a == sha_b, "differences": []}
    if path_b is None:
        entry["differences"] = [difference(None, "missing", "file only in build a")]
    elif path_a is None:
        entry["differences"] = [difference(None, "extra", "file only in build b")]
    elif not entry["identical"]:
        diffs, unexplained = explain(name, path_a, path_b)
        entry["differences"] = diffs
        return entry, unexplained
    return entry, 0


def explain(name: str, path_a: Path, path_b: Path) -> tuple[list[dict], int]:
    """Differences of two unequal files; for archives, member by member."""
    differ = next((fn for suffix, fn in ARCHIVE_DIFFS if name.endswith(suffix)), None)
    if differ is None:
        return [difference(None, "content", content_detail(path_a.read_bytes(), path_b.read_bytes()))], 0
    try:
        diffs = differ(path_a, path_b)
    except (CompareError, zipfile.BadZipFile, OSError, EOFError) as exc:
        return [difference(None, "content", f"archive could not be read member by member: {exc}")], 1
    if diffs:
        return diffs, 0
    return [difference(None, "content", "archive bytes differ but no member, order or header "
                                        "difference explains it; "
                                        + content_detail(path_a.read_bytes(), path_b.read_bytes()))], 1


def _files(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        raise CompareError(f"build output directory {root} does not exist")
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def _applicable(waivers: Iterable[dict], ref: dict) -> list[dict]:
    out = []
    for w in waivers:
        validate("waiver", w, f"waiver {w.get('id', '?')}")
        if w["candidate"]["id"] != ref["id"]:
            raise ForeignWaiver(w["id"], ref["id"], w["candidate"]["id"])
        if w["scope"] == "reproducibility":
            out.append(w)
    return out


def _covers(subject: str, name: str, member: str | None) -> bool:
    return subject == name or (member is not None and subject == f"{name}!{member}")
