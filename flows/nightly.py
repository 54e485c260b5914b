"""nightly-reproducibility: rebuild the latest published release's candidate twice and compare
both builds with that release's published SHA256SUMS. Drift fails the run with a report."""

from __future__ import annotations

import json

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from builders import drift
from flows import steps
from flows.config import Config, load_config
from flows.errors import NoPublishedRelease, ReproducibilityDrift
from flows.stores import open_store, store_location
from flows.summaries import drift_md
from flows.workspace import Workspace
from releases.publish import latest_published
from releases.release_dir import BUILT_KINDS


@task(name="read the latest published release")
def latest_release(cfg: Config, ws: Workspace) -> dict:
    """The latest published version's candidate, SHA256SUMS and artifacts, fetched from the store."""
    store = open_store(cfg)
    version = latest_published(store)
    if version is None:
        raise NoPublishedRelease(f"the store {store_location(store, '')} holds no published release yet")
    manifest = json.loads(store.read_bytes(f"{version}/manifest.json"))
    # Only what the build made is rebuilt: the installer and the quickstart are written by the pipeline
    # (releases/release_dir.py, BUILT_KINDS), so today's rebuild is not expected to give them.
    built = {a["path"] for a in manifest["artifacts"] if a["kind"] in BUILT_KINDS}
    published = ws.root / "published"
    for key in store.list(f"{version}/artifacts/"):
        if key[len(version) + 1:] in built:
            store.get_file(key, published / key.rsplit("/", 1)[-1])
    return {"version": version, "candidate": json.loads(store.read_bytes(f"{version}/candidate.json")),
            "sums": store.read_bytes(f"{version}/SHA256SUMS").decode(), "artifacts": str(published),
            "built": sorted(built)}


@task(name="compare with the published sums")
def compare_published(release: dict, builds) -> dict:
    """Both rebuilds against the published SHA256SUMS, member by member where they drift."""
    a, b = builds
    report = drift.check_drift(a.artifacts[0].parent, b.artifacts[0].parent, release["sums"], release["candidate"],
                               release["version"], published_artifacts=release["artifacts"],
                               built=release["built"])
    create_markdown_artifact(key="nightly-reproducibility", markdown=drift_md(release["version"], report),
                             description="Drift report")
    if report["drift"]:
        raise ReproducibilityDrift(f"rebuilding {release['version']} no longer gives its published bytes; "
                                   "see the nightly-reproducibility artifact")
    return report


@flow(name="nightly-reproducibility", log_prints=True)
def nightly_reproducibility(config: str | None = None) -> dict:
    cfg = load_config(config)
    ws = Workspace.for_run(cfg, f"nightly-{flow_run.get_id() or 'local'}")
    release = latest_release(cfg, ws)
    builds = steps.build_twice(cfg, ws, release["candidate"], stage=False, image=False)
    return compare_published(release, builds)
