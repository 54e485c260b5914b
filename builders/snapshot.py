"""Freeze one commit of a source subdirectory into a candidate record, and export it.

A clean candidate is fully named by git: the commit, the tree of the subdir in it, and as
SOURCE_DATE_EPOCH the time of the last commit (at or before REF) that changed the subdir. So the
built bytes are a function of the subdir alone: a commit elsewhere in the repository changes the
candidate (its commit, its release version) but not one byte of the wheel or sdist, and lane
evidence bound to the wheel's sha256 (docs/LANES.md, Lane evidence) stays valid across it. The
working tree only matters when REF is the checked-out commit: then changes under the subdir make
the source dirty, which is refused unless allow_dirty, and then recorded with a digest of the
files actually built.

release_version names the release, not the wheel: the wheel always carries the package version
of the subdir's pyproject.toml, whatever the label. It follows `version_label`: "commit"
(assay.toml's default) labels a clean candidate `<version>+g<REF's commit 12 hex>`, so that every
commit is a release of its own (two releases of one engine tree then ship byte-identical wheels);
"package" (this function's default) keeps the package version as it is (the version is then bumped
per release). A dirty source is not unique per commit, so it always gets a PEP 440 local label:
`<version>+g<commit 12 hex>.dirty.<dirty_digest 12 hex>`. A version that already has a local label
is joined with `.`.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tomllib
from pathlib import Path, PurePosixPath

from packaging.version import InvalidVersion, Version

from builders.errors import DirtySource, SnapshotError
from builders.gitcmd import git, git_text
from builders.worktree import working_files, write_tree_files
from releases.candidate import candidate_ref
from releases.schema import validate

CANDIDATE_SCHEMA = "assay/candidate/v1"


VERSION_LABELS = ("commit", "package")


def freeze(repo_dir: str | Path, ref: str = "HEAD", subdir: str = "engine",
           allow_dirty: bool = False, version_label: str = "package") -> dict:
    """Return the candidate record for REF's SUBDIR in the repository at REPO_DIR."""
    root = Path(git_text(repo_dir, "rev-parse", "--show-toplevel"))
    sub = _clean_subdir(subdir)
    try:
        commit = git_text(root, "rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}")
    except SnapshotError as exc:
        raise SnapshotError(f"ref {ref!r} names no commit in repository {root.name!r} ({exc})") from exc
    tree = _subdir_tree(root, commit, sub)
    epoch = _subdir_epoch(root, commit, sub)
    package = _package(root, commit, sub)

    dirty_files = _dirty_files(root, commit, sub)
    if dirty_files and not allow_dirty:
        raise DirtySource(root.name, sub or ".", dirty_files)
    dirty_digest = _tree_digest(root, sub) if dirty_files else None

    if version_label not in VERSION_LABELS:
        raise SnapshotError(f"version_label {version_label!r} is not one of {', '.join(VERSION_LABELS)}")
    release_version = _release_version(package["version"], commit, dirty_digest, version_label)
    record = {
        "candidate_schema": CANDIDATE_SCHEMA,
        "source": {"name": root.name, "subdir": sub or ".", "ref": ref},
        "commit": commit,
        "tree": tree,
        "source_date_epoch": epoch,
        "dirty": bool(dirty_files),
        "dirty_digest": dirty_digest,
        "package": package,
        "release_version": release_version,
    }
    validate("candidate", record, "candidate")
    return record


def _release_version(version: str, commit: str, dirty_digest: str | None, version_label: str) -> str:
    sep = "." if "+" in version else "+"
    if dirty_digest is not None:
        return f"{version}{sep}g{commit[:12]}.dirty.{dirty_digest[:12]}"
    if version_label == "commit" and "+" not in version:
        return f"{version}+g{commit[:12]}"
    return version


def as_ref(candidate: dict) -> dict:
    """The candidate reference for a full candidate record, or the reference itself."""
    if "candidate_schema" not in candidate and {"id", "commit", "tree"} <= candidate.keys():
        return {"id": candidate["id"], "commit": candidate["commit"], "tree": candidate["tree"]}
    return candidate_ref(candidate)


def export_source(repo_dir: str | Path, candidate: dict, dest: str | Path) -> Path:
    """Write the candidate's exact source tree into DEST (created; must be empty).

    Clean: the blobs of the commit's subdir tree, read from git's object store, so that
    .gitattributes (export-subst, export-ignore) cannot alter them. Dirty: the working-tree
    files that the dirty digest covers, re-checked against that digest. Every mtime is set to
    SOURCE_DATE_EPOCH so nothing downstream sees the export time.
    """
    root = Path(git_text(repo_dir, "rev-parse", "--show-toplevel"))
    sub = "" if candidate["source"]["subdir"] == "." else candidate["source"]["subdir"]
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise SnapshotError(f"export destination {dest} is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    if candidate["dirty"]:
        actual = _tree_digest(root, sub)
        if actual != candidate["dirty_digest"]:
            raise SnapshotError(
                f"working tree under {sub or '.'!r} changed since freeze: dirty digest "
                f"{actual} != {candidate['dirty_digest']}")
        for rel, path in working_files(root, sub):
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink():
                os.symlink(os.readlink(path), target)
            else:
                shutil.copyfile(path, target)
                os.chmod(target, 0o755 if os.access(path, os.X_OK) else 0o644)
    else:
        if _subdir_tree(root, candidate["commit"], sub) != candidate["tree"]:
            raise SnapshotError(f"candidate tree {candidate['tree']} is not {sub or '.'!r} of commit "
                                f"{candidate['commit']} in repository {root.name!r}")
        _export_tree(root, candidate["commit"], sub, dest)
    _normalise(dest, candidate["source_date_epoch"])
    return dest


def _clean_subdir(subdir: str) -> str:
    p = PurePosixPath(subdir.strip("/") or ".")
    if p.is_absolute() or ".." in p.parts:
        raise SnapshotError(f"subdir {subdir!r} must be a relative path inside the repository")
    return "" if str(p) == "." else str(p)


def _subdir_tree(root: Path, commit: str, sub: str) -> str:
    try:
        tree = git_text(root, "rev-parse", "--verify", f"{commit}:{sub}" if sub else f"{commit}^{{tree}}")
    except SnapshotError as exc:
        raise SnapshotError(f"{sub!r} does not exist in commit {commit}") from exc
    if git_text(root, "cat-file", "-t", tree) != "tree":
        raise SnapshotError(f"{sub!r} in commit {commit} is not a directory")
    return tree


def _subdir_epoch(root: Path, commit: str, sub: str) -> int:
    """The committer time of the last commit at or before COMMIT that changed SUB (the whole tree
    when SUB is the root): git's own history simplification, so a merge that brought no change
    into SUB does not count."""
    out = git_text(root, "log", "-1", "--format=%ct", commit, "--", sub or ".")
    if not out:   # cannot happen for a subdir that exists in COMMIT; refuse rather than guess
        raise SnapshotError(f"no commit at or before {commit[:12]} changed {sub or '.'!r}")
    return int(out)


def _package(root: Path, commit: str, sub: str) -> dict:
    where = f"{sub}/pyproject.toml" if sub else "pyproject.toml"
    text = git(root, "show", f"{commit}:{where}").decode("utf-8")
    try:
        project = tomllib.loads(text).get("project", {})
    except tomllib.TOMLDecodeError as exc:
        raise SnapshotError(f"{where} at {commit[:12]}: not valid TOML: {exc}") from exc
    if "version" in project.get("dynamic", []) or "version" not in project:
        raise SnapshotError(f"{where} at {commit[:12]}: [project].version must be a static string")
    if not isinstance(project.get("name"), str):
        raise SnapshotError(f"{where} at {commit[:12]}: [project].name is missing")
    try:
        Version(project["version"])
    except InvalidVersion as exc:
        raise SnapshotError(f"{where} at {commit[:12]}: [project].version {project['version']!r} "
                            "is not a PEP 440 version") from exc
    return {"name": project["name"], "version": project["version"]}


def _dirty_files(root: Path, commit: str, sub: str) -> list[str]:
    # The working tree is what gets built only when REF is the checked-out commit.
    head = git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}").decode().strip()
    if head != commit:
        return []
    out = git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all",
              "--ignored=no", "--", sub or ".")
    files: set[str] = set()
    entries = out.split(b"\0")
    i = 0
    while i < len(entries):
        entry = entries[i].decode("utf-8", "surrogateescape")
        i += 1
        if not entry:
            continue
        files.add(entry[3:])
        if entry[0] in "RC":  # a rename/copy is followed by its source path
            files.add(entries[i].decode("utf-8", "surrogateescape"))
            i += 1
    return sorted(files)


def _tree_digest(root: Path, sub: str) -> str:
    """sha256 over the sorted lines `<content sha256>  <path>` of the working-tree files."""
    lines = []
    for rel, path in working_files(root, sub):
        data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        lines.append(f"{hashlib.sha256(data).hexdigest()}  {rel}\n")
    return hashlib.sha256("".join(sorted(lines)).encode("utf-8")).hexdigest()


def _export_tree(root: Path, commit: str, sub: str, dest: Path) -> None:
    listing = git(root, "ls-tree", "-r", "-z", "--full-tree", commit, "--", sub or ".")
    entries = []
    for raw in listing.split(b"\0"):
        if not raw:
            continue
        meta, path = raw.split(b"\t", 1)
        mode, kind, sha = meta.decode().split()
        rel = path.decode("utf-8", "surrogateescape")
        rel = rel[len(sub) + 1:] if sub else rel
        if kind == "commit":
            raise SnapshotError(f"{sub}/{rel}: submodules are not supported in a build source")
        entries.append((mode, sha, rel))
    blobs = _read_blobs(root, [sha for _, sha, _ in entries])
    write_tree_files(dest, [(mode, rel, blobs[sha]) for mode, sha, rel in entries])


def _read_blobs(root: Path, shas: list[str]) -> dict[str, bytes]:
    unique = sorted(set(shas))
    out = git(root, "cat-file", "--batch", stdin="".join(f"{s}\n" for s in unique).encode())
    blobs, pos = {}, 0
    for sha in unique:
        header_end = out.index(b"\n", pos)
        got, kind, size = out[pos:header_end].decode().split()
        if got != sha or kind != "blob":
            raise SnapshotError(f"git cat-file returned {got} {kind} for {sha}")
        start = header_end + 1
        blobs[sha] = out[start:start + int(size)]
        pos = start + int(size) + 1
    return blobs


def _normalise(dest: Path, epoch: int) -> None:
    """Directories 0755 and every mtime SOURCE_DATE_EPOCH, whatever the umask and clock were."""
    for dirpath, dirnames, filenames in os.walk(dest, topdown=False):
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755)
        for name in filenames + dirnames:
            os.utime(os.path.join(dirpath, name), (epoch, epoch), follow_symlinks=False)
    os.chmod(dest, 0o755)
    os.utime(dest, (epoch, epoch))
