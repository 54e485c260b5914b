"""qualify-lane: run one lane window for a candidate that is already built, on its own."""

from __future__ import annotations

import json
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from flows import steps
from flows.config import load_config
from flows.workspace import Workspace


@flow(name="qualify-lane", log_prints=True)
def qualify_lane(lane: str, candidate_json: str, wheel: str, config: str | None = None) -> dict:
    """Qualify `wheel` (built from the candidate in `candidate_json`) on lane `lane`; return the
    lane record. The receipt is staged by the release-candidate flow, which owns the release."""
    cfg = load_config(config)
    run_id = str(flow_run.get_id() or "local")
    ws = Workspace.for_run(cfg, f"lane-{run_id}")
    record = steps.qualify_lane(cfg, ws, json.loads(Path(candidate_json).read_text()), cfg.lane(lane), Path(wheel),
                                stage=False)
    get_run_logger().info("lane %s: %s", lane, record["verdict"])
    return record
