"""`assay`: the command line over the library. verify and release show come from releases/,
hosts from hosts/; approve and runs speak to the Prefect API.

Exit codes follow the one table in docs/INTERFACES.md (releases/exit_codes.py): a typed error that
escapes a command is printed as one plain line and becomes its code; nothing a user typed or a
file held is ever read as rich markup."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from flows.local_api import use_local_server_if_unset

use_local_server_if_unset()

import typer  # noqa: E402  (after the Prefect settings are in place)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from rich.text import Text  # noqa: E402

from flows.approval import ApprovalNotPossible, ready_manifest_path, send_approval  # noqa: E402
from builders.errors import BuilderError  # noqa: E402
from flows.config import ConfigError  # noqa: E402
from hosts.errors import HostError, InventoryError  # noqa: E402
from releases import exit_codes  # noqa: E402
from releases.errors import KeyFileError, PublishRefused, RecordError, StoreError, VerificationFailed  # noqa: E402

# Nothing printed here is markup: a value that came from input must print as written.
console = Console(markup=False, emoji=False)
err = Console(stderr=True, soft_wrap=True, markup=False, emoji=False)  # messages hold paths: never wrapped

# First match wins: InventoryError is a HostError, and bad input, not an unreachable host.
EXIT_CODES: list[tuple[type[BaseException], int]] = [
    (ConfigError, exit_codes.BAD_INPUT), (InventoryError, exit_codes.BAD_INPUT), (RecordError, exit_codes.BAD_INPUT),
    (KeyFileError, exit_codes.BAD_INPUT), (VerificationFailed, exit_codes.FAILED), (PublishRefused, exit_codes.FAILED),
    (HostError, exit_codes.UNAVAILABLE), (StoreError, exit_codes.UNAVAILABLE), (BuilderError, exit_codes.FAILED),
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
keys_app = typer.Typer(help="People's signing keys (approvers, waiver grantors).", no_args_is_help=True)


def _mount() -> None:
    from flows.lanes_cli import app as lanes_app
    from hosts.cli import app as hosts_app
    from releases import cli as releases_cli
    from releases.notes.cli import notes
    from releases.review_cli import app as review_app
    from flows.reproduce_cli import reproduce

    app.command("verify", help=releases_cli.verify.__doc__)(releases_cli.verify)
    release_app.command("show", help=releases_cli.show.__doc__)(releases_cli.show)
    app.add_typer(release_app, name="release")
    app.add_typer(keys_app, name="keys")
    app.add_typer(hosts_app, name="hosts", help="Inventory hosts: check them, trust their keys.")
    app.add_typer(review_app, name="review", help="Create and update a candidate's review ledger.")
    app.add_typer(lanes_app, name="lanes", help="Lanes qualified elsewhere: import and check their evidence.")
    app.command("notes", help=notes.__doc__)(notes)
    app.command("reproduce", help=reproduce.__doc__)(reproduce)


@app.command()
def approve(
    flow_run_id: str = typer.Argument(..., help="the paused release-candidate run"),
    as_: str = typer.Option(..., "--as", help="approver name; must be listed in assay.toml"),
    reason: str = typer.Option(..., "--reason", help="why, for the release record"),
    reject: bool = typer.Option(False, "--reject", help="reject instead of approve: the run ends Failed"),
    waiver: list[str] = typer.Option([], "--waiver", help="acknowledge a waiver bound to the candidate (repeat)"),
    key: Optional[Path] = typer.Option(None, "--key", help="your private key (default: ~/.config/assay/keys/NAME.pem "
                                                          "when it exists; without one the approval is unsigned)"),
    manifest: Optional[Path] = typer.Option(None, "--manifest", help="the ready manifest.json you reviewed "
                                                                    "(default: the run's staged one, when local)"),
) -> None:
    """Approve (or reject) a paused release-candidate run, signing the decision with your key."""
    from releases import approval as approval_mod
    from releases.keys import key_id, load_private_key, person_key_path
    from releases.manifest import approval_digest, load_manifest

    decision = "reject" if reject else "approve"
    body = {"decision": decision, "approver": as_, "reason": reason, "acknowledged_waivers": sorted(set(waiver))}
    try:
        key_path = key if key is not None else person_key_path(as_)
        if key is not None or key_path.exists():
            private = load_private_key(key_path)
            ready = load_manifest((manifest or ready_manifest_path(flow_run_id)).read_bytes())
            digest = approval_digest(ready)
            body["signature"] = approval_mod.sign_decision(digest, private_key=private, **body)
            signed_by = key_id(private.public_key())
            console.print(Text(f"signed with key {signed_by} over ready manifest {digest}"), soft_wrap=True)
        else:
            err.print(Text(f"approve: no key for {as_} ({key_path} is absent): sending an UNSIGNED {decision}, "
                           "accepted only where assay.toml allows unsigned approvals"), soft_wrap=True)
        send_approval(flow_run_id, body)
    except (KeyFileError, RecordError, OSError) as exc:
        err.print(Text(f"approve: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(exit_codes.BAD_INPUT)
    except ApprovalNotPossible as exc:
        err.print(Text(f"approve: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(exit_codes.USAGE)
    console.print(Text(f"{decision} sent for flow run {flow_run_id} as {as_}"), soft_wrap=True)


@app.command()
def publish(
    release: Optional[Path] = typer.Argument(None, help="an approved release directory (state published), as a run "
                                                        "staged it: <state>/work/run-<id>/release"),
    resume: bool = typer.Option(False, "--resume", help="complete a publish that stopped part-way (assets in the "
                                                        "store, no manifest); without RELEASE: every such one"),
    config: Optional[Path] = typer.Option(None, "--config", help="assay.toml naming the store (default: the "
                                                                 "embedded defaults)"),
) -> None:
    """Publish an approved release to the store write-once; --resume completes an unfinished publish."""
    from flows.config import load_config
    from flows.publishing import publish_approved, staged_releases_for
    from flows.stores import open_store, store_location
    from releases.keys import load_public_key
    from releases.publish import unfinished_versions

    cfg = load_config(config)
    store = open_store(cfg)
    key = load_public_key(cfg.keys_dir / "release.pub.pem")  # the release key, never the directory's own
    lost: list[str] = []
    if release is not None:
        targets = [release]
    elif resume:
        unfinished = unfinished_versions(store)
        if not unfinished:
            console.print(Text(f"nothing to resume: no unfinished publish in {store!r}"))
            return
        found = staged_releases_for(cfg, unfinished)
        targets, lost = list(found.values()), [v for v in unfinished if v not in found]
    else:
        raise typer.BadParameter("name the approved release directory to publish (or use --resume)",
                                 param_hint="RELEASE")
    for target in targets:
        version, before = publish_approved(target, store, public_key=key, resume=resume,
                                           say=lambda line: console.print(Text(line)))
        where = store_location(store, version)
        console.print(Text(f"{version} was already published: {where}" if before == "published" else
                           f"published {version}{' (resumed)' if before == 'unfinished' else ''}: {where}"))
    if lost:
        err.print(Text(f"publish: no approved release staged under {cfg.work_dir} for the unfinished "
                       f"{', '.join(lost)}; name its release directory"))
        raise typer.Exit(exit_codes.FAILED)


@keys_app.command("new")
def keys_new(
    as_: str = typer.Option(..., "--as", help="your name as assay.toml will list it"),
    directory: Optional[Path] = typer.Option(None, "--dir", help="where the private key goes "
                                                                 "(default: $XDG_CONFIG_HOME/assay/keys)"),
) -> None:
    """Create your Ed25519 key pair (private key 0600); print the public key to list in assay.toml."""
    from releases.errors import KeyFileError
    from releases.keys import key_id, new_person_key, public_pem

    try:
        path, public = new_person_key(as_, directory)
    except KeyFileError as exc:
        err.print(Text(f"keys new: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(exit_codes.BAD_INPUT)
    pem = public_pem(public).decode("ascii")
    console.print(Text(f"private key: {path} (mode 0600; never share it)\nkey id: {key_id(public)}\n\n"
                       f"List it in assay.toml as an approver and/or a waiver grantor:\n\n"
                       f'[release.approvers.{as_}]\npublic_key = """{pem}"""\n\n'
                       f'[release.waiver_grantors.{as_}]\npublic_key = """{pem}"""'), soft_wrap=True)


@app.command()
def waive(
    candidate: Path = typer.Option(..., "--candidate", help="the candidate record (candidate.json) the waiver binds"),
    gate: str = typer.Option(..., "--gate", help="the gate whose finding is waived"),
    lane: str = typer.Option(..., "--lane", help="the lane it was measured on"),
    case: str = typer.Option(..., "--case", help="the case within the gate"),
    measured: str = typer.Option(..., "--measured", help="the measured value being accepted"),
    reason: str = typer.Option(..., "--reason", help="why the risk is accepted"),
    as_: str = typer.Option(..., "--as", help="the grantor, as listed in [release.waiver_grantors]"),
    key: Optional[Path] = typer.Option(None, "--key", help="your private key (default: ~/.config/assay/keys/NAME.pem)"),
    out: Path = typer.Option(..., "--out", help="where to write the signed waiver (JSON)"),
    waiver_id: Optional[str] = typer.Option(None, "--id", help="waiver id (default: GATE-LANE-CASE)"),
) -> None:
    """Grant a waiver for one gate case of one candidate, signed with your key."""
    from releases.atomic import write_atomic
    from releases.candidate import candidate_ref
    from releases.canonical import canonical_json, load_json_bytes
    from releases.keys import key_id, load_private_key, person_key_path
    from releases.waivers import build_gate_waiver, sign_waiver

    try:
        private = load_private_key(key or person_key_path(as_))
        record = load_json_bytes(candidate.read_bytes(), where=str(candidate))
        waiver = build_gate_waiver(candidate_ref(record), gate=gate, lane=lane, case=case, measured=measured,
                                   grantor=as_, reason=reason, id=waiver_id)
        signed = sign_waiver(waiver, private)
        write_atomic(out, canonical_json(signed))
    except (KeyFileError, RecordError, OSError) as exc:
        err.print(Text(f"waive: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(exit_codes.BAD_INPUT)
    console.print(Text(f"waiver {signed['id']} for {signed['subject']} signed by {as_} "
                       f"(key {key_id(private.public_key())}): {out}"), soft_wrap=True)


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
        raise typer.Exit(exit_codes.UNAVAILABLE)
    except PrefectHTTPStatusError as exc:  # it answered, with an error: say so, not "cannot reach"
        err.print(Text(f"runs: the Prefect API at {where} answered {exc}", style="red"))
        raise typer.Exit(exit_codes.UNAVAILABLE)
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
