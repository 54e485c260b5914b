"""qualify-lane: the flow a worker on a lane host runs when a release run dispatches a lane to its
work pool (flows/dispatch.py registers it there as the deployment `qualify-lane/<pool>`).

It fetches the wheel from the store's staging area, holds the GPU slot named for the lane's host,
runs the lane here with gates.qualify (the lane's host is this machine), signs with this host's
key and puts the receipts back beside the wheel; the dispatching run verifies them and binds them.

On the lane host: ASSAY_LANE_HOME is where lanes work (default ~/.assay-lane); ASSAY_LANE_KEY is
the Ed25519 private key the receipts are signed with (default ASSAY_LANE_HOME/keys, created 0600
on first use). docs/LANES.md, "Lanes on Prefect workers", says how an operator starts one."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path, PurePosixPath

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from flows.errors import DispatchedWheelAltered
from flows.gpu_slot import gpu_slot
from flows.lane_staging import put_receipts, receipts_prefix
from flows.stores import store_from_spec
from gates.qualify import qualify
from gates.spec import spec_from_table
from hosts.local import LocalHost
from releases import keys
from releases.canonical import file_sha256


def lane_home() -> Path:
    return Path(os.environ.get("ASSAY_LANE_HOME") or Path.home() / ".assay-lane").resolve()


def lane_key(home: Path):
    """ASSAY_LANE_KEY, else this host's key under home/keys (created 0600 the first time)."""
    path = os.environ.get("ASSAY_LANE_KEY") or keys.ensure_local_key(home / "keys")[0]
    return keys.load_private_key(path)


@flow(name="qualify-lane", log_prints=True)
def qualify_lane(lane: dict, candidate: dict, store: dict, wheel_key: str, wheel_sha256: str) -> dict:
    """Qualify the candidate's wheel (store key `wheel_key`, sha256 `wheel_sha256`) on lane `lane`
    (its [[lanes]] table) on this host; return the lane's verdict and the receipts' store keys."""
    log = get_run_logger()
    home = lane_home()
    spec = spec_from_table(lane, file="the dispatched lane", where="", base=home, state_root=str(home))
    run_id = str(flow_run.get_id() or uuid.uuid4())
    out = home / "runs" / run_id
    staging = store_from_spec(store)
    wheel = out / "wheel" / PurePosixPath(wheel_key).name
    staging.get_file(wheel_key, wheel)
    if file_sha256(wheel) != wheel_sha256:
        raise DispatchedWheelAltered(f"{wheel_key}: sha256 {file_sha256(wheel)} is not the {wheel_sha256} "
                                     "the release run sent; the lane did not run")
    key = lane_key(home)
    say = lambda line: log.info("lane %s: %s", spec.name, line)  # noqa: E731
    # The lane's host label (not "local"): the slot is the one every run on this host's GPU takes.
    with gpu_slot(spec.gpu, spec.host):
        result = qualify(LocalHost(spec.host), spec, candidate, wheel, out / "lane", key=key, progress=say)
    sent = put_receipts(staging, receipts_prefix(wheel_key, run_id), out / "lane", [p for _, _, p in result.receipts])
    shutil.rmtree(out, ignore_errors=True)  # the receipts are in the store; restore removed the lane's workdir
    log.info("lane %s: %s; %d receipts sent back", spec.name, result.verdict, len(sent))
    return {"lane": spec.name, "verdict": result.verdict, "receipts": sent}
