"""install: the wheel transferred, its sha256 re-checked on the host, installed into a fresh
venv; the installed engine reports the candidate's version and package digest."""

from __future__ import annotations

import shlex

from gates.install import check_identity, install_wheel, installed_package_sha256, kernels_beside, wheel_package_sha256
from gates.phases import PhaseFailed


def run(rt) -> dict:
    rt.installed = None
    installed, facts = install_wheel(rt.host, rt.wheel, rt.workdir, rt.base_python, kernels=kernels_beside(rt.wheel))
    rt.host.run(f"printf %s {rt.wheel_sha256} > {shlex.quote(installed.venv + '/assay-wheel.sha256')}", timeout=60).check()
    rt.installed = installed
    identity = check_identity(rt.host, installed, rt.version)
    expected = wheel_package_sha256(rt.wheel)
    got = installed_package_sha256(rt.host, installed)
    out = {**facts, "transfer_sha256_rechecked": True, "version": identity["version"],
           "imported_from_lane_venv": identity["imported_from_lane_venv"],
           "package_sha256": got, "wheel_package_sha256": expected}
    if got != expected:
        raise PhaseFailed("the installed engine package is not the wheel's", out)
    rt.shared["package_sha256"] = expected
    return out
