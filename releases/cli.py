"""`assay verify` and `assay show`: a thin CLI over releases.verify (mounted by the lead)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from releases.canonical import load_json_bytes
from releases.errors import ReleaseError
from releases.keys import load_public_key
from releases.manifest import load_manifest
from releases.receipts import open_receipt
from releases.verify import verify_release

app = typer.Typer(help="Verify and inspect Assay release directories.", no_args_is_help=True, add_completion=False)


@app.command()
def verify(
    path: Path = typer.Argument(..., help="release directory"),
    require_ready: bool = typer.Option(False, "--require-ready", help="also require a ready or published release"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
    key: Optional[Path] = typer.Option(None, "--key", help="public key PEM (default: keys/release.pub.pem inside)"),
    private_marker: List[str] = typer.Option([], "--private-marker", help="extra private string (repeatable)"),
) -> None:
    """Verify a release directory offline; exit 0 only when every check passes."""
    console = Console()
    with console.status("verifying", spinner="dots") if not as_json else _null():
        report = verify_release(path, public_key=key, require_ready=require_ready, private_markers=private_marker)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    elif report.ok:
        console.print(f"[green]OK[/green] {path} state={report.state} "
                      + " ".join(f"{k}={v}" for k, v in sorted(report.counts.items())))
    else:
        table = Table(title=f"{len(report.failures)} failures in {path}")
        for column in ("file", "field", "problem"):
            table.add_column(column, overflow="fold")
        for f in report.failures:
            table.add_row(f.file, f.field, f.message)
        console.print(table)
        console.print(f"[red]FAILED[/red] {path} state={report.state}")
    raise typer.Exit(0 if report.ok else 1)


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@app.command()
def show(path: Path = typer.Argument(..., help="release directory"),
         key: Optional[Path] = typer.Option(None, "--key", help="public key PEM")) -> None:
    """Print state, version, candidate, artifacts, receipts and their verdicts (no verification)."""
    console = Console()
    try:
        manifest = load_manifest((path / "manifest.json").read_bytes())
        public = load_public_key(key or path / manifest.get("public_key", {}).get("path", "keys/release.pub.pem"))
    except (OSError, ReleaseError) as exc:
        console.print(f"[red]cannot read release[/red] {path}: {exc}")
        raise typer.Exit(2)
    cand = manifest["candidate"]
    console.print(f"version {manifest['version']}  state [bold]{manifest['state']}[/bold]")
    console.print(f"candidate {cand['id']}")
    console.print(f"  commit {cand['commit']}  tree {cand['tree']}")
    arts = Table(title="artifacts")
    for column in ("kind", "path", "size", "sha256"):
        arts.add_column(column)
    for a in manifest.get("artifacts", []):
        arts.add_row(a["kind"], a["path"], str(a["size"]), a["sha256"])
    console.print(arts)
    receipts = Table(title="receipts")
    for column in ("kind", "label", "verdict", "path"):
        receipts.add_column(column)
    entries = list(manifest.get("receipts", []))
    if "approval" in manifest:
        entries.append({"kind": "approval", "label": None, "path": manifest["approval"]["path"]})
    for r in entries:
        receipts.add_row(r["kind"], r["label"] or "", _verdict(path, r, public), r["path"])
    console.print(receipts)


def _verdict(root: Path, entry: dict, public) -> str:
    try:
        _, pred = open_receipt(load_json_bytes((root / entry["path"]).read_bytes()), public, entry["kind"])
    except (OSError, ReleaseError) as exc:
        return f"unreadable: {exc}"[:80]
    return str(pred.get("verdict") or pred.get("decision") or "-")
