"""Phase outcomes and the verdict of a chain."""

from __future__ import annotations

from gates.kinds import KINDS, NATIVE_CHAIN, chain_for
from gates.phases import PhaseFailed, PhaseOutcome, verdict_of


def _o(status):
    return PhaseOutcome("p", status, "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", {})


def test_verdict_is_pass_only_when_every_phase_passed():
    assert verdict_of([_o("pass"), _o("pass")]) == "pass"
    assert verdict_of([_o("pass"), _o("fail"), _o("skipped")]) == "fail"
    assert verdict_of([_o("pass"), _o("inconclusive"), _o("skipped")]) == "inconclusive"
    assert verdict_of([_o("pass"), _o("skipped")]) == "inconclusive"


def test_phase_failed_carries_its_reason_and_status():
    failed = PhaseFailed("no signal", {"n": 3}, status="inconclusive")
    assert failed.facts == {"n": 3, "reason": "no signal"} and failed.status == "inconclusive"


def test_kinds_declare_their_chains_with_restore_last():
    assert KINDS["cpu-reference"].phases == NATIVE_CHAIN
    assert KINDS["gpu"].phases == NATIVE_CHAIN and KINDS["gpu"].device == "cuda"
    smoke = KINDS["cpu-smoke"].phases
    assert smoke[0] == "preflight" and smoke[-1] == "restore" and "context" not in smoke
    # A chosen subset keeps native order and always ends with restore.
    assert chain_for(KINDS["cpu-smoke"], ["protocol", "preflight"]) == ("preflight", "protocol", "restore")
