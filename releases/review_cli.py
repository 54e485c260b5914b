"""`assay review`: reviewers create and update a review ledger file (mounted by the lead).

The ledger file is the JSON record (canonical, what the release binds); a reviewers' TOML file
is read with `import` (or by `check`/`show` with --candidate). Exit codes: releases.exit_codes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional

import typer

from releases import exit_codes
from releases.atomic import write_atomic
from releases.candidate import candidate_ref
from releases.canonical import canonical_json, load_json_bytes
from releases.errors import ReleaseError
from releases.ledger import (DISPOSITIONS, PRIORITIES, check_ledger, closure_problems, ledger_summary,
                             load_review_toml, new_ledger)
from releases.ledger_edits import add_item, add_round, close, disposition, dispose
from releases.schema import validate

app = typer.Typer(help="Create and update a candidate's review ledger.", no_args_is_help=True, add_completion=False)


def _fail(code: int, message: str) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def _candidate(path: Path) -> dict:
    """The candidate ref from a candidate.json record, or from a release directory holding one."""
    path = path / "candidate.json" if path.is_dir() else path
    try:
        record = load_json_bytes(path.read_bytes(), where=str(path))
    except OSError as exc:
        raise _fail(exit_codes.BAD_INPUT, f"{path}: cannot read the candidate record: {exc.strerror or exc}")
    return candidate_ref(validate("candidate", record, str(path)))


def _read(path: Path, candidate: Optional[Path] = None, *, editing: bool = False) -> dict:
    if path.suffix == ".toml":
        if editing:
            raise _fail(exit_codes.USAGE, f"{path}: edit a TOML review file in an editor, or `import` it into a "
                                          "ledger JSON file and edit that")
        if candidate is None:
            raise _fail(exit_codes.USAGE, f"{path}: a TOML review file needs --candidate to bind it")
        return load_review_toml(path, _candidate(candidate))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _fail(exit_codes.BAD_INPUT, f"{path}: cannot read the ledger: {exc.strerror or exc}")
    return check_ledger(load_json_bytes(data, where=str(path)), str(path))


def _write(path: Path, ledger: dict) -> None:
    write_atomic(path, canonical_json(check_ledger(ledger, str(path))))


def _guard(action: Callable[[], None]) -> None:
    """Run `action`; a bad record or file ends the command with exit 3 and one line, no traceback."""
    try:
        action()
    except ReleaseError as exc:
        raise _fail(exit_codes.BAD_INPUT, f"error: {exc}")


def _seat(text: str) -> dict:
    role, _, reviewer = text.partition(":")
    return {"role": role, "reviewer": reviewer} if reviewer else {"role": role}


@app.command()
def new(
    ledger: Path = typer.Argument(..., help="ledger JSON file to create"),
    candidate: Path = typer.Option(..., "--candidate", help="candidate.json, or a release directory holding it"),
    review_id: str = typer.Option(..., "--review-id", help="label of this review"),
    base: Optional[str] = typer.Option(None, "--base", help="commit the review started from (40 hex)"),
    head: Optional[str] = typer.Option(None, "--head", help="commit reviewed (default: the candidate's)"),
    seat: List[str] = typer.Option([], "--seat", help="ROLE or ROLE:REVIEWER (repeatable)"),
) -> None:
    """Start an open ledger with its seats and no items."""
    if ledger.exists():
        raise _fail(exit_codes.USAGE, f"{ledger} exists; a new review needs a new file")
    _guard(lambda: _write(ledger, new_ledger(_candidate(candidate), review_id=review_id, base=base, head=head,
                                             seats=[_seat(s) for s in seat])))
    typer.echo(f"created {ledger}")


@app.command("add-item")
def add_item_cmd(
    ledger: Path = typer.Argument(..., help="ledger JSON file"),
    item_id: str = typer.Argument(..., help="item label"),
    title: str = typer.Option(..., "--title"),
    priority: str = typer.Option(..., "--priority", help=" | ".join(PRIORITIES)),
    out_of_scope: bool = typer.Option(False, "--out-of-scope", help="the item is outside this release's scope"),
    seat: Optional[str] = typer.Option(None, "--seat", help="the seat (role) that raised it"),
) -> None:
    """Record an open item."""
    _guard(lambda: _write(ledger, add_item(_read(ledger, editing=True), id=item_id, title=title, priority=priority,
                                           in_scope=not out_of_scope, seat=seat)))
    typer.echo(f"{ledger}: item {item_id} added (open)")


@app.command("dispose")
def dispose_cmd(
    ledger: Path = typer.Argument(..., help="ledger JSON file"),
    item_id: str = typer.Argument(..., help="item label"),
    status: str = typer.Argument(..., help=" | ".join(DISPOSITIONS)),
    commit: Optional[str] = typer.Option(None, "--commit", help="fixed: the commit that fixed it"),
    receipt_sha256: Optional[str] = typer.Option(None, "--receipt-sha256", help="fixed: digest of a receipt showing it"),
    issue: Optional[str] = typer.Option(None, "--issue", help="deferred: #N, owner/repo#N or an https URL"),
    reason: Optional[str] = typer.Option(None, "--reason", help="accepted-risk: why the risk is acceptable"),
    by: Optional[str] = typer.Option(None, "--by", help="accepted-risk: who accepts it"),
) -> None:
    """Set an item's disposition: fixed (with evidence), deferred (with an issue), accepted-risk
    (with a reason and who), or open again."""
    _guard(lambda: _write(ledger, dispose(_read(ledger, editing=True), item_id, disposition(
        status, commit=commit, receipt_sha256=receipt_sha256, issue=issue, reason=reason, by=by))))
    typer.echo(f"{ledger}: item {item_id} {status}")


@app.command("round")
def round_cmd(
    ledger: Path = typer.Argument(..., help="ledger JSON file"),
    completed: int = typer.Option(..., "--completed", help="seats that completed the round"),
    missing: int = typer.Option(0, "--missing", help="seats that did not report"),
    aborted: int = typer.Option(0, "--aborted", help="seats whose review was aborted"),
) -> None:
    """Record the next review round's counts (they add up to the number of seats)."""
    _guard(lambda: _write(ledger, add_round(_read(ledger, editing=True), completed=completed, missing=missing,
                                            aborted=aborted)))
    typer.echo(f"{ledger}: round recorded")


@app.command("close")
def close_cmd(
    ledger: Path = typer.Argument(..., help="ledger JSON file"),
    by: str = typer.Option(..., "--by", help="the accountable lead"),
    statement: str = typer.Option(..., "--statement", help="the lead's closing statement"),
    at: Optional[str] = typer.Option(None, "--at", help="RFC 3339 time (default: now, UTC)"),
) -> None:
    """The accountable lead closes the review; refused (exit 1) while an in-scope P0/P1 item is open."""
    record: dict = {}
    _guard(lambda: record.update(_read(ledger, editing=True)))
    blocking = [p for p in closure_problems(record) if "has no closure" not in p]
    if blocking:
        raise _fail(exit_codes.FAILED, f"{ledger}: cannot close:\n" + "\n".join(f"  - {p}" for p in blocking))
    _guard(lambda: _write(ledger, close(record, by=by, statement=statement, at=at)))
    typer.echo(f"{ledger}: closed by {by}")


@app.command("import")
def import_cmd(
    review_toml: Path = typer.Argument(..., help="reviewers' TOML file"),
    candidate: Path = typer.Option(..., "--candidate", help="candidate.json, or a release directory holding it"),
    out: Path = typer.Option(..., "--out", help="ledger JSON file to write"),
) -> None:
    """Validate a reviewers' TOML file and write it as the ledger record."""
    _guard(lambda: _write(out, load_review_toml(review_toml, _candidate(candidate))))
    typer.echo(f"wrote {out}")


@app.command("check")
def check_cmd(
    ledger: Path = typer.Argument(..., help="ledger JSON (or TOML with --candidate)"),
    candidate: Optional[Path] = typer.Option(None, "--candidate", help="needed to read a TOML file"),
) -> None:
    """Exit 0 when the review is closed under the closure rule, 1 (listing why) when it is not."""
    record: dict = {}
    _guard(lambda: record.update(_read(ledger, candidate)))
    problems = closure_problems(record)
    for p in problems:
        typer.echo(f"  - {p}")
    typer.echo(f"{ledger}: {'closed' if not problems else 'NOT closed'}")
    raise typer.Exit(exit_codes.FAILED if problems else exit_codes.OK)


@app.command("show")
def show_cmd(
    ledger: Path = typer.Argument(..., help="ledger JSON (or TOML with --candidate)"),
    candidate: Optional[Path] = typer.Option(None, "--candidate", help="needed to read a TOML file"),
) -> None:
    """Print the ledger summary (Markdown), as the approval summary shows it."""
    record: dict = {}
    _guard(lambda: record.update(_read(ledger, candidate)))
    typer.echo(ledger_summary(record), nl=False)
