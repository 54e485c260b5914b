"""Readiness of acceptance: each lane the manifest declares has a passing latest acceptance window
whose docs blocks are the ones the release ships, and a release that upgrades an incumbent has a
passing upgrade rehearsal.

The manifest's `acceptance` field ({"lanes": [...], "incumbent": {"version"} | null}) says what is
required. Several acceptance receipts may record one lane (the first window, then corrected ones);
the highest `attempt` decides. The docs asset named by that receipt must be listed in SHA256SUMS;
its executable blocks (releases.docs_blocks) are extracted again and must equal the recorded ones,
so an edited, added or removed block is named (heading and index) and a prose edit is not."""
from __future__ import annotations

from releases.docs_blocks import changed_blocks
from releases.errors import RecordError
from releases.release_dir import MANIFEST
from releases.sums import SUMS_NAME, parse_sums
from releases.verify.checker import Checker

Preds = dict[str, list[tuple[str, dict]]]


def latest_attempts(preds: Preds) -> dict[str, tuple[str, dict]]:
    """lane -> (path, predicate) of its acceptance receipt with the highest attempt."""
    latest: dict[str, tuple[str, dict]] = {}
    for rel, p in preds.get("acceptance", []):
        lane = p.get("lane")
        if lane is not None and (lane not in latest or p["attempt"] > latest[lane][1]["attempt"]):
            latest[lane] = (rel, p)
    return latest


def _summed(check: Checker, manifest: dict) -> dict[str, str]:
    data = check.read(SUMS_NAME, "sums") if "sums" in manifest else None
    if data is None:
        return {}
    try:
        return parse_sums(data)
    except RecordError:
        return {}  # files.check_sums has already named what is wrong with it


def _check_docs(check: Checker, manifest: dict, lane: str, rel: str, docs: dict, summed: dict[str, str]) -> None:
    path = f"artifacts/{docs['asset']}"
    if path not in summed:
        check.fail(rel, "payload/predicate/docs/asset",
                   f"lane {lane}: docs asset {docs['asset']} is not listed in {SUMS_NAME}: NOT READY")
        return
    data = check.read(path, "artifacts")
    if data is None:
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        check.fail(path, "", f"lane {lane}: docs asset is not UTF-8 text")
        return
    for problem in changed_blocks(text, docs["blocks"]):
        check.fail(path, "blocks", f"lane {lane}: {problem}: NOT READY (run the acceptance window again)")
    if docs["sha256"] != summed[path]:
        check.warnings.append(f"{path}: changed since the lane {lane} acceptance window, in prose only "
                              "(every executable block is the accepted one)")


def check_acceptance_ready(check: Checker, manifest: dict, preds: Preds) -> None:
    """Fail (naming the lane, receipt or block) anything the manifest's `acceptance` field requires
    and the records do not show, and a lane whose latest recorded window did not pass."""
    declared = manifest.get("acceptance") or {"lanes": [], "incumbent": None}
    latest = latest_attempts(preds)
    for lane in sorted(set(latest) - set(declared["lanes"])):  # recorded though not declared: still must pass
        rel, p = latest[lane]
        if p["verdict"] != "pass":
            check.fail(rel, "payload/predicate/verdict",
                       f"lane {lane}: the latest acceptance attempt ({p['attempt']}) is {p['verdict']}: NOT READY")
    attempts: dict[tuple[str, int], int] = {}
    for _, p in preds.get("acceptance", []):
        if p.get("lane") is not None:
            key = (p["lane"], p["attempt"])
            attempts[key] = attempts.get(key, 0) + 1
    summed = _summed(check, manifest)
    for i, lane in enumerate(declared["lanes"]):
        if lane not in latest:
            check.fail(MANIFEST, f"acceptance/lanes/{i}",
                       f"lane {lane} declares an acceptance window but no acceptance receipt records one: NOT READY")
            continue
        rel, p = latest[lane]
        if attempts[(lane, p["attempt"])] > 1:
            check.fail(rel, "payload/predicate/attempt", f"lane {lane}: attempt {p['attempt']} is recorded more than once")
        if p["verdict"] != "pass":
            check.fail(rel, "payload/predicate/verdict",
                       f"lane {lane}: the latest acceptance attempt ({p['attempt']}) is {p['verdict']}: NOT READY")
        if p["hold_s"] > p["max_hold_s"]:
            check.fail(rel, "payload/predicate/hold_s",
                       f"lane {lane}: host held {p['hold_s']}s, longer than the allowed {p['max_hold_s']}s")
        for j, block in enumerate(p["docs"]["blocks"]):
            if block["exit_status"] != 0 and p["verdict"] == "pass":
                check.fail(rel, f"payload/predicate/docs/blocks/{j}/exit_status",
                           f'lane {lane}: block {block["index"]} under "{block["heading"]}" exited '
                           f'{block["exit_status"]} in a passing window')
        _check_docs(check, manifest, lane, rel, p["docs"], summed)
    incumbent = declared.get("incumbent")
    if incumbent is not None:
        passed = [p for _, p in preds.get("rehearsal", []) if p["verdict"] == "pass"
                  and p["from_version"] == incumbent["version"] and p["to_version"] == manifest["version"]]
        if not passed:
            check.fail(MANIFEST, "acceptance/incumbent",
                       f"an incumbent release ({incumbent['version']}) exists but no passing rehearsal of the upgrade "
                       f"{incumbent['version']} -> {manifest['version']} is recorded: NOT READY")
