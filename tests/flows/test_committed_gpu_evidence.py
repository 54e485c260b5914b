"""The H200 evidence committed under evidence/gpu-h200: it verifies under the lane key pinned in
the embedded defaults, qualifies the wheel this checkout's engine builds to, and holds what the
GPU lane must show. An engine change that alters the wheel fails the binding check here, as it makes
`make run` stop at a hardware-pending lane: re-run the lane on the GPU host and commit its evidence
(docs/LANES.md, Lane evidence)."""

from __future__ import annotations

import base64
import dataclasses
import json

import pytest

from flows import lane_evidence
from flows.config import load_config


def _predicate(evidence, kind: str) -> dict:
    for k, _label, _path, envelope in evidence.receipts:
        if k == kind:
            return json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    raise AssertionError(f"no {kind} receipt")


def _phase(evidence, name: str) -> dict:
    for k, label, _path, envelope in evidence.receipts:
        if k == "phase" and label.endswith("/" + name):
            return json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    raise AssertionError(f"no phase {name}")


@pytest.fixture(scope="module")
def evidence():
    cfg = load_config()
    lane = lane_evidence.evidence_lane(cfg, "gpu-h200")
    return cfg, lane, lane_evidence.check_dir(cfg, lane, cfg.lane("gpu-h200").evidence)


def test_binds_this_checkouts_engine_wheel(evidence):
    cfg, lane, ev = evidence
    name, sha256 = lane_evidence.candidate_wheel_sha256(cfg, "HEAD")
    state, bound = lane_evidence.resolve(cfg, lane, sha256)
    assert (state, bound.wheel) == (lane_evidence.BOUND, {"name": name, "sha256": sha256}), \
        "the engine's bytes changed since the gpu-h200 lane ran: re-qualify it on the GPU host"


def test_holds_what_the_gpu_lane_must_show(evidence):
    _cfg, _lane, ev = evidence
    assert ev.kind == "gpu"
    lane = _predicate(ev, "lane")
    assert lane["verdict"] == "pass" and all(p["status"] == "pass" for p in lane["phases"])
    assert [p["name"] for p in lane["phases"]][-1] == "restore" and len(lane["phases"]) == 11
    gpus = _phase(ev, "preflight")["facts"]["gpus"]
    assert gpus and "H200" in gpus[0]["name"]
    bench = _phase(ev, "benchmark")["facts"]
    assert bench["model"]["preset"] == "llama-8b" and bench["model"]["parameters"] > 7e9
    assert bench["bandwidth"]["copy"]["bytes_per_s"] > 3e12 and bench["decode_tok_s_median"] > 100
    assert bench["bandwidth"]["decode_fraction_of_copy"] == pytest.approx(
        bench["decode_tok_s_median"] * bench["bandwidth"]["weights_bytes"] / bench["bandwidth"]["copy"]["bytes_per_s"],
        rel=1e-3)
    context = _phase(ev, "context")["facts"]
    assert context["exact"] == context["depths"] == 3 and context["prompt_tokens_min"] >= 7000
    assert _phase(ev, "restart")["facts"]["token_ids_equal"] is True
    for gate in ("abba", "noninferiority", "determinism", "latency"):
        verdict = _predicate(ev, f"verdict-{gate}")
        assert verdict["verdict"] == "pass", gate
        assert verdict["judged"]["size"] == "full" and verdict["judged"]["incumbent"]["source_commit"]
    assert _predicate(ev, "verdict-determinism")["counts"]["identical"] == 80
    assert _predicate(ev, "verdict-noninferiority")["counts"]["pairs"] == 1120


def test_refused_for_a_lane_naming_another_gpu(evidence):
    cfg, lane, _ev = evidence
    other = dataclasses.replace(lane, gpu="h100")
    with pytest.raises(lane_evidence.EvidenceRefused) as refused:
        lane_evidence.check_dir(cfg, other, lane.evidence)
    assert refused.value.problems == [
        "receipts/lane/gpu-h200.dsse.json: the lane names GPU 'h100', but its preflight saw NVIDIA H200 on the host"]
