"""qualify-lane: run one lane window for a candidate that is already built, on its own."""

from __future__ import annotations

import json
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from flows.config import load_config
from flows.gpu_slot import gpu_slot
from flows.hostmap import host_for
from flows.workspace import Workspace
from gates.lane import run_lane
from releases.candidate import candidate_ref


@flow(name="qualify-lane", log_prints=True)
def qualify_lane(lane: str, candidate_json: str, wheel: str, config: str | None = None) -> dict:
    """Qualify `wheel` (built from the candidate in `candidate_json`) on lane `lane`; return the
    lane record. The receipt is signed by the release-candidate flow, which owns the manifest."""
    log = get_run_logger()
    cfg = load_config(config)
    spec = cfg.lane(lane)
    candidate = json.loads(Path(candidate_json).read_text())
    ws = Workspace.for_run(cfg, f"lane-{flow_run.get_id() or 'local'}")
    host = host_for(cfg, spec.host)
    with gpu_slot(spec.gpu, spec.host):
        record = run_lane(host, spec.name, spec.kind, candidate_ref(candidate), candidate["package"]["version"],
                          Path(wheel), workdir=str(ws.lane(spec.name)), base_python=cfg.lane_python(spec),
                          lease_path=cfg.lease_path(spec), model=spec.model, state_dir=ws.lane(spec.name),
                          progress=lambda line: log.info("lane %s: %s", lane, line))
    log.info("lane %s: %s", lane, record["verdict"])
    return record
