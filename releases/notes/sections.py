"""The sections of the notes about what was built and how it was qualified: identity, artifacts,
builds and reproducibility, lanes and acceptance windows. Every value printed is a Fig."""
from __future__ import annotations

from typing import Any

from releases.errors import RecordError
from releases.notes import charts
from releases.notes.doc import Bullets, Code, Heading, Para, Table, inline, joined
from releases.notes.source import MANIFEST, Release

# A value the notes do not print field by field (the candidate is named once, at the top).
SKIP = ("candidate",)


def statement_kind(stmt: dict) -> str:
    """The receipt kind a Statement's predicateType names; unknown URIs are kept whole."""
    uri = stmt.get("predicateType", "")
    if uri.startswith("https://slsa.dev/provenance/"):
        return "build"
    prefix = "https://assay.dev/predicates/"
    if uri.startswith(prefix):
        return uri[len(prefix):].split("/")[0]
    return uri


def flatten(value: Any, tokens: tuple = ()) -> list[tuple[tuple, Any]]:
    """Every scalar leaf under `value` with the tokens that reach it, in document order."""
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in flatten(v, tokens + (k,))]
    if isinstance(value, list):
        return [leaf for n, v in enumerate(value) for leaf in flatten(v, tokens + (n,))]
    return [(tokens, value)]


def key_text(tokens: tuple) -> str:
    return ".".join(f"[{t}]" if isinstance(t, int) else str(t) for t in tokens).replace(".[", "[")


def leaf_rows(rel: Release, path: str, base: tuple, value: Any, skip: tuple = ()) -> list[list]:
    """Table rows `key | value` for every scalar under `value` (at `base` in `path`)."""
    rows = []
    for tokens, _ in flatten(value):
        if tokens and tokens[0] in skip:
            continue
        rows.append([[Code(key_text(tokens) or "(value)")], [rel.fig(path, list(base + tokens))]])
    return rows


def header(rel: Release) -> list:
    m = rel.manifest
    blocks = [Heading(1, ["Release ", rel.fig(MANIFEST, "/version")]),
              Para(["State ", rel.fig(MANIFEST, "/state"), "; candidate commit ", rel.fig(MANIFEST, "/candidate/commit"),
                    ", tree ", rel.fig(MANIFEST, "/candidate/tree"), ", id ", rel.fig(MANIFEST, "/candidate/id"), "."]),
              Para(["Every figure in these notes links to the file it was read from and the JSON pointer inside it. "
                    "In a receipt (a file ending ", Code(".dsse.json"), ") the pointer addresses the decoded payload "
                    "of its DSSE envelope: the in-toto Statement."])]
    if "candidate_record" in m:
        path = m["candidate_record"]["path"]
        cand = rel.doc(path)
        blocks.append(Para(["Source ", rel.fig(path, "/source/name"), " at ", rel.fig(path, "/source/ref"),
                            " (subdirectory ", rel.fig(path, "/source/subdir"), "), source date epoch ",
                            rel.fig(path, "/source_date_epoch"), ", package ", rel.fig(path, "/package/name"), " ",
                            rel.fig(path, "/package/version"), ", dirty ", rel.fig(path, "/dirty"), "."]
                           if isinstance(cand.get("source"), dict) else ["Candidate record ", Code(path), "."]))
    return blocks


def built(rel: Release) -> list:
    m = rel.manifest
    blocks: list = [Heading(2, ["What was built"])]
    arts = Table(["artifact", "kind", "size (bytes)", "digest"])
    for n, _ in enumerate(m.get("artifacts", [])):
        arts.rows.append([[rel.fig(MANIFEST, f"/artifacts/{n}/{k}")] for k in ("path", "kind", "size", "sha256")])
    sboms = Table(["SBOM", "format", "digest"])
    for n, _ in enumerate(m.get("sboms", [])):
        sboms.rows.append([[rel.fig(MANIFEST, f"/sboms/{n}/{k}")] for k in ("path", "format", "sha256")])
    blocks += [arts] if arts.rows else [Para(["No artifacts are recorded yet."])]
    blocks += [sboms] if sboms.rows else []
    if "sums" in m:
        blocks.append(Para(["Checksums: ", rel.fig(MANIFEST, "/sums/path"), " (digest ", rel.fig(MANIFEST, "/sums/sha256"),
                            ")."]))
    for n, entry in enumerate(m.get("receipts", [])):
        stmt = rel.doc(entry["path"])
        if statement_kind(stmt) != "build":
            continue
        path, run = entry["path"], ["predicate", "runDetails"]
        name = rel.fig(MANIFEST, f"/receipts/{n}/label") if entry["label"] else Code(entry["kind"])
        blocks += [Heading(3, ["Build ", name]),
                   Para(["Builder ", rel.fig(path, run + ["builder", "id"]), ", invocation ",
                         rel.fig(path, run + ["metadata", "invocationId"]), ", from ",
                         rel.fig(path, run + ["metadata", "startedOn"]), " to ",
                         rel.fig(path, run + ["metadata", "finishedOn"]), "."])]
        subjects = Table(["subject", "digest"], [[[rel.fig(path, f"/subject/{i}/name")],
                                                  [rel.fig(path, f"/subject/{i}/digest/sha256")]]
                                                 for i, _ in enumerate(stmt["subject"])])
        params = ("predicate", "buildDefinition", "internalParameters")
        internal = stmt["predicate"]["buildDefinition"].get("internalParameters", {})
        blocks += [subjects, Table(["build parameter", "value"], leaf_rows(rel, path, params, internal))]
    return blocks


def reproducibility(rel: Release) -> list:
    blocks: list = [Heading(2, ["Reproducibility"])]
    builds = [(n, e) for n, e in enumerate(rel.manifest.get("receipts", []))
              if statement_kind(rel.doc(e["path"])) == "build"]
    varied_keys: list[tuple] = []
    for _, e in builds:
        varied = rel.doc(e["path"])["predicate"]["buildDefinition"].get("internalParameters", {}).get("varied", {})
        varied_keys += [t for t, _ in flatten(varied) if t not in varied_keys]
    if builds and varied_keys:
        blocks.append(Para(["Variations recorded in the build receipts, one column per build:"]))
        table = Table(["variation"] + ["build"] * len(builds))
        table.rows.append([[Code("label")]] + [[rel.fig(MANIFEST, f"/receipts/{n}/label")] for n, _ in builds])
        base = ["predicate", "buildDefinition", "internalParameters", "varied"]
        for tokens in varied_keys:
            row = [[Code(key_text(tokens))]]
            for _, e in builds:
                try:
                    row.append([rel.fig(e["path"], base + list(tokens))])
                except RecordError:  # this build did not record that setting
                    row.append(["not recorded"])
            table.rows.append(row)
        blocks.append(table)
    found = False
    for entry, stmt in rel.receipts():
        if statement_kind(stmt) != "reproducibility":
            continue
        found = True
        path, p = entry["path"], stmt["predicate"]
        blocks.append(Para(["Verdict ", rel.fig(path, "/predicate/verdict"), ": builds ",
                            *joined([rel.fig(path, f"/predicate/builds/{i}") for i, _ in enumerate(p["builds"])]),
                            " compared; differences ", rel.fig(path, "/predicate/difference_count"), ", unexplained ",
                            rel.fig(path, "/predicate/unexplained"), "."]))
        files = Table(["file", "identical", "digest in the first build", "digest in the second build"])
        explained = []
        for i, f in enumerate(p["files"]):
            files.rows.append([[rel.fig(path, f"/predicate/files/{i}/{k}")]
                               for k in ("name", "identical", "a_sha256", "b_sha256")])
            for j, _ in enumerate(f["differences"]):
                d = f"/predicate/files/{i}/differences/{j}"
                explained.append(inline(rel.fig(path, f"/predicate/files/{i}/name"), " member ",
                                        rel.fig(path, f"{d}/member"), ": ", rel.fig(path, f"{d}/kind"), ", ",
                                        rel.fig(path, f"{d}/detail")))
        blocks.append(files)
        if explained:
            blocks += [Para(["Differences and their explanations:"]), Bullets(explained)]
        if p.get("waived"):
            blocks.append(Para(["Waived by ", *joined([rel.fig(path, f"/predicate/waived/{i}")
                                                       for i, _ in enumerate(p["waived"])]), "."]))
    if not found:
        blocks.append(Para(["No reproducibility receipt is recorded."]))
    return blocks


def _steps(rel: Release, path: str, key: str, steps: list) -> list:
    """A table of phases (or routes) and one of the facts each recorded."""
    table = Table([key.rstrip("s"), "status", "started", "ended"])
    facts = Table([key.rstrip("s"), "fact", "value"])
    for i, step in enumerate(steps):
        table.rows.append([[rel.fig(path, f"/predicate/{key}/{i}/{k}")] for k in ("name", "status", "started_at", "ended_at")])
        for tokens, _ in flatten(step.get("facts", {})):
            facts.rows.append([[rel.fig(path, f"/predicate/{key}/{i}/name")], [Code(key_text(tokens))],
                               [rel.fig(path, ["predicate", key, i, "facts", *tokens])]])
    return [table] + ([facts] if facts.rows else [])


def _window(rel: Release, path: str, window: dict) -> list:
    return [Table(["window", "value"], leaf_rows(rel, path, ("predicate", "window"), window))] if window else []


def lane_evidence(rel: Release) -> list:
    """Lanes qualified by evidence bound by wheel digest, and those hardware-pending (disclosed)."""
    entries = rel.manifest.get("lane_evidence", [])
    if not entries:
        return []
    table = Table(["lane", "status", "optional", "wheel sha256 the evidence qualifies", "candidate it ran for"])
    blocks: list = [Heading(3, ["Lane evidence"]),
                    Para(["These lanes ran elsewhere, signed with their hosts' own keys (", Code("keys/signers.json"),
                          "); their evidence is bound by the wheel's sha256, so it holds for every candidate whose "
                          "reproducible build gives the same bytes."]), table]
    for i, _ in enumerate(entries):
        base = f"/lane_evidence/{i}"
        table.rows.append([[rel.fig(MANIFEST, f"{base}/{k}")] for k in ("lane", "status", "optional", "wheel_sha256")]
                          + [[rel.fig(MANIFEST, f"{base}/candidate/commit")]])
    for i, e in enumerate(entries):
        if e["status"] == "hardware-pending":
            base = f"/lane_evidence/{i}"
            blocks.append(Para(["Lane ", rel.fig(MANIFEST, f"{base}/lane"), " is hardware-pending: its evidence "
                                "qualifies wheel sha256 ", rel.fig(MANIFEST, f"{base}/wheel_sha256"),
                                ", not the wheel this release ships, so this release is not qualified on it",
                                *((" (optional lane: released without it)",) if e["optional"] else ()), "."]))
    return blocks


def lanes(rel: Release) -> list:
    blocks: list = [Heading(2, ["Lanes"])] + lane_evidence(rel)
    found = False
    for entry, stmt in rel.receipts():
        kind, path = statement_kind(stmt), entry["path"]
        p = stmt["predicate"]
        if kind == "lane":
            found = True
            blocks += [Heading(3, ["Lane ", rel.fig(path, "/predicate/lane")]),
                       Para(["Host ", rel.fig(path, "/predicate/host"), ", artifact ", rel.fig(path, "/predicate/artifact/name"),
                             " (digest ", rel.fig(path, "/predicate/artifact/sha256"), "), verdict ",
                             rel.fig(path, "/predicate/verdict"), "."])]
            blocks += _steps(rel, path, "phases", p["phases"]) + charts.timeline(rel, path, p)
            blocks += _window(rel, path, p.get("window", {}))
        elif kind == "acceptance":
            found = True
            blocks += [Heading(3, ["Acceptance window ", rel.fig(path, "/predicate/label")]),
                       Para(["Host ", rel.fig(path, "/predicate/host"), ", verdict ", rel.fig(path, "/predicate/verdict"),
                             "; assets installed: ",
                             *joined([rel.fig(path, f"/predicate/assets/{i}/name") for i, _ in enumerate(p["assets"])]),
                             "."])]
            blocks += _steps(rel, path, "routes", p["routes"]) + charts.timeline(rel, path, p)
            blocks += _window(rel, path, p.get("window", {}))
    if not found:
        blocks.append(Para(["No lane or acceptance receipt is recorded."]))
    return blocks
