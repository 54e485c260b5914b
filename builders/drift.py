"""Nightly drift check: do today's two rebuilds still produce the published artifact bytes?

Only the artifacts/ entries of the published SHA256SUMS that the build made are checked (the
installer and quickstart are written by the pipeline, not built): SBOMs are derived from the
wheel, so a drifted wheel already says everything. Per published artifact:
  matches   both rebuilds have it, with the published SHA-256;
  drifted   a rebuild has it with other bytes (explained member by member against the published
            copy when one is given), or the two rebuilds disagree;
  missing   neither rebuild produced it.
A rebuilt artifact the release does not list is reported as drifted too: the build's output
set itself changed.
"""
from __future__ import annotations

from pathlib import Path

from builders.compare import explain
from builders.errors import BuilderError
from builders.snapshot import as_ref
from releases.canonical import file_sha256
from releases.sums import parse_sums

PREFIX = "artifacts/"


def check_drift(rebuilt_a: str | Path, rebuilt_b: str | Path, published_sums: str | bytes,
                candidate: dict, published_version: str,
                published_artifacts: str | Path | None = None, built: list[str] | None = None) -> dict:
    """The drift record {candidate, published_version, files, drift}. BUILT: the artifacts/ paths
    the build made (the manifest's built kinds); others the release lists, such as the installer
    the pipeline writes, are not rebuilt and not checked. None: every artifacts/ entry."""
    data = published_sums.encode("utf-8") if isinstance(published_sums, str) else published_sums
    published = {path[len(PREFIX):]: sha for path, sha in
                 parse_sums(data, where=f"published SHA256SUMS of {published_version}").items()
                 if path.startswith(PREFIX) and (built is None or path in built)}
    if not published:
        raise BuilderError(f"published SHA256SUMS of {published_version} lists no artifacts/ entries")
    side_a, side_b = _digests(Path(rebuilt_a)), _digests(Path(rebuilt_b))
    files = []
    for name in sorted(set(published) | set(side_a) | set(side_b)):
        entry = _entry(name, published.get(name), side_a, side_b)
        if entry["status"] == "drifted" and published_artifacts is not None and name in published:
            entry["differences"] = _explain(Path(published_artifacts), name, published[name],
                                            Path(rebuilt_a), Path(rebuilt_b), side_a)
        files.append(entry)
    return {"candidate": as_ref(candidate), "published_version": published_version,
            "files": files, "drift": any(f["status"] != "matches" for f in files)}


def _entry(name: str, want: str | None, side_a: dict, side_b: dict) -> dict:
    got_a, got_b = side_a.get(name), side_b.get(name)
    entry = {"name": PREFIX + name, "published_sha256": want,
             "rebuilt_sha256": {"a": got_a, "b": got_b}, "differences": []}
    if want is None:
        status, detail = "drifted", "rebuilt, but not in the published SHA256SUMS"
    elif got_a is None and got_b is None:
        status, detail = "missing", "neither rebuild produced it"
    elif got_a == want and got_b == want:
        status, detail = "matches", "both rebuilds equal the published bytes"
    else:
        sides = [s for s, got in (("a", got_a), ("b", got_b)) if got != want]
        status = "drifted"
        detail = f"rebuild {' and '.join(sides)} differs from the published bytes"
        if got_a != got_b:
            detail += "; the two rebuilds also disagree with each other"
    entry.update(status=status, detail=detail)
    return entry


def _explain(pub_dir: Path, name: str, want: str, dir_a: Path, dir_b: Path, side_a: dict) -> list[dict]:
    published = pub_dir / name
    if not published.is_file():
        return []
    if file_sha256(published) != want:
        raise BuilderError(f"{published.name}: the published copy given does not match the "
                           f"published SHA256SUMS ({want})")
    rebuilt = dir_a / name if name in side_a else dir_b / name
    diffs, _unexplained = explain(name, published, rebuilt)
    return diffs


def _digests(root: Path) -> dict[str, str]:
    if not root.is_dir():
        raise BuilderError(f"rebuilt artifact directory {root} does not exist")
    return {p.name: file_sha256(p) for p in sorted(root.iterdir()) if p.is_file()}
