"""A failure injected in each phase of the native chain (qualify's `fault` hook; the command line
reads ASSAY_LANE_FAULT) ends the lane failed, with the host restored and the independent audit
passing: no process or port of the window left, its working directory gone, the lease free.

Each case runs the failing phase alone on the cpu-smoke kind (tiny model): every phase makes
ready what it needs (wheel installed, engine started) so that the failure strikes with the
engine running, which is the state a restore must undo."""

from __future__ import annotations

import pytest

from gates.kinds import NATIVE_CHAIN
from gates.qualify import qualify
from hosts import audit
from hosts.lease import lease_state
from hosts.local import LocalHost
from tests.gates.conftest import smoke_spec


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("phase", NATIVE_CHAIN)
def test_injected_failure_still_restores_and_audits(phase, tmp_path, engine_wheel, candidate, signing_key):
    chain = ["protocol"] if phase == "restore" else [phase]
    spec = smoke_spec(tmp_path, phases=chain, context_tokens=300, bench_runs=1)
    result = qualify(LocalHost(), spec, candidate, engine_wheel, tmp_path / "out", key=signing_key, fault=phase)
    outcomes = {o.name: o for o in result.phases}
    assert result.verdict == "fail"
    assert outcomes[phase].status == "fail" and outcomes[phase].facts["injected_fault"] is True
    restore = outcomes["restore"].facts
    assert restore["restored"] is True and restore["restore_diff"] == []
    assert restore["audit"]["ok"] is True and {c["status"] for c in restore["audit"]["checks"]} == {"pass"}
    workdir = str(tmp_path / "out" / "work" / "cpu-smoke")
    seen = audit.observe(LocalHost(), marker=workdir, paths={"workdir": workdir})
    assert seen["processes"] == {} and seen["listening"] == [] and seen["paths"]["workdir"]["exists"] is False
    assert lease_state(LocalHost(), spec.lease_path) is None
    # The failed phase has its signed receipt too, and the lane receipt binds it.
    assert f"cpu-smoke/{phase}" in [e["label"] for e in result.record["phase_receipts"]]
