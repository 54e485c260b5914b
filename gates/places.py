"""Where a lane works and which lease it takes on its host, unless its spec says otherwise: shared by
the phase chain (gates/qualify.py) and the judged gates' window (gates/judged/lane.py)."""

from __future__ import annotations

from pathlib import Path

from gates.spec import LaneSpec


def default_workdir(host, spec: LaneSpec, out_dir: Path) -> str:
    if spec.workdir:
        return spec.workdir
    if host.name == "local" or type(host).__name__ == "LocalHost":
        return str((Path(out_dir) / "work" / spec.name).resolve())
    return f"/var/tmp/assay-lanes/{spec.name}"


def default_lease_path(host, spec: LaneSpec) -> str:
    if spec.lease_path:
        return spec.lease_path
    if type(host).__name__ == "LocalHost" and spec.state_root:
        return str(Path(spec.state_root) / "leases" / "gpu")
    from hosts.lease import DEFAULT_PATH
    return DEFAULT_PATH
