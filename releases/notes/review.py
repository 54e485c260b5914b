"""The sections about people's decisions: the review ledger, the waivers disclosed with their
digests, and the approval."""
from __future__ import annotations

from releases.ledger import BLOCKING, is_unreviewed
from releases.notes.doc import Code, Heading, Para, Table, joined
from releases.notes.sections import SKIP, leaf_rows
from releases.notes.source import MANIFEST, Release


def _record_rows(rel: Release, path: str) -> list[list]:
    """Rows for a record that may be plain JSON or a receipt (then its predicate)."""
    doc = rel.doc(path)
    if isinstance(doc, dict) and "predicate" in doc and "predicateType" in doc:
        return leaf_rows(rel, path, ("predicate",), doc["predicate"], skip=SKIP)
    return leaf_rows(rel, path, (), doc, skip=SKIP)


def _evidence(rel: Release, path: str, n: int, d: dict) -> list:
    base = f"/items/{n}/disposition"
    if d["status"] == "fixed":
        return joined([rel.fig(path, f"{base}/{k}") for k in ("commit", "receipt_sha256") if k in d])
    if d["status"] == "deferred":
        return ["issue ", rel.fig(path, f"{base}/issue")]
    if d["status"] == "accepted-risk":
        return [rel.fig(path, f"{base}/reason"), " (accepted by ", rel.fig(path, f"{base}/by"), ")"]
    return []


def review(rel: Release) -> list:
    blocks: list = [Heading(2, ["Review ledger"])]
    if "ledger" not in rel.manifest:
        return blocks + [Para(["No review ledger is bound yet."])]
    path = rel.manifest["ledger"]["path"]
    led = rel.doc(path)
    blocks.append(Para(["Ledger ", rel.fig(MANIFEST, "/ledger/path"), ", digest ", rel.fig(MANIFEST, "/ledger/sha256"), "."]))
    if not (isinstance(led, dict) and "ledger_schema" in led):
        return blocks + [Table(["field", "value"], _record_rows(rel, path))]
    closure = led.get("closure")
    if is_unreviewed(led):
        closed = [" (recorded by ", rel.fig(path, "/closure/by"), " at ", rel.fig(path, "/closure/at"), ")"] if closure else []
        statement = rel.fig(path, "/closure/statement") if closure else "no closure"
        return blocks + [Para(["No reviewer supplied a ledger for this candidate: ", statement, *closed, "."])]
    blocks.append(Para(["Review ", rel.fig(path, "/review_id"), " from base ", rel.fig(path, "/base"), " to head ",
                        rel.fig(path, "/head"), "."]))
    blocks.append(Table(["seat", "reviewer"], [[[rel.fig(path, f"/seats/{i}/role")],
                                                [rel.fig(path, f"/seats/{i}/reviewer")] if "reviewer" in s else ["not named"]]
                                               for i, s in enumerate(led["seats"])]))
    if led["rounds"]:
        blocks.append(Table(["round", "completed", "missing", "aborted"],
                            [[[rel.fig(path, f"/rounds/{i}/{k}")] for k in ("round", "completed", "missing", "aborted")]
                             for i, _ in enumerate(led["rounds"])]))
    items = Table(["item", "priority", "in scope", "disposition", "evidence, issue or reason", "title"])
    blocking = []
    for n, item in enumerate(led["items"]):
        items.rows.append([[rel.fig(path, f"/items/{n}/{k}")] for k in ("id", "priority", "in_scope")]
                          + [[rel.fig(path, f"/items/{n}/disposition/status")],
                             _evidence(rel, path, n, item["disposition"]), [rel.fig(path, f"/items/{n}/title")]])
        if item["in_scope"] and item["priority"] in BLOCKING and item["disposition"]["status"] == "open":
            blocking.append(rel.fig(path, f"/items/{n}/id"))
    blocks.append(items if items.rows else Para(["The review recorded no items."]))
    rule = ["The closure rule (no open in-scope item of priority ", *joined([Code(p) for p in BLOCKING], " or "), ") "]
    blocks.append(Para(rule + (["is not met; open: ", *joined(blocking), "."] if blocking else ["is met."])))
    if closure:
        blocks.append(Para(["Closed by ", rel.fig(path, "/closure/by"), " at ", rel.fig(path, "/closure/at"), ": ",
                            rel.fig(path, "/closure/statement")]))
    else:
        blocks.append(Para(["The accountable lead has not closed the review."]))
    return blocks


def waivers(rel: Release) -> list:
    blocks: list = [Heading(2, ["Waivers"])]
    entries = rel.manifest.get("waivers", [])
    if not entries:
        return blocks + [Para(["No waivers are bound to this release."])]
    for i, entry in enumerate(entries):
        blocks += [Heading(3, ["Waiver ", rel.fig(MANIFEST, f"/waivers/{i}/id")]),
                   Para(["File ", rel.fig(MANIFEST, f"/waivers/{i}/path"), ", digest ",
                         rel.fig(MANIFEST, f"/waivers/{i}/sha256"), "."]),
                   Table(["field", "value"], _record_rows(rel, entry["path"]))]
    return blocks


def approval(rel: Release) -> list:
    blocks: list = [Heading(2, ["Approval"])]
    if "approval" not in rel.manifest:
        return blocks + [Para(["Not approved yet: the release is in state ", rel.fig(MANIFEST, "/state"), "."])]
    blocks.append(Para(["Decision ", rel.fig(MANIFEST, "/approval/decision"), " by ", rel.fig(MANIFEST, "/approval/approver"),
                        ", binding the ready manifest's digest ", rel.fig(MANIFEST, "/approval/manifest_sha256"),
                        "; recorded in ", rel.fig(MANIFEST, "/approval/path"), " (digest ",
                        rel.fig(MANIFEST, "/approval/sha256"), ")."]))
    return blocks + [Table(["field", "value"], _record_rows(rel, rel.manifest["approval"]["path"]))]
