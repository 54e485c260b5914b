"""Download a release into a scratch folder OUTSIDE the prefix, and verify it there, so that a
release that fails verification never creates anything in the prefix.

URL forms: http(s)://…/<version>/, file:///…/<version>/, or a plain directory path. Only stdlib
urllib is used: the installer runs with the verifier's dependencies and nothing else."""
from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath

from releases.canonical import load_json_bytes
from releases.errors import RecordError
from releases.install.errors import InstallError
from releases.release_dir import MANIFEST, MANIFEST_SIG
from releases.sums import SUMS_NAME, parse_sums
from releases.verify import verify_release
from releases.verify.checker import MAX_RECORD_BYTES
from releases.verify.files import named_files

_CHUNK = 1 << 20
TIMEOUT_S = 60


def _base(url: str) -> tuple[str, str]:
    """('http'|'file', base) with a trailing '/' for http, a directory path for file."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in ("http", "https"):
        return "http", url if url.endswith("/") else url + "/"
    if parsed.scheme == "file":
        return "file", urllib.request.url2pathname(parsed.path)
    if parsed.scheme == "" or len(parsed.scheme) == 1:  # a path (a drive letter is not a scheme)
        return "file", url
    raise InstallError(f"unsupported URL scheme {parsed.scheme!r}; use http(s)://, file:// or a directory",
                       where=url)


def _safe_rel(rel: str, where: str) -> str:
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or ".." in p.parts or "\\" in rel or rel.startswith("."):
        raise InstallError(f"the release names an unsafe path {rel!r}", where=where)
    return rel


def _copy_stream(src, dest: Path, limit: int, where: str) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    total = 0
    with open(dest, "wb") as out:
        while chunk := src.read(_CHUNK):
            total += len(chunk)
            if total > limit:
                raise InstallError(f"larger than the {limit} bytes the release allows for it; not read further",
                                   where=where)
            out.write(chunk)


def _get(kind: str, base: str, rel: str, dest: Path, limit: int, url: str) -> None:
    where = f"{url.rstrip('/')}/{rel}"
    try:
        if kind == "http":
            quoted = "/".join(urllib.parse.quote(part) for part in rel.split("/"))
            with urllib.request.urlopen(urllib.parse.urljoin(base, quoted), timeout=TIMEOUT_S) as resp:
                _copy_stream(resp, dest, limit, where)
        else:
            with open(os.path.join(base, *rel.split("/")), "rb") as fh:
                _copy_stream(fh, dest, limit, where)
    except urllib.error.HTTPError as exc:
        raise InstallError(f"download failed: HTTP {exc.code} {exc.reason}", where=where) from None
    except urllib.error.URLError as exc:
        raise InstallError(f"download failed: {exc.reason}", where=where) from None
    except FileNotFoundError:
        raise InstallError("missing: the release names it but the source does not have it", where=where) from None
    except OSError as exc:
        raise InstallError(f"cannot be read: {exc.strerror or exc}", where=where) from None


def fetch_release(url: str, dest: Path) -> dict:
    """Download manifest.json, manifest.sig, every file the manifest names and every SHA256SUMS
    entry into DEST; return the (not yet trusted) manifest."""
    kind, base = _base(url)
    if kind == "file" and not os.path.isdir(base):
        raise InstallError("not a release directory", where=url)
    for rel in (MANIFEST, MANIFEST_SIG):
        _get(kind, base, rel, dest / rel, MAX_RECORD_BYTES, url)
    try:
        manifest = load_json_bytes((dest / MANIFEST).read_bytes(), where=MANIFEST)
        named = named_files(manifest)
        sizes = {a["path"]: a["size"] for a in manifest.get("artifacts", [])}
    except (RecordError, KeyError, TypeError, AttributeError) as exc:
        raise InstallError(f"not a release manifest ({exc})", where=f"{url.rstrip('/')}/{MANIFEST}") from None
    for rel in sorted(named):
        _get(kind, base, _safe_rel(rel, MANIFEST), dest / rel, sizes.get(rel, MAX_RECORD_BYTES - 1) + 1, url)
    sums_entry = manifest.get("sums") or {"path": SUMS_NAME}
    sums_path = dest / sums_entry["path"]
    if sums_path.is_file():
        try:
            listed = parse_sums(sums_path.read_bytes(), sums_entry["path"])
        except RecordError as exc:
            raise InstallError(exc.message, where=exc.where) from None
        for rel in sorted(set(listed) - set(named)):   # an asset listed but not named: verify refuses it
            _get(kind, base, _safe_rel(rel, SUMS_NAME), dest / rel, 1 << 34, url)
    return manifest


def verify_fetched(directory: Path, key: str | Path) -> dict:
    """verify_release against the pinned key; refuse (naming the first failing file) unless it passes."""
    report = verify_release(directory, public_key=str(key), trust_source="--key")
    if not report.ok:
        first = report.failures[0]
        field = f" [{first.field}]" if first.field else ""
        more = f" (and {len(report.failures) - 1} more)" if len(report.failures) > 1 else ""
        raise InstallError(f"refused before installing anything: {first.message}{field}{more}", where=first.file)
    return {"key_id": report.key_id, "version": report.version, "state": report.state}


def scratch_dir(prefix_root: Path) -> Path:
    """A scratch folder outside the prefix (TMPDIR), removed by the caller."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="assay-install-"))


def remove_scratch(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
