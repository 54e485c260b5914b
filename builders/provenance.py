"""The build record: an SLSA v1 provenance predicate, validated against releases' schema."""
from __future__ import annotations

import datetime as dt
import uuid
from importlib import metadata

from releases.schema import validate

BUILD_TYPE = "https://assay.dev/build-types/python-wheel-sdist/v1"
BUILDER_ID = "https://assay.dev/builders/python-build/v1"
TARGETS = ["wheel", "sdist"]


def rfc3339(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def source_dependencies(candidate: dict) -> list[dict]:
    """The source as SLSA resolved dependencies: the commit, and for a dirty build the files."""
    src = candidate["source"]
    suffix = "" if src["subdir"] == "." else f"#subdirectory={src['subdir']}"
    deps = [{"uri": f"git+{src['name']}@{candidate['commit']}{suffix}", "name": src["name"],
             "digest": {"gitCommit": candidate["commit"], "gitTree": candidate["tree"]}}]
    if candidate.get("dirty"):
        deps.append({"uri": f"worktree:{src['name']}{suffix}", "name": "uncommitted-changes",
                     "digest": {"sha256": candidate["dirty_digest"]}})
    return deps


def build_record(*, candidate: dict, ref: dict, label: str, host_name: str, environment: dict,
                 varied: dict, started: float, finished: float, byproducts: list[dict]) -> dict:
    """The SLSA v1 provenance predicate of one build (INTERFACES.md, `build`)."""
    record = {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {"candidate": ref, "targets": list(TARGETS)},
            "internalParameters": {"environment": environment,
                                   "varied": {**varied, "host": host_name, "label": label}},
            "resolvedDependencies": source_dependencies(candidate),
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
