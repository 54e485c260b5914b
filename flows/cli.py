"""`assay`: the command line over the library. verify and release show come from releases/,
hosts from hosts/; approve and runs speak to the Prefect API."""

from __future__ import annotations

import json
from typing import Optional

from flows.local_api import use_local_server_if_unset

use_local_server_if_unset()

import typer  # noqa: E402  (after the Prefect settings are in place)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from flows.approval import ApprovalNotPossible, send_approval  # noqa: E402

app = typer.Typer(help="Assay: build, reproduce, qualify and publish an inference engine.", no_args_is_help=True)
release_app = typer.Typer(help="Inspect release directories.", no_args_is_help=True)
console = Console()
err = Console(stderr=True)


def _mount() -> None:
    from hosts.cli import app as hosts_app
    from releases import cli as releases_cli
    from releases.notes.cli import notes
    from releases.review_cli import app as review_app

    app.command("verify", help=releases_cli.verify.__doc__)(releases_cli.verify)
    release_app.command("show", help=releases_cli.show.__doc__)(releases_cli.show)
    app.add_typer(release_app, name="release")
    app.add_typer(hosts_app, name="hosts", help="Inventory hosts: check them, trust their keys.")
    app.add_typer(review_app, name="review", help="Create and update a candidate's review ledger.")
    app.command("notes", help=notes.__doc__)(notes)


@app.command()
def approve(
    flow_run_id: str = typer.Argument(..., help="the paused release-candidate run"),
    as_: str = typer.Option(..., "--as", help="approver name; must be listed in assay.toml"),
    reason: str = typer.Option(..., "--reason", help="why, for the release record"),
    reject: bool = typer.Option(False, "--reject", help="reject instead of approve: the run ends Failed"),
    waiver: list[str] = typer.Option([], "--waiver", help="acknowledge a waiver bound to the candidate (repeat)"),
) -> None:
    """Approve (or reject) a paused release-candidate run, exactly as the UI form does."""
    decision = "reject" if reject else "approve"
    try:
        send_approval(flow_run_id, {"decision": decision, "approver": as_, "reason": reason,
                                    "acknowledged_waivers": list(waiver)})
    except ApprovalNotPossible as exc:
        err.print(f"[red]approve: {exc}[/red]")
        raise typer.Exit(2)
    console.print(f"{decision} sent for flow run {flow_run_id} as {as_}")


@app.command()
def runs(
    limit: int = typer.Option(20, help="how many recent runs"),
    state: Optional[str] = typer.Option(None, help="only runs in this state (e.g. PAUSED)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Recent flow runs and their states."""
    from flows.runs import recent_runs

    try:
        rows = recent_runs(limit=limit, state=state)
    except Exception as exc:  # connection refused and API errors alike: say where we looked
        from prefect.settings import PREFECT_API_URL

        err.print(f"[red]runs: cannot reach the Prefect API at {PREFECT_API_URL.value() or '(not set)'}: {exc}[/red]")
        raise typer.Exit(2)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table("flow", "deployment", "name", "state", "started")
    table.add_column("flow run id", no_wrap=True, min_width=36)
    for row in rows:
        table.add_row(row["flow"], row["deployment"] or "", row["name"], row["state"], (row["started"] or "")[:19],
                      row["id"])
    console.print(table)


_mount()
