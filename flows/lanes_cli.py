"""`assay lanes import DIR`: check lane evidence produced elsewhere (a GPU host with no Prefect) and
keep it where the release run binds it. Mounted on the `assay` app (flows/cli.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.text import Text

from flows import lane_evidence
from flows.config import load_config
from releases import exit_codes
from releases.canonical import file_sha256
from releases.errors import RecordError

app = typer.Typer(help="Lanes qualified elsewhere: import and check their evidence.", no_args_is_help=True)
console = Console(markup=False, emoji=False)
err = Console(stderr=True, soft_wrap=True, markup=False, emoji=False)
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def _lane_name(directory: Path, lane: str | None) -> str:
    """--lane, or the one lane whose receipt DIR holds."""
    if lane:
        return lane
    found = sorted(p.name[: -len(".dsse.json")] for p in (directory / "receipts" / "lane").glob("*.dsse.json"))
    if len(found) != 1:
        raise RecordError(f"give --lane: the evidence holds lane receipts of {found or 'no lane'}",
                          where=f"{directory.name}/receipts/lane")
    return found[0]


@app.command("import")
def import_(
    directory: Path = typer.Argument(..., help="the evidence: the folder holding receipts/ (python -m gates.qualify --out)"),
    lane: Optional[str] = typer.Option(None, "--lane", help="the lane (default: the one lane receipt in DIR)"),
    config: Optional[Path] = typer.Option(None, "--config", help="assay.toml (default: the embedded defaults)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="check only; store nothing"),
    wheel: Optional[Path] = typer.Option(None, "--wheel", help="the wheel the evidence must qualify"),
    wheel_sha256: Optional[str] = typer.Option(None, "--wheel-sha256", help="its sha256, instead of --wheel"),
    ref: str = typer.Option("HEAD", "--ref", help="without --wheel/--wheel-sha256: build this ref's candidate "
                                                  "wheel once to learn its digest"),
) -> None:
    """Check lane evidence (every signature under the lane's pinned key, the wheel digest, the lane
    kind's whole chain and the judged verdicts, all passed, on the GPU the lane names) and store it
    where the release run binds it, <state>/evidence/<lane>/<wheel sha256>/. Refused evidence exits
    1 with every reason."""
    if wheel is not None and wheel_sha256 is not None:
        err.print(Text("lanes import: give --wheel or --wheel-sha256, not both", style="red"))
        raise typer.Exit(exit_codes.USAGE)
    if wheel_sha256 is not None and not _HEX64.match(wheel_sha256):
        err.print(Text(f"lanes import: --wheel-sha256 {wheel_sha256!r} is not 64 lower-case hex digits", style="red"))
        raise typer.Exit(exit_codes.USAGE)
    if not directory.is_dir():
        err.print(Text(f"lanes import: {directory}: not a directory", style="red"))
        raise typer.Exit(exit_codes.BAD_INPUT)
    cfg = load_config(config)
    spec = lane_evidence.evidence_lane(cfg, _lane_name(directory, lane))
    if wheel is not None:
        if not wheel.is_file():
            err.print(Text(f"lanes import: --wheel {wheel}: no such file", style="red"))
            raise typer.Exit(exit_codes.BAD_INPUT)
        digest, what = file_sha256(wheel), wheel.name
    elif wheel_sha256 is not None:
        digest, what = wheel_sha256, "--wheel-sha256"
    else:
        err.print(Text(f"building the candidate wheel of {ref} once to learn its digest ...", style="dim"))
        what, digest = lane_evidence.candidate_wheel_sha256(cfg, ref)
    try:
        evidence, stored = lane_evidence.import_dir(cfg, spec, directory, digest, dry_run=dry_run)
    except lane_evidence.EvidenceRefused as exc:
        err.print(Text(f"lanes import: {exc}", style="red"))
        raise typer.Exit(exit_codes.FAILED)
    console.print(Text(
        f"lane {evidence.lane} ({evidence.kind}): evidence verified under key {evidence.key_id}\n"
        f"  wheel {evidence.wheel['name']} sha256 {evidence.wheel['sha256']} = {what}\n"
        f"  ran for candidate {evidence.candidate['id']} (commit {evidence.candidate['commit']})\n"
        f"  receipts: {len(evidence.receipts)} ("
        + ", ".join(sorted({k for k, _, _, _ in evidence.receipts})) + ")\n"
        + (f"  stored in {stored}" if stored else "  dry run: nothing stored")), soft_wrap=True)
