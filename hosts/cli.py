"""`assay hosts`: check the inventory's hosts, and pin a host's key explicitly.

Mounted by flows/cli.py, which turns the typed errors raised here into the exit codes of the one
table (docs/INTERFACES.md): InventoryError 3 (bad input), HostError 4 (a host cannot be used);
usage errors are click's 2. Host names, addresses and error texts come from the inventory and the
network, so they are printed as Text, never as rich markup."""
from __future__ import annotations

import json
from pathlib import Path

import paramiko
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from hosts.errors import HostError, InventoryError
from hosts.inventory import connect, load_inventory
from hosts.known_hosts import fetch_host_key, fingerprint, pinned_keys, record_key

app = typer.Typer(help="Hosts where Assay runs commands.", no_args_is_help=True)
DEFAULT_INVENTORY = Path("hosts.toml")
InventoryOpt = typer.Option(DEFAULT_INVENTORY, "--inventory", "-i", help="host inventory (TOML)")


class HostsUnavailable(HostError):
    """`hosts check` reached some hosts but not all (or none): the report says why for each."""

    def __init__(self, failed: list[str], inventory: str) -> None:
        self.failed = failed
        super().__init__(f"{len(failed)} host(s) of {inventory} cannot be used: {', '.join(failed)}")


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def _probe(entry) -> dict:
    host = None
    try:
        host = connect(entry)
        return {"ok": True, "kind": entry.kind, "facts": host.facts().to_dict()}
    except Exception as e:  # noqa: BLE001 - reported per host: one bad address must not hide the others
        detail = str(e) if isinstance(e, HostError) else f"{type(e).__name__}: {e}"
        return {"ok": False, "kind": entry.kind, "error": detail}
    finally:
        if host is not None:
            try:
                host.close()
            except Exception:  # noqa: BLE001 - closing a host that failed to open says nothing new
                pass


@app.command()
def check(inventory: Path = InventoryOpt, as_json: bool = typer.Option(False, "--json")) -> None:
    """Connect to each host and print its facts."""
    inv = load_inventory(inventory)
    report = {name: _probe(entry) for name, entry in inv.hosts.items()}
    if as_json:
        typer.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        table = Table(title=Text(f"hosts in {inventory}"))
        for col in ("host", "kind", "status", "hostname", "os", "kernel", "cpus", "memory", "python", "gpus"):
            table.add_column(col)
        for name, r in report.items():
            if not r["ok"]:
                table.add_row(Text(name), Text(r["kind"]), Text(r["error"], style="red"), *[""] * 7)
                continue
            f = r["facts"]
            gpus = "; ".join(f"{g['name']} ({g['power_limit_w']} W)" for g in f["gpus"]) or "-"
            table.add_row(*(Text(str(v)) for v in (name, r["kind"])), Text("ok", style="green"),
                          *(Text(str(v)) for v in (f["hostname"], f["os"], f["kernel"], f["cpu_count"],
                                                   _gib(f["memory_bytes"]), f["python_version"], gpus)))
        Console(width=200).print(table)
    failed = [name for name, r in report.items() if not r["ok"]]
    if failed:
        raise HostsUnavailable(failed, str(inventory))


@app.command()
def trust(name: str, inventory: Path = InventoryOpt,
          yes: bool = typer.Option(False, "--yes", "-y", help="record without asking")) -> None:
    """Show NAME's host key fingerprint and pin it in the inventory's known_hosts."""
    inv = load_inventory(inventory)
    try:
        entry = inv.entry(name)
    except InventoryError as e:
        raise typer.BadParameter(e.message, param_hint="NAME") from None
    if entry.kind != "ssh":
        raise typer.BadParameter(f"host {name!r} is of kind {entry.kind!r}; only ssh hosts have host keys",
                                 param_hint="NAME")
    try:
        key = fetch_host_key(entry.address, entry.port, entry.connect_timeout)
    except OSError as e:  # refused or unresolvable before the SSH handshake began
        raise HostError(f"could not read the host key of {entry.address}:{entry.port}: {e}") from None
    offered = fingerprint(key)
    try:
        pinned = [fingerprint(k) for k in pinned_keys(entry.known_hosts, entry.address, entry.port).values()]
    except (OSError, ValueError, paramiko.SSHException) as e:  # ValueError covers undecodable bytes
        raise InventoryError(str(entry.known_hosts), "", f"not a readable known_hosts file: {e}") from None
    typer.echo(f"host {name} ({entry.address}:{entry.port}) offers {offered}")
    if offered in pinned:
        typer.echo("already pinned; nothing to do")
        return
    for fp in pinned:
        typer.echo(f"currently pinned: {fp} (will be replaced)")
    if not yes and not typer.confirm(f"pin {offered} for {name} in {entry.known_hosts}?"):
        typer.echo("not recorded")
        raise typer.Exit(1)  # declined: nothing verified, nothing pinned
    record_key(entry.known_hosts, entry.address, entry.port, key)
    typer.echo(f"pinned {offered} for {name} in {entry.known_hosts}")
