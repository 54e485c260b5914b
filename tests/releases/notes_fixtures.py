"""A published release with everything the notes render: the synthetic release of fixtures.py,
plus a lane with several phases and facts, the four verdicts, a `phase` receipt, a real review
ledger and an approval. Built with the real record, crypto and writer code.

The `phase` receipt is signed and written by hand (dsse.sign over a Statement) because its
predicate type is not registered in releases.receipts yet; the notes render any kind generically.
"""
from __future__ import annotations

from pathlib import Path

from releases import approval as approval_mod
from releases import dsse, manifest as mf
from releases.canonical import canonical_json
from releases.ledger import new_ledger
from releases.ledger_edits import add_item, add_round, close, disposition, dispose
from releases.receipts import STATEMENT_TYPE, sign_receipt
from releases.release_dir import ReleaseDir, receipt_path, write_json
from tests.releases.fixtures import APPROVERS, T1, SyntheticRelease, build_release

H = "ab" * 32
# A title with every character Markdown would otherwise read as syntax, and a newline.
AWKWARD_TITLE = "Fix `pool` | [spill] *twice* <b>_x_</b> #3 ~y~ !\\ and\nthe second line"


def _abba(ref: dict) -> dict:
    def case(cid, ratio, status, rates):
        return {"id": cid, "weight": 1.0, "context_depth": 1024, "tokens": 256, "rates": rates, "ratio": ratio,
                "spread_a": 0.012, "spread_b": 0.0085, "repeat_identical_a": True, "repeat_identical_b": True,
                "cross_identical": True, "status": status}

    return {"kind": "verdict-abba", "schema": "assay/verdict-abba/v1", "verdict": "pass", "candidate": ref,
            "reasons": ["every case at or above the floor, or waived"], "input_sha256": H, "code_sha256": H,
            "parameters": {"floor": 0.97, "max_leg_spread": 0.05, "leg_order": ["A1", "B1", "B2", "A2"],
                           "ratio": "(B1+B2)/(A1+A2)", "floor_rule": "ratio >= floor", "weighting": "equal",
                           "waiver_rule": "signed waiver per case"},
            "counts": {"cases": 3, "complete_cases": 3, "below_floor": 1, "waived": 1, "failing": 0,
                       "repeat_identical_a": 3, "repeat_identical_b": 3, "cross_identical": 3},
            "weighted_ratio": 1.0123, "failing_cases": [],
            "cases": [case("decode-b1-1k", 1.0412, "pass", {"A1": 101.5, "B1": 105.25, "B2": 105.75, "A2": 101.0}),
                      case("decode-b8-4k", 1.0, "pass", None),
                      case("prefill-32k", 0.9531, "waived", None)],
            "waivers": [{"sha256": H, "case": "prefill-32k", "measured_ratio": 0.9531, "approved_by": "oncall-lead",
                         "applied": True, "note": "known regression, issue filed"}]}


def _noninferiority(ref: dict) -> dict:
    def metric(name, margin, threshold, estimate, bound, passed):
        return {"name": name, "kind": "difference", "better": "higher", "margin": margin, "threshold": threshold,
                "bound_side": "lower", "estimate": estimate, "bound": bound, "evaluable": True, "passed": passed}

    return {"kind": "verdict-noninferiority", "schema": "assay/verdict-noninferiority/v1", "verdict": "pass",
            "candidate": ref, "reasons": [], "input_sha256": H, "code_sha256": H,
            "parameters": {"seed": 20260102, "resamples": 2000, "confidence": 0.95, "max_error_rate": 0.02,
                           "min_perturbed_cases": 10, "bootstrap": "two-level cluster", "block": 250,
                           "rng": "PCG64", "statistic": "mean difference", "tie_rule": "half"},
            "counts": {"pairs": 400, "errors": 1, "error_rate": 0.0025, "pairs_used": 399, "cases": 50,
                       "perturbed_cases": 40},
            "metrics": [metric("exact-match", 0.02, -0.02, 0.001, -0.0123, True),
                        metric("pass-at-one", 0.05, -0.05, -0.01, -0.0412, True),
                        {**metric("refusals", 0.01, 0.01, None, None, None), "evaluable": False}]}


def _determinism(ref: dict) -> dict:
    return {"kind": "verdict-determinism", "schema": "assay/verdict-determinism/v1", "verdict": "fail",
            "candidate": ref, "reasons": ["prompt p-17 differs in run 2"], "input_sha256": H, "code_sha256": H,
            "counts": {"runs": 3, "prompts": 20, "differing": 1, "identical": 19},
            "first_difference": {"prompt": "p-17", "run": 2, "sha256": ["1" * 64, "2" * 64]}}


def _latency(ref: dict) -> dict:
    return {"kind": "verdict-latency", "schema": "assay/verdict-latency/v1", "verdict": "pass", "candidate": ref,
            "reasons": [], "input_sha256": H, "code_sha256": H,
            "parameters": {"absolute_s": 0.005, "relative": 0.05,
                           "rule": "candidate_s <= incumbent_s + max(absolute_s, relative * incumbent_s)"},
            "counts": {"positions": 2, "measured": 2, "over": 0},
            "positions": [{"id": "ttft", "incumbent_s": 0.125, "candidate_s": 0.12, "allowed_s": 0.13125,
                           "margin_s": 0.01125, "passed": True},
                          {"id": 2, "incumbent_s": 0.03, "candidate_s": 0.031, "allowed_s": 0.035,
                           "margin_s": 0.004, "passed": True}],
            "worst": {"id": 2, "margin_s": 0.004}}


def _lane(ref: dict, wheel: dict) -> dict:
    steps = [("install", "2026-01-02T03:04:05Z", "2026-01-02T03:04:35Z", {"exit_code": 0, "seconds": 30.25}),
             ("generate", "2026-01-02T03:04:35Z", "2026-01-02T03:05:10Z",
              {"seconds": 35.5, "tokens": 64, "identical": True, "outputs": {"a_sha256": "3" * 64},
               "p99 / ms~x": 12.5}),  # a key that needs escaping in a JSON pointer and a URI fragment
             ("restore-audit", "2026-01-02T03:05:10Z", "2026-01-02T03:05:12.5Z", {"diff": [], "restored": True})]
    return {"candidate": ref, "lane": "cpu-smoke", "host": "cpu-lane-1",
            "artifact": {"name": Path(wheel["path"]).name, "sha256": wheel["sha256"]}, "verdict": "pass",
            "phases": [{"name": n, "status": "pass", "started_at": a, "ended_at": b, "facts": f} for n, a, b, f in steps],
            "window": {"lease": {"holder": "assay", "pid": 4242}, "restored": True, "restore_diff": []}}


def _phase_envelope(ref: dict, wheel: dict, private_key) -> dict:
    stmt = {"_type": STATEMENT_TYPE, "subject": [{"name": Path(wheel["path"]).name, "digest": {"sha256": wheel["sha256"]}}],
            "predicateType": "https://assay.dev/predicates/phase/v1",
            "predicate": {"candidate": ref, "lane": "cpu-smoke", "name": "generate", "status": "pass",
                          "started_at": "2026-01-02T03:04:35Z", "ended_at": "2026-01-02T03:05:10Z",
                          "facts": {"seconds": 35.5, "decode_tok_s": [12.5, 12.75]}}}
    return dsse.sign(canonical_json(stmt), dsse.INTOTO_PAYLOAD_TYPE, private_key)


def _reproducibility(ref: dict, artifacts: list[dict]) -> dict:
    wheel, sdist = artifacts
    return {"candidate": ref, "builds": ["a", "b"], "verdict": "waived", "difference_count": 2, "unexplained": 0,
            "waived": ["sdist-mtime"],
            "files": [{"name": Path(wheel["path"]).name, "a_sha256": wheel["sha256"], "b_sha256": wheel["sha256"],
                       "identical": True, "differences": []},
                      {"name": Path(sdist["path"]).name, "a_sha256": sdist["sha256"], "b_sha256": "6" * 64,
                       "identical": False,
                       "differences": [{"member": "assay_engine-1.2.3/PKG-INFO", "kind": "timestamp",
                                        "detail": "mtime 1700000000 vs 1700000123: varied clock (bisected)"},
                                       {"member": None, "kind": "header", "detail": "gzip header mtime"}]}]}


def review_ledger(ref: dict) -> dict:
    led = new_ledger(ref, review_id="rc-1.2.3", base="0" * 40,
                     seats=[{"role": "kernels", "reviewer": "reviewer-a"}, {"role": "security"}])
    led = add_round(led, completed=1, missing=1)
    led = add_round(led, completed=2)
    led = add_item(led, id="R1", title="bounds check in the decode kernel", priority="P0", seat="kernels")
    led = add_item(led, id="R2", title=AWKWARD_TITLE, priority="P1", seat="security")
    led = add_item(led, id="R3", title="flaky latency on the shared lane", priority="P2")
    led = add_item(led, id="R4", title="docs typo", priority="P3", in_scope=False)
    led = dispose(led, "R1", disposition("fixed", commit="4" * 40, receipt_sha256="5" * 64))
    led = dispose(led, "R2", disposition("deferred", issue="#17"))
    led = dispose(led, "R3", disposition("accepted-risk", reason="lane noise, not the engine", by="release-manager"))
    return close(led, by="release-manager", statement="all P0/P1 items fixed or deferred", at=T1)


def build_rich_release(root: str | Path) -> SyntheticRelease:
    """The published release of fixtures.build_release, plus every kind of record the notes render."""
    rel = build_release(root, state="ready")
    rd, priv, ref, m = ReleaseDir(rel.root), rel.private_key, rel.candidate_ref, rel.manifest
    wheel = m["artifacts"][0]
    subject = [{"name": Path(wheel["path"]).name, "digest": {"sha256": wheel["sha256"]}}]
    # Replace the reproducibility receipt with one whose sdist differed in an explained way.
    repro = _reproducibility(ref, m["artifacts"])
    entry = rd.add_receipt("reproducibility", sign_receipt("reproducibility", [
        {"name": Path(a["path"]).name, "digest": {"sha256": a["sha256"]}} for a in m["artifacts"]], repro, priv))
    receipts = [entry if r["kind"] == "reproducibility" else r for r in m["receipts"]]
    receipts.append(rd.add_receipt("lane", sign_receipt("lane", subject, _lane(ref, wheel), priv), "cpu-smoke"))
    for kind, pred in (("verdict-abba", _abba(ref)), ("verdict-noninferiority", _noninferiority(ref)),
                       ("verdict-determinism", _determinism(ref)), ("verdict-latency", _latency(ref))):
        receipts.append(rd.add_receipt(kind, sign_receipt(kind, subject, pred, priv), "cpu"))
    # Written beside ReleaseDir.add_receipt, which refuses a kind without a registered predicate type.
    phase_path = receipt_path("phase", "cpu-smoke.generate")
    receipts.append({"kind": "phase", "label": "cpu-smoke.generate", "path": phase_path,
                     "sha256": write_json(rel.root / phase_path, _phase_envelope(ref, wheel, priv))})
    m = mf.update(m, receipts=receipts, ledger=rd.add_ledger(review_ledger(ref)))
    appr = approval_mod.build_approval(m, decision="approve", approver="release-manager", allowed_approvers=APPROVERS,
                                       reason="all gates green", acknowledged_waivers=["lane-latency-p99"],
                                       flow_run_id="flow-run-1", decided_at=T1)
    env = sign_receipt("approval", approval_mod.approval_subjects(appr), appr, priv)
    m = mf.transition(m, "published", approval=rd.add_approval(env, appr, appr["manifest_sha256"]))
    rd.write_manifest(m, priv)
    rel.manifest = m
    return rel


__all__ = ["AWKWARD_TITLE", "build_rich_release", "review_ledger"]
