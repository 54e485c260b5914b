"""`assay hosts`: check the inventory's hosts, and pin a host's key explicitly."""
from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from hosts.errors import HostError
from hosts.inventory import connect, load_inventory
from hosts.known_hosts import fetch_host_key, fingerprint, pinned_keys, record_key

app = typer.Typer(help="Hosts where Assay runs commands.", no_args_is_help=True)
DEFAULT_INVENTORY = Path("hosts.toml")
InventoryOpt = typer.Option(DEFAULT_INVENTORY, "--inventory", "-i", help="host inventory (TOML)")


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


@app.command()
def check(inventory: Path = InventoryOpt, as_json: bool = typer.Option(False, "--json")) -> None:
    """Connect to each host and print its facts."""
    console = Console()
    try:
        inv = load_inventory(inventory)
    except HostError as e:
        console.print(f"[red]{e}[/red]")
        raise typer.Exit(2)
    report: dict[str, dict] = {}
    for name, entry in inv.hosts.items():
        host = None
        try:
            host = connect(entry)
            report[name] = {"ok": True, "kind": entry.kind, "facts": host.facts().to_dict()}
        except HostError as e:
            report[name] = {"ok": False, "kind": entry.kind, "error": str(e)}
        finally:
            if host is not None:
                host.close()
    if as_json:
        typer.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        table = Table(title=f"hosts in {inventory}")
        for col in ("host", "kind", "status", "hostname", "os", "kernel", "cpus", "memory", "python", "gpus"):
            table.add_column(col)
        for name, r in report.items():
            if not r["ok"]:
                table.add_row(name, r["kind"], f"[red]{r['error']}[/red]", *[""] * 7)
                continue
            f = r["facts"]
            gpus = "; ".join(f"{g['name']} ({g['power_limit_w']} W)" for g in f["gpus"]) or "-"
            table.add_row(name, r["kind"], "[green]ok[/green]", f["hostname"], f["os"], f["kernel"],
                          str(f["cpu_count"]), _gib(f["memory_bytes"]), f["python_version"], gpus)
        Console(width=200).print(table)
    if not all(r["ok"] for r in report.values()):
        raise typer.Exit(1)


@app.command()
def trust(name: str, inventory: Path = InventoryOpt,
          yes: bool = typer.Option(False, "--yes", "-y", help="record without asking")) -> None:
    """Show NAME's host key fingerprint and pin it in the inventory's known_hosts."""
    console = Console()
    try:
        entry = load_inventory(inventory).entry(name)
    except HostError as e:
        console.print(f"[red]{e}[/red]")
        raise typer.Exit(2)
    if entry.kind != "ssh":
        console.print(f"[red]host {name!r} is of kind {entry.kind!r}; only ssh hosts have host keys[/red]")
        raise typer.Exit(2)
    try:
        key = fetch_host_key(entry.address, entry.port, entry.connect_timeout)
    except HostError as e:
        console.print(f"[red]{e}[/red]")
        raise typer.Exit(1)
    offered = fingerprint(key)
    pinned = [fingerprint(k) for k in pinned_keys(entry.known_hosts, entry.address, entry.port).values()]
    typer.echo(f"host {name} ({entry.address}:{entry.port}) offers {offered}")
    if offered in pinned:
        typer.echo("already pinned; nothing to do")
        return
    for fp in pinned:
        typer.echo(f"currently pinned: {fp} (will be replaced)")
    if not yes and not typer.confirm(f"pin {offered} for {name} in {entry.known_hosts}?"):
        typer.echo("not recorded")
        raise typer.Exit(1)
    record_key(entry.known_hosts, entry.address, entry.port, key)
    typer.echo(f"pinned {offered} for {name} in {entry.known_hosts}")


if __name__ == "__main__":
    app()
