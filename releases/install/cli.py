"""`python3 assay-install-<version>.pyz <command> ...` (and `assay install ...`): a thin argparse
layer over the library. Each command prints one JSON object with --json, a human line otherwise;
a failure is one line naming what was wrong and where, with a non-zero exit, never a traceback."""
from __future__ import annotations

import argparse
import json
import sys

from releases import exit_codes
from releases.errors import ReleaseError
from releases.install import service
from releases.install.errors import InstallError
from releases.install.installer import install
from releases.install.layout import Prefix
from releases.install.upgrade import rollback, upgrade


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="assay-install", description="Install, upgrade, roll back and run an "
                                "Assay release (docs/INSTALL.md).")
    sub = p.add_subparsers(dest="command", required=True)

    def cmd(name: str, help_: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_)
        c.add_argument("--prefix", required=True, help="install prefix (releases/, current, previous_release)")
        c.add_argument("--json", action="store_true", help="print one JSON object")
        return c

    def serve_args(c: argparse.ArgumentParser, required: bool) -> None:
        c.add_argument("--port", type=int, required=required, help="port on 127.0.0.1")
        c.add_argument("--api-key-file", required=required, help="the engine's API key file")
        c.add_argument("--model", help="model directory (else the profile's)")
        c.add_argument("--profile", help="serving profile JSON (else a default one)")
        c.add_argument("--timeout", type=float, default=300, help="seconds to wait for health")

    for name, help_ in (("install", "install a release from URL"), ("upgrade", "install and restart, "
                                                                               "rolling back on failure")):
        c = cmd(name, help_)
        c.add_argument("url", help="http(s)://, file:// or a directory holding the release")
        c.add_argument("--key", required=True, help="the release's public key (PEM) you trust")
        c.add_argument("--base-python", help="interpreter whose installed packages the release reuses")
        if name == "install":
            c.add_argument("--repair", action="store_true", help="finish or undo an interrupted install first")
        else:
            serve_args(c, True)
    cmd("rollback", "current -> previous_release").add_argument("--timeout", type=float, default=300)
    serve_args(cmd("start", "start the current release's engine"), True)
    cmd("stop", "stop the engine this installer started")
    cmd("status", "current, previous_release and the service")
    return p


def run(args: argparse.Namespace) -> dict:
    prefix = Prefix.at(args.prefix)
    if args.command == "install":
        return install(args.url, prefix, args.key, base_python=args.base_python, repair_first=args.repair)[0]
    if args.command == "upgrade":
        return upgrade(args.url, prefix, args.key, port=args.port, api_key_file=args.api_key_file, model=args.model,
                       profile=args.profile, base_python=args.base_python, timeout=args.timeout)
    if args.command == "rollback":
        return rollback(prefix, timeout=args.timeout)
    if args.command == "start":
        return service.start(prefix, port=args.port, api_key_file=args.api_key_file, model=args.model,
                             profile=args.profile, timeout=args.timeout)
    if args.command == "stop":
        return service.stop(prefix)
    return {"status": "ok", **service.status(prefix)}


def _human(out: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in out.items() if not isinstance(v, dict))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        out = run(args)
    except ReleaseError as exc:
        where = getattr(exc, "where", "")
        message = getattr(exc, "message", str(exc)).splitlines()[0]
        if args.json:
            print(json.dumps({"status": "error", "error": message, "where": where}, sort_keys=True))
        print(f"assay-install {args.command}: error: {where + ': ' if where else ''}{message}", file=sys.stderr)
        return exit_codes.BAD_INPUT if isinstance(exc, InstallError) else exit_codes.FAILED
    except OSError as exc:
        print(f"assay-install {args.command}: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return exit_codes.FAILED
    print(json.dumps(out, sort_keys=True) if args.json else _human(out))
    return exit_codes.OK
