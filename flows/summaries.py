"""What each step shows in the Prefect UI: one Markdown or table artifact per record, rendered here
so that the steps read as calls and the rendering can be tested without a Prefect server."""

from __future__ import annotations

from typing import Iterable


def cell(value: object) -> str:
    """A table cell: pipes and newlines would break the Markdown row."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def candidate_md(record: dict, ref: dict) -> str:
    rows = [("commit", f"`{record['commit']}`"), (f"tree ({record['source']['subdir']})", f"`{record['tree']}`"),
            ("source date", record["source_date_epoch"]), ("dirty", record["dirty"]), ("id", f"`{ref['id']}`")]
    return (f"### Candidate {record['release_version']}\n\n| field | value |\n|---|---|\n"
            + "".join(f"| {k} | {cell(v)} |\n" for k, v in rows))


def builds_table(builds) -> list[dict]:
    return [{"build": b.label, "artifact": s["name"], "sha256": s["digest"]["sha256"]} for b in builds for s in b.subjects]


def reproducibility_md(record: dict) -> str:
    lines = [f"### Reproducibility: {record['verdict']}\n", "| file | identical | differences |", "|---|---|---|"]
    for f in record["files"]:
        diffs = "; ".join(f"{d['member'] or '(file)'}: {d['kind']} ({d['detail']})" for d in f["differences"][:20])
        lines.append(f"| {cell(f['name'])} | {f['identical']} | {cell(diffs) or '-'} |")
    lines += ["", "| variation | build a | build b | varied |", "|---|---|---|---|"]
    for name, v in record.get("variations", {}).items():
        varied = "yes" if v["varied"] else f"no: {v.get('not_varied', '')}"
        lines.append(f"| {name} | {cell(v['a'])} | {cell(v['b'])} | {cell(varied)} |")
    causes = record.get("bisection", {}).get("differences", [])
    if causes:
        lines += ["", "| artifact | member | kind | cause |", "|---|---|---|---|"]
        lines += [f"| {cell(d['artifact'])} | {cell(d['member'] or '(file)')} | {d['kind']} | {cell(d['cause'])} |"
                  for d in causes]
    return "\n".join(lines)


def assets_table(entries: Iterable[dict]) -> list[dict]:
    return [{"path": e["path"], "sha256": e["sha256"]} for e in entries]


def lane_table(record: dict) -> list[dict]:
    return [{"phase": p["name"], "status": p["status"], "seconds": p["facts"].get("seconds"),
             "reason": p["facts"].get("reason", "")} for p in record["phases"]]


def lane_failure(record: dict) -> str:
    """One sentence naming every phase that did not pass and why."""
    bad = [f"{p['name']}: {p['facts'].get('reason', p['status'])}" for p in record["phases"]
           if p["status"] not in ("pass", "skipped")]
    return f"lane {record['lane']} verdict {record['verdict']}: " + "; ".join(bad)


def lanes_md(lanes: list[dict]) -> str:
    """Each lane's verdict and its phases: status, seconds and why a phase did not pass."""
    lines = []
    for lane in lanes:
        lines += ["", f"### Lane {lane['lane']} ({lane.get('kind', '')}): {lane['verdict']}", "",
                  "| phase | status | seconds | note |", "|---|---|---|---|"]
        lines += [f"| {p['name']} | {p['status']} | {p['facts'].get('seconds', '')} | {cell(p['facts'].get('reason', ''))} |"
                  for p in lane["phases"]]
    return "\n".join(lines)


def verdicts_table(verdicts: dict[str, dict]) -> list[dict]:
    return [{"gate": kind, "verdict": v["verdict"], "blocking": v["judged"]["blocking"],
             "findings": "; ".join(f"{f['case']}: {f['measured']}" for f in v["judged"]["findings"][:10])}
            for kind, v in verdicts.items()]


def gate_failure(lane: str, blocking: list[dict]) -> str:
    """Names each blocking gate, its cases and measured values, and what the judge said."""
    parts = []
    for v in blocking:
        ordered = sorted(v["judged"]["findings"], key=lambda f: f["case"] != "weighted")  # the gate's own figure first
        findings = ", ".join(f"case {f['case']} measured {f['measured']}" for f in ordered[:6])
        reasons = "; ".join(v.get("reasons", [])[:3])
        parts.append(f"{v['kind']} is {v['verdict']} ({findings or 'no finding'}{': ' + reasons if reasons else ''})")
    return f"lane {lane}: " + "; ".join(parts) + ". A waiver must name exactly the gate, lane, case and measured value."


def lane_evidence_md(entries: list[dict]) -> str:
    """Lanes bound by evidence (wheel digest) and those hardware-pending, disclosed."""
    if not entries:
        return ""
    lines = ["| lane (evidence) | status | optional | evidence's wheel sha256 | ran for commit |", "|---|---|---|---|---|"]
    lines += [f"| {cell(e['lane'])} | **{e['status']}** | {'yes' if e['optional'] else 'no'} | `{e['wheel_sha256'][:16]}` | "
              f"`{e['candidate']['commit'][:12]}` |" for e in entries]
    lines += [f"\n**Lane {cell(e['lane'])} is hardware-pending**: {cell(e.get('reason', ''))}"
              + (" It is optional: the release goes ahead without it." if e["optional"] else "")
              for e in entries if e["status"] == "hardware-pending"]
    return "\n".join(lines)


def manifest_md(manifest: dict, ledger_md: str = "", lanes: list[dict] = ()) -> str:
    """The approval summary: identity, each lane's phases, every receipt with its kind and label,
    assets, waivers and the review ledger's state."""
    cand = manifest["candidate"]
    lines = [f"## Release {manifest['version']} — {manifest['state']}", "",
             f"Candidate `{cand['commit']}` (tree `{cand['tree'][:12]}`, id `{cand['id'][:16]}`)", "",
             lanes_md(list(lanes)), "", lane_evidence_md(manifest.get("lane_evidence", [])), "",
             "| receipt | label | sha256 |", "|---|---|---|"]
    lines += [f"| {r['kind']} | {cell(r['label'] or '')} | `{r['sha256'][:16]}` |" for r in manifest.get("receipts", [])]
    lines += ["", "| asset | sha256 |", "|---|---|"]
    lines += [f"| {a['path']} | `{a['sha256'][:16]}` |" for a in manifest.get("artifacts", []) + manifest.get("sboms", [])]
    waivers = manifest.get("waivers", [])
    lines += ["", f"Waivers bound: {', '.join(w['id'] for w in waivers) if waivers else 'none'}"]
    if ledger_md:
        lines += ["", ledger_md]
    return "\n".join(lines)


def verify_md(report) -> str:
    return (f"### verify: {'OK' if report.ok else 'FAILED'}\n\n"
            + "\n".join(f"- `{f.file}` {f.field}: {cell(f.message)}" for f in report.failures))


def verify_failure(report) -> str:
    return "; ".join(f"{f.file} {f.field}: {f.message}" for f in report.failures[:10])


def approval_md(record: dict) -> str:
    return (f"### {record['decision']} by {record['approver']}\n\n{record['reason']}\n\n"
            f"binds manifest `{record['manifest_sha256'][:16]}`")


def drift_md(version: str, report: dict) -> str:
    lines = [f"### Nightly reproducibility of {version}: {'DRIFT' if report['drift'] else 'no drift'}", "",
             "| file | status | detail |", "|---|---|---|"]
    for f in report["files"]:
        lines.append(f"| {cell(f['name'])} | {f['status']} | {cell(f['detail'])} |")
        lines += [f"| ↳ {cell(d['member'] or '(file)')} | {d['kind']} | {cell(d['detail'])} |" for d in f["differences"][:20]]
    return "\n".join(lines)
