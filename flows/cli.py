"""`assay`: the command line over the library. verify and release show come from releases/,
hosts from hosts/; approve and runs speak to the Prefect API.

Exit codes follow the one table in docs/INTERFACES.md (releases/exit_codes.py): a typed error that
escapes a command is printed as one plain line and becomes its code; nothing a user typed or a
file held is ever read as rich markup."""

from __future__ import annotations

import json
from typing import Any, Optional

from flows.local_api import use_local_server_if_unset

use_local_server_if_unset()

import typer  # noqa: E402  (after the Prefect settings are in place)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from rich.text import Text  # noqa: E402

from flows.approval import ApprovalNotPossible, send_approval  # noqa: E402
from flows.config import ConfigError  # noqa: E402
from hosts.errors import HostError, InventoryError  # noqa: E402
from releases.errors import KeyFileError, RecordError, StoreError, VerificationFailed  # noqa: E402
from releases.exit_codes import BAD_INPUT, FAILED, UNAVAILABLE, USAGE  # noqa: E402

# Nothing printed here is markup: a value that came from input must print as written.
console = Console(markup=False, emoji=False)
err = Console(stderr=True, soft_wrap=True, markup=False, emoji=False)  # messages hold paths: never wrapped

# First match wins: InventoryError is a HostError, and bad input, not an unreachable host.
EXIT_CODES: list[tuple[type[BaseException], int]] = [
    (ConfigError, BAD_INPUT), (InventoryError, BAD_INPUT), (RecordError, BAD_INPUT), (KeyFileError, BAD_INPUT),
    (VerificationFailed, FAILED), (HostError, UNAVAILABLE), (StoreError, UNAVAILABLE),
]


def exit_code_for(exc: BaseException) -> int | None:
    for kind, code in EXIT_CODES:
        if isinstance(exc, kind):
            return code
    return None


class AssayApp(typer.Typer):
    """The `assay` app: a typed error escaping any command (mounted ones included) ends the process
    with its exit code and one plain line on stderr, not a traceback."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except Exception as exc:
            code = exit_code_for(exc)
            if code is None:
                raise  # a bug: the traceback is what a maintainer needs
            err.print(Text(f"assay: {exc}", style="red"))
            raise SystemExit(code) from None


app = AssayApp(help="Assay: build, reproduce, qualify and publish an inference engine.", no_args_is_help=True)
release_app = typer.Typer(help="Inspect release directories.", no_args_is_help=True)


def _mount() -> None:
    from hosts.cli import app as hosts_app
    from releases import cli as releases_cli

    app.command("verify", help=releases_cli.verify.__doc__)(releases_cli.verify)
    release_app.command("show", help=releases_cli.show.__doc__)(releases_cli.show)
    app.add_typer(release_app, name="release")
    app.add_typer(hosts_app, name="hosts", help="Inventory hosts: check them, trust their keys.")


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
        err.print(Text(f"approve: {exc}", style="red"))
        raise typer.Exit(USAGE)
    console.print(Text(f"{decision} sent for flow run {flow_run_id} as {as_}"))


def _state_type(value: Optional[str]) -> Optional[str]:
    """--state: one of Prefect's state types, any case; anything else is a usage error (exit 2)."""
    if value is None:
        return None
    from prefect.client.schemas.objects import StateType

    valid = [s.value for s in StateType]
    if value.upper() not in valid:
        raise typer.BadParameter(f"{value!r} is not one of the valid states: {', '.join(valid)}")
    return value.upper()


@app.command()
def runs(
    limit: int = typer.Option(20, min=1, max=200, help="how many recent runs (1-200)"),
    state: Optional[str] = typer.Option(None, callback=_state_type,
                                        help="only runs in this state (e.g. PAUSED, COMPLETED, FAILED)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Recent flow runs and their states."""
    import httpx
    from prefect.exceptions import PrefectHTTPStatusError
    from prefect.settings import PREFECT_API_URL

    from flows.runs import recent_runs

    where = PREFECT_API_URL.value() or "(not set)"
    try:
        rows = recent_runs(limit=limit, state=state)
    except httpx.TransportError as exc:  # refused, timed out, name not resolved
        err.print(Text(f"runs: cannot reach the Prefect API at {where}: {exc}", style="red"))
        raise typer.Exit(UNAVAILABLE)
    except PrefectHTTPStatusError as exc:  # it answered, with an error: say so, not "cannot reach"
        err.print(Text(f"runs: the Prefect API at {where} answered {exc}", style="red"))
        raise typer.Exit(UNAVAILABLE)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table("flow", "deployment", "name", "state", "started")
    table.add_column("flow run id", no_wrap=True, min_width=36)
    for row in rows:  # names come from whoever created the runs: cells are Text, never markup
        table.add_row(*(Text(v) for v in (row["flow"], row["deployment"] or "", row["name"], row["state"],
                                          (row["started"] or "")[:19], row["id"])))
    console.print(table)


_mount()
