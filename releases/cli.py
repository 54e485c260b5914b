"""`assay verify` and `assay release show` (also `assay-verify`): a thin CLI over releases.verify.

Everything read from a release or a file name is data: printed literally (no rich markup, control
characters escaped), never interpreted. Exit codes: releases.exit_codes."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from releases import exit_codes
from releases.canonical import load_json_bytes
from releases.errors import KeyFileError, ReleaseError, TrustFileError
from releases.keys import key_id, load_public_key
from releases.manifest import load_manifest
from releases.receipts import open_receipt
from releases.trust_file import default_trust_file, load_trust_file
from releases.verify import verify_release
from releases.verify.trust import EMBEDDED

app = typer.Typer(help="Verify and inspect Assay release directories.", no_args_is_help=True, add_completion=False)

_MAX_RECORD = 64 << 20  # show reads records, never artifacts; nothing larger is a record


def _console(stderr: bool = False) -> Console:
    # markup/emoji off: a file named "[red]x" or ":smile:" is printed as it is named.
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False, soft_wrap=True)


def literal(value: object) -> str:
    """`value` as text with control characters escaped, so a name cannot move the cursor or recolour."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _bad_input(console: Console, what: str, message: str) -> typer.Exit:
    console.print(Text("error: ", style="red") + Text(literal(f"{what}: {message}")))
    return typer.Exit(exit_codes.BAD_INPUT)


def _trust_root(key: Optional[Path], expect_key_id: List[str], trust: Optional[Path]):
    """(public_key, expected ids, source label) from the options, the trust file, or nothing."""
    if key is not None:
        return load_public_key(key), [e.lower() for e in expect_key_id] or None, f"--key {key}"
    if expect_key_id:
        return None, [e.lower() for e in expect_key_id], "--expect-key-id"
    path = trust if trust is not None else default_trust_file()
    if trust is not None or path.is_file():
        return None, [k.key_id for k in load_trust_file(path)], f"trust file {path}"
    return None, None, "the release itself"


@app.command()
def verify(
    path: Path = typer.Argument(..., help="release directory (named for its version, as in a store)"),
    require_ready: bool = typer.Option(False, "--require-ready", help="also require a ready or published release"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
    key: Optional[Path] = typer.Option(None, "--key", help="trust this public key PEM"),
    expect_key_id: List[str] = typer.Option([], "--expect-key-id",
                                            help="trust the release's key only if it has this id (repeatable)"),
    trust: Optional[Path] = typer.Option(None, "--trust",
                                         help="trust file (default: $XDG_CONFIG_HOME/assay/trust.toml when present)"),
    trust_embedded_key: bool = typer.Option(False, "--trust-embedded-key",
                                            help="let --require-ready accept the key inside the release"),
    require_signed_approval: bool = typer.Option(False, "--require-signed-approval",
                                                 help="refuse an approval its approver did not sign"),
    expect_commit: Optional[str] = typer.Option(None, "--expect-commit",
                                                help="the commit the release must be built from"),
    expect_version: Optional[str] = typer.Option(None, "--expect-version", help="the version the release must carry"),
    private_marker: List[str] = typer.Option([], "--private-marker", help="extra private string (repeatable)"),
) -> None:
    """Verify a release directory offline; exit 0 only when every check passes."""
    console, err = _console(), _console(stderr=True)
    if not path.is_dir():
        raise _bad_input(err, literal(path), "not a directory")
    try:
        public_key, expected, source = _trust_root(key, expect_key_id, trust)
    except (KeyFileError, TrustFileError) as exc:
        raise _bad_input(err, "trust root", str(exc))
    report = verify_release(path, public_key=public_key, expected_key_id=expected, trust_source=source,
                            require_pinned_key=require_ready and not trust_embedded_key, require_ready=require_ready,
                            require_signed_approval=require_signed_approval, expected_commit=expect_commit,
                            expected_version=expect_version, check_folder_name=True, private_markers=private_marker)
    for warning in report.warnings:
        err.print(Text("warning: ", style="yellow") + Text(literal(warning)))
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
        raise typer.Exit(exit_codes.OK if report.ok else exit_codes.FAILED)
    if report.key_id:
        how = "NOT PINNED: " if report.trust == EMBEDDED else ""
        console.print(Text(literal(f"trusted key {report.key_id} ({how}{source})")))
    if report.ok:
        counts = " ".join(f"{k}={v}" for k, v in sorted(report.counts.items()))
        summary = f" {path} version={report.version} state={report.state} {counts}"
        console.print(Text("OK", style="green") + Text(literal(summary)))
        raise typer.Exit(exit_codes.OK)
    table = Table(title=Text(literal(f"{len(report.failures)} failures in {path}")))
    for column in ("file", "field", "problem"):
        table.add_column(column, overflow="fold")
    for f in report.failures:
        table.add_row(Text(literal(f.file)), Text(literal(f.field)), Text(literal(f.message)))
    console.print(table)
    console.print(Text("FAILED", style="red") + Text(literal(f" {path} state={report.state}")))
    raise typer.Exit(exit_codes.FAILED)


def _read_record(path: Path) -> bytes:
    if path.stat().st_size > _MAX_RECORD:
        raise OSError(f"{path.name} is larger than {_MAX_RECORD} bytes; not a record")
    return path.read_bytes()


@app.command()
def show(path: Path = typer.Argument(..., help="release directory"),
         key: Optional[Path] = typer.Option(None, "--key", help="public key PEM")) -> None:
    """Print state, version, candidate, artifacts, receipts and their verdicts (no verification)."""
    console, err = _console(), _console(stderr=True)
    try:
        manifest = load_manifest(_read_record(path / "manifest.json"))
        public = load_public_key(key or path / manifest.get("public_key", {}).get("path", "keys/release.pub.pem"))
    except (OSError, ReleaseError) as exc:
        raise _bad_input(err, f"cannot read release {literal(path)}", str(exc))
    cand = manifest["candidate"]
    console.print(Text(literal(f"version {manifest['version']}  state ")) + Text(manifest["state"], style="bold"))
    console.print(Text(literal(f"candidate {cand['id']}\n  commit {cand['commit']}  tree {cand['tree']}")))
    console.print(Text(f"signed by key {key_id(public)} (not verified: run assay verify)"))
    arts = Table(title="artifacts")
    for column in ("kind", "path", "size", "sha256"):
        arts.add_column(column)
    for a in manifest.get("artifacts", []):
        arts.add_row(*(Text(literal(v)) for v in (a["kind"], a["path"], a["size"], a["sha256"])))
    console.print(arts)
    receipts = Table(title="receipts")
    for column in ("kind", "label", "verdict", "path"):
        receipts.add_column(column)
    entries = list(manifest.get("receipts", []))
    if "approval" in manifest:
        entries.append({"kind": "approval", "label": None, "path": manifest["approval"]["path"]})
    for r in entries:
        cells = (r["kind"], r["label"] or "", _verdict(path, r, public), r["path"])
        receipts.add_row(*(Text(literal(v)) for v in cells))
    console.print(receipts)
    if "approval" in manifest:
        console.print(Text(literal(_approval_line(path, manifest["approval"], public))))


def _approval_line(root: Path, entry: dict, public) -> str:
    try:
        _, pred = open_receipt(load_json_bytes(_read_record(root / entry["path"])), public, "approval")
    except (OSError, ReleaseError) as exc:
        return f"approval: unreadable: {exc}"[:200]
    signed = f"signed with key {pred['key_id']}" if pred.get("signed") else "UNSIGNED"
    return f"approval: {pred['decision']} by {pred['approver']}, {signed}"


def _verdict(root: Path, entry: dict, public) -> str:
    try:
        _, pred = open_receipt(load_json_bytes(_read_record(root / entry["path"])), public, entry["kind"])
    except (OSError, ReleaseError) as exc:
        return f"unreadable: {exc}"[:80]
    return str(pred.get("verdict") or pred.get("decision") or "-")


def main() -> None:
    """Console script `assay-verify`."""
    app()
