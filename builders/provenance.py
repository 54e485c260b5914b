"""The build record: an SLSA v1 provenance predicate, validated against releases' schema."""
from __future__ import annotations

import datetime as dt
import re
import uuid
from importlib import metadata
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from builders.errors import SnapshotError
from builders.gitcmd import git_text
from releases.schema import validate

BUILD_TYPE = "https://assay.dev/build-types/python-wheel-sdist/v1"
BUILDER_ID = "https://assay.dev/builders/python-build/v1"
TARGETS = ["wheel", "sdist"]
_SCP_LIKE = re.compile(r"^(?P<user>[A-Za-z0-9._-]+@)?(?P<host>[A-Za-z0-9.-]+):(?P<path>(?!//)[^\\]+)$")


def rfc3339(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def public_remote(url: str) -> str | None:
    """A remote URL fit for a public record: credentials dropped, scp-like `git@host:path` as ssh://;
    None for a local path (a directory name says nothing to anyone else and may be private)."""
    url = url.strip()
    if match := _SCP_LIKE.match(url):
        return f"ssh://{match['user'] or ''}{match['host']}/{match['path'].lstrip('/')}"
    parts = urlsplit(url)
    if parts.scheme in ("", "file") or not parts.hostname:
        return None
    # userinfo may hold a token (https://user:TOKEN@host/...): keep only a bare ssh user name.
    user = f"{parts.username}@" if parts.username and parts.password is None and parts.scheme == "ssh" else ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{user}{parts.hostname}{port}", parts.path, "", ""))


def repository_uri(repo: str | Path, configured: str | None = None) -> str | None:
    """The source repository as the world knows it: `configured` when given, else the public form of
    `git remote get-url origin`; None when there is neither (source_dependencies then says so)."""
    if configured:
        return configured
    try:
        return public_remote(git_text(repo, "remote", "get-url", "origin"))
    except SnapshotError:  # no git, or no remote called origin
        return None


def source_dependencies(candidate: dict, source_uri: str | None = None) -> list[dict]:
    """The source as SLSA resolved dependencies: the commit, and for a dirty build the files.
    Without a repository URI the dependency is named by a URN that says the source has no public
    location, never by a local directory name."""
    src = candidate["source"]
    suffix = "" if src["subdir"] == "." else f"#subdirectory={src['subdir']}"
    repo = f"git+{source_uri}" if source_uri else f"urn:assay:unpublished-source:{candidate['tree']}"
    deps = [{"uri": f"{repo}@{candidate['commit']}{suffix}", "name": src["name"],
             "digest": {"gitCommit": candidate["commit"], "gitTree": candidate["tree"]}}]
    if candidate.get("dirty"):
        deps.append({"uri": f"{repo}@{candidate['commit']}+uncommitted{suffix}", "name": "uncommitted-changes",
                     "digest": {"sha256": candidate["dirty_digest"]}})
    return deps


def build_record(*, candidate: dict, ref: dict, label: str, host_name: str, environment: dict,
                 varied: dict, started: float, finished: float, byproducts: list[dict],
                 source_uri: str | None = None, targets: list[str] | None = None) -> dict:
    """The SLSA v1 provenance predicate of one build (INTERFACES.md, `build`)."""
    record = {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {"candidate": ref, "targets": list(targets or TARGETS)},
            "internalParameters": {"environment": environment,
                                   "varied": {**varied, "host": host_name, "label": label}},
            "resolvedDependencies": source_dependencies(candidate, source_uri),
        },
        "runDetails": {
            "builder": {"id": BUILDER_ID, "version": {"assay": _assay_version()}},
            "metadata": {
                # Unique per run by design: two builds of one candidate are two invocations.
                "invocationId": f"{ref['id'][:16]}-{label}-{uuid.uuid4().hex[:16]}",
                "startedOn": rfc3339(started),
                "finishedOn": rfc3339(finished),
            },
            "byproducts": sorted(byproducts, key=lambda b: b["name"]),
        },
    }
    validate("build", record, f"build-{label}")
    return record


def _assay_version() -> str:
    try:
        return metadata.version("assay")
    except metadata.PackageNotFoundError:
        return "unknown"
