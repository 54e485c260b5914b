"""preflight: host facts, free disk at least the lane's floor, GPU facts and power limits read
only, the GPU the lane names (its `gpu`) on the host, the lease held by this window, nothing of
this lane already running, and the packages the lane needs already installed beside the host's
interpreter (gates/lane_deps.py)."""

from __future__ import annotations

import hashlib
import json
import posixpath

from gates import lane_deps
from gates.phases import PhaseFailed
from hosts import audit
from releases.gpu_names import gpu_named

_DISK = ("import json, os, shutil, sys\np = sys.argv[1]\nwhile not os.path.exists(p):\n    p = os.path.dirname(p) or '/'\n"
         "u = shutil.disk_usage(p)\nprint(json.dumps({'free': u.free, 'total': u.total}))")


def run(rt) -> dict:
    facts = rt.host.facts()
    gpus = [{"name": g.name, "uuid_sha256": hashlib.sha256(g.uuid.encode()).hexdigest(), "driver": g.driver_version,
             "memory_total_mib": g.memory_total_mib, "power_limit_w": g.power_limit_w,
             "power_default_limit_w": g.power_default_limit_w} for g in facts.gpus]
    disk = json.loads(rt.host.run([rt.base_python, "-c", _DISK, posixpath.dirname(rt.workdir.rstrip("/"))],
                                  timeout=60).check().stdout)
    floor = rt.spec.setting("disk_floor_mib")
    seen = audit.observe(rt.host, marker=rt.workdir, paths={})
    lease = rt.window.lease_holder()
    out = {"host": {"os": facts.os, "kernel": facts.kernel, "cpu_count": facts.cpu_count,
                    "memory_bytes": facts.memory_bytes, "python": facts.python_version,
                    "hostname_sha256": hashlib.sha256(facts.hostname.encode()).hexdigest()},
           "gpus": gpus, "gpu_count": len(gpus),
           "disk_free_mib": disk["free"] // (1 << 20), "disk_floor_mib": floor,
           "lease_held": lease == rt.window.run_id, "lane_processes_running": len(seen["processes"]),
           "lane_ports_listening": len(seen["listening"])}
    if rt.spec.lane_kind.device == "cuda" and not gpus:
        raise PhaseFailed("a gpu lane's host shows no GPU (nvidia-smi)", out)
    # On a cpu kind `gpu` only names the GPU slot the window holds; the lane runs on no GPU.
    wanted = rt.spec.gpu if rt.spec.lane_kind.device == "cuda" else None
    if wanted:
        out["gpu_wanted"] = wanted
        if not any(gpu_named(wanted, g["name"]) for g in gpus):
            # The wrong host, not the candidate: its figures would stand under another GPU's name.
            shown = ", ".join(g["name"] for g in gpus) or "none"
            raise PhaseFailed(f"lane {rt.spec.name} names GPU {wanted!r}, but the host shows: {shown}", out,
                              status="inconclusive")
    if out["disk_free_mib"] < floor:
        raise PhaseFailed(f"free disk {out['disk_free_mib']} MiB is below the lane's floor {floor} MiB", out)
    if not out["lease_held"]:
        raise PhaseFailed("this window does not hold the host's lease", out)
    if seen["processes"] or seen["listening"]:
        raise PhaseFailed("something of this lane is already running on the host", out)
    try:
        needs = lane_deps.needed(rt.wheel, rt.spec.chain)
    except lane_deps.WheelMetadataError as error:
        raise PhaseFailed(str(error), out) from None
    lacking, below = lane_deps.missing_on_host(rt.host, rt.base_python, needs)
    out["host_packages"] = {"checked": sum(len(v) for v in needs.values()), "missing": lacking,
                            "unmet_below": below}
    if lacking:
        # The host, not the candidate, falls short: the lane cannot judge it, so inconclusive.
        said = "; ".join(f"{who}: {', '.join(reqs)}" for who, reqs in lacking.items())
        raise PhaseFailed(f"the lane host's python lacks what the lane needs ({said})", out, status="inconclusive")
    return out
