"""nightly-reproducibility: rebuild the latest published release's candidate twice and compare
both builds with that release's published SHA256SUMS. Drift fails the run with a report."""

from __future__ import annotations

import json

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from builders import drift, recipe, snapshot
from flows.config import Config, load_config
from flows.hostmap import host_for
from flows.stores import open_store
from flows.workspace import Workspace
from releases.publish import latest_published


class ReproducibilityDrift(Exception):
    """A rebuild of a published candidate no longer gives the published bytes."""


@task(name="read the latest published release")
def latest_release(cfg: Config, ws: Workspace) -> dict:
    store = open_store(cfg)
    version = latest_published(store)
    if version is None:
        raise LookupError(f"the store {cfg.store.get('path') or cfg.store.get('bucket')} holds no published release yet")
    candidate = json.loads(store.read_bytes(f"{version}/candidate.json"))
    sums = store.read_bytes(f"{version}/SHA256SUMS").decode()
    published = ws.root / "published"
    for key in store.list(f"{version}/artifacts/"):
        store.get_file(key, published / key.rsplit("/", 1)[-1])
    return {"version": version, "candidate": candidate, "sums": sums, "artifacts": str(published)}


@task(name="rebuild twice from the frozen commit")
def rebuild(cfg: Config, ws: Workspace, candidate: dict):
    log = get_run_logger()
    snapshot.export_source(cfg.source, candidate, ws.source)
    host_a, host_b = (host_for(cfg, name) for name in cfg.build_hosts)
    return recipe.build_twice(host_a, host_b, candidate, ws.source, ws.build_root(cfg.build_hosts),
                              timeout=cfg.build_timeout_s, local_dir=ws.root / "artifacts",
                              python_a=cfg.build_pythons[0], python_b=cfg.build_pythons[1],
                              progress=lambda label, stream, text: log.info("build %s: %s", label, text.rstrip()))


@task(name="compare with the published sums")
def compare_published(release: dict, builds) -> dict:
    a, b = builds
    report = drift.check_drift(a.artifacts[0].parent, b.artifacts[0].parent, release["sums"], release["candidate"],
                               release["version"], published_artifacts=release["artifacts"])
    lines = [f"### Nightly reproducibility of {release['version']}: {'DRIFT' if report['drift'] else 'no drift'}", "",
             "| file | status | detail |", "|---|---|---|"]
    for f in report["files"]:
        lines.append(f"| {f['name']} | {f['status']} | {f['detail']} |")
        lines += [f"| ↳ {d['member'] or '(file)'} | {d['kind']} | {d['detail']} |" for d in f['differences'][:20]]
    create_markdown_artifact(key="nightly-reproducibility", markdown="\n".join(lines), description="Drift report")
    if report["drift"]:
        raise ReproducibilityDrift(f"rebuilding {release['version']} no longer gives its published bytes; see the report")
    return report


@flow(name="nightly-reproducibility", log_prints=True)
def nightly_reproducibility(config: str | None = None) -> dict:
    cfg = load_config(config)
    ws = Workspace.for_run(cfg, f"nightly-{flow_run.get_id() or 'local'}")
    release = latest_release(cfg, ws)
    builds = rebuild(cfg, ws, release["candidate"])
    return compare_published(release, builds)
