"""The acceptance steps of a release run, after the first compose: stage the composed release in the
store and serve it anonymously (releases/staging.py), run each `acceptance = true` lane's window on
its host (gates/acceptance.py) and, when the store already holds a published release, rehearse the
upgrade from it (gates/rehearsal.py). Each step is a task whose result persists (a resumed run does
not run a passed window again), stages its receipt and shows one artifact."""
from __future__ import annotations

import sys

from prefect import get_run_logger, task
from prefect.artifacts import create_table_artifact

from flows.config import Config, Lane
from flows.errors import AcceptanceFailed
from flows.hostmap import host_for
from flows.results import PERSISTED
from flows.steps import stager
from flows.stores import open_store
from flows.workspace import Workspace
from gates.acceptance import run_window
from gates.rehearsal import rehearse
from releases.candidate import candidate_ref
from releases.keys import PUBLIC_NAME
from releases.publish import latest_published
from releases.staging import Staged, served, stage_release
from releases.stores.local import LocalStore

MAX_HOLD_S = 1800.0   # a lane's acceptance window may hold its host this long (lane.acceptance_max_hold_s)


@task(name="stage for acceptance", **PERSISTED)
def stage_for_acceptance(cfg: Config, ws: Workspace) -> Staged:
    """Copy the composed release under the store's staging prefix (write-once, one folder per manifest)."""
    staged = stager(cfg, ws)
    return stage_release(staged.root, open_store(cfg), staged.candidate["release_version"])


@task(name="acceptance window", **PERSISTED)
def acceptance_window(cfg: Config, ws: Workspace, lane: Lane, staged: Staged, attempt: int = 1) -> dict:
    """The lane's acceptance window on its host, the staged release served for its length; stages
    the `acceptance` receipt (label = lane) whatever the verdict, then fails the step unless it passed."""
    log = get_run_logger()
    rel = stager(cfg, ws)
    ref = candidate_ref(rel.candidate)
    host = host_for(cfg, lane.host)
    work = ws.root / "acceptance" / lane.name
    with served(open_store(cfg), staged) as url:
        predicate, details = run_window(
            host, candidate_ref=ref, host_label=lane.host, staged_url=url,
            key_pem=(rel.root / "keys" / PUBLIC_NAME).read_text(encoding="utf-8"), lane=lane.name,
            workdir=str(work / "work"), lease_path=str(cfg.state_dir.resolve() / "leases" / "gpu")
            if lane.lease_path is None else lane.lease_path, run_id=f"acceptance-{ws.root.name}",
            max_hold_s=lane.acceptance_max_hold_s or MAX_HOLD_S, attempt=attempt, model=lane.model,
            incumbent_prefix=lane.acceptance_incumbent_prefix,
            # the shipped zipapp needs the verifier's packages: the lane's python, else this run's
            python=lane.python or sys.executable, base_python=lane.python or sys.executable,
            progress=lambda line: log.info("acceptance %s: %s", lane.name, line))
    rel.add_receipt("acceptance", [{"name": a["name"].rsplit("/", 1)[-1], "digest": {"sha256": a["sha256"]}}
                                   for a in predicate["assets"]], predicate, label=lane.name)
    create_table_artifact(key=f"acceptance-{lane.name.lower().replace('.', '-').replace('_', '-')}"[:60],
                          table=[{"step": r["name"], "status": r["status"],
                                  "detail": str(r["facts"].get("error", ""))} for r in predicate["routes"]],
                          description=f"Acceptance window of lane {lane.name}: {predicate['verdict']}")
    if predicate["verdict"] != "pass":
        raise AcceptanceFailed(f"lane {lane.name}: acceptance window failed: {'; '.join(details['problems'])}")
    return predicate


def incumbent_of(cfg: Config) -> dict | None:
    """{"version"} of the store's latest published release, or None when nothing is published."""
    version = latest_published(open_store(cfg))
    return {"version": version} if version else None


@task(name="upgrade rehearsal", **PERSISTED)
def upgrade_rehearsal(cfg: Config, ws: Workspace, incumbent: dict, staged: Staged, lane: Lane) -> dict:
    """Rehearse incumbent -> candidate with the shipped installer (gates/rehearsal.py, local host) and
    stage the `rehearsal` receipt; fails the step unless all three scenarios passed."""
    store = open_store(cfg)
    if not isinstance(store, LocalStore):
        raise AcceptanceFailed("the upgrade rehearsal reads the incumbent from a filesystem store only "
                               "(an S3 store's incumbent is not rehearsed yet)")
    log = get_run_logger()
    rel = stager(cfg, ws)
    version = rel.candidate["release_version"]
    log.info("rehearsal %s -> %s: upgrade, failed first start, interrupted install", incumbent["version"], version)
    with served(store, staged) as url:
        predicate, details = rehearse(str(store.root / incumbent["version"]), url,
                                      candidate_ref=candidate_ref(rel.candidate),
                                      key=rel.root / "keys" / PUBLIC_NAME, model=lane.model,
                                      workdir=ws.root / "rehearsal", from_version=incumbent["version"],
                                      to_version=version, base_python=lane.python or sys.executable)
    for scenario in predicate["scenarios"]:
        log.info("rehearsal %s: %s", scenario["name"], "pass" if scenario["passed"] else "FAIL")
    ref = candidate_ref(rel.candidate)
    rel.add_receipt("rehearsal", [{"name": "candidate", "digest": {"sha256": ref["id"]}}], predicate)
    create_table_artifact(key="rehearsal", table=[{"scenario": s["name"], "passed": s["passed"],
                                                   "detail": str(details.get(s["name"], ""))[:300]}
                                                  for s in predicate["scenarios"]],
                          description=f"Upgrade rehearsal {incumbent['version']} -> {version}: {predicate['verdict']}")
    if predicate["verdict"] != "pass":
        raise AcceptanceFailed(f"upgrade rehearsal {incumbent['version']} -> {version} failed: {details}")
    return predicate
