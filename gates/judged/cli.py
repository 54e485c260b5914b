"""`python -m gates.judged`: the four judged gates against two running servers.

    python -m gates.judged --candidate-url URL --incumbent-url URL --api-key-file F --lane NAME
                           --size cpu|full --out DIR [--settings F.json] [--incumbent-identity F.json]
                           [--candidate-ref F.json] [--waiver F.json]...

Writes DIR/verdict-{determinism,abba,noninferiority,latency}.json (unsigned; the release
stager signs them into receipts) only once all four are decided. Exit codes (docs/INTERFACES.md):
0 no verdict blocks, 1 a verdict blocks (fail or inconclusive, not waived), 2 usage error, 3 bad
input (an unreadable or malformed file or setting), 4 a server unreachable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from releases import exit_codes
from releases.candidate import candidate_ref
from releases.errors import ReleaseError

from gates.judged.client import Endpoint
from gates.judged.errors import CorpusError, EndpointUnavailable, IdentityError, SettingsError
from gates.judged.run import run_judged
from gates.judged.settings import SIZES
from gates.judged.waivers import blocks


class BadInput(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gates.judged",
                                description="Run the judged gates (candidate vs incumbent) and write verdict records.")
    p.add_argument("--candidate-url", required=True, help="base URL of the candidate's server")
    p.add_argument("--incumbent-url", required=True, help="base URL of the incumbent's server")
    p.add_argument("--api-key-file", help="API key file of both servers (the first key is used)")
    p.add_argument("--lane", required=True, help="the lane name the verdicts are for")
    p.add_argument("--size", choices=SIZES, default="cpu", help="cpu (default) or full (GPU lanes)")
    p.add_argument("--out", required=True, help="directory for the verdict records")
    p.add_argument("--settings", help="JSON of the lane's gate tables, e.g. {\"abba\": {\"min_ratio\": 0.97}}")
    p.add_argument("--incumbent-identity", help="JSON {version, wheel_sha256, source_commit, origin}")
    p.add_argument("--candidate-ref", help="JSON candidate ref {id, commit, tree} (or a candidate record)")
    p.add_argument("--waiver", action="append", default=[], help="a waiver record (JSON); repeatable")
    return p


def _json_file(path: str, what: str):
    try:
        return json.loads(Path(path).read_text("utf-8"), parse_constant=_no_constant)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{what} {path}: {exc}") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def _api_key(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        lines = Path(path).read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"API key file {path}: {exc}") from None
    keys = [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]
    if not keys:
        raise BadInput(f"API key file {path}: no key in it")
    return keys[0]


def _candidate_ref(path: str | None) -> dict | None:
    if path is None:
        return None
    data = _json_file(path, "candidate ref")
    if isinstance(data, dict) and "candidate_schema" in data:
        try:
            return candidate_ref(data)
        except ReleaseError as exc:
            raise BadInput(f"candidate record {path}: {exc}") from None
    return data


def _progress(text: str) -> None:
    """A line per gate; on a terminal the pair count of the quality screen counts up in place."""
    if "/" not in text:
        print(f"gate {text} ...", file=sys.stderr, flush=True)
    elif sys.stderr.isatty():
        done, total = text.rsplit(" ", 1)[1].split("/")
        print(f"\r  {text}", end="\n" if done == total else "", file=sys.stderr, flush=True)


def _write_all(out: Path, records: dict[str, dict]) -> None:
    """Each file atomically (temporary file, then rename), after every verdict is decided."""
    out.mkdir(parents=True, exist_ok=True)
    for kind, record in records.items():
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{kind}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, out / f"{kind}.json")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        key = _api_key(args.api_key_file)
        settings = _json_file(args.settings, "settings") if args.settings else None
        if settings is not None and not isinstance(settings, dict):
            raise BadInput(f"settings {args.settings}: expected a JSON object of gate tables")
        identity = _json_file(args.incumbent_identity, "incumbent identity") if args.incumbent_identity else None
        ref = _candidate_ref(args.candidate_ref)
        waivers = [_json_file(w, "waiver") for w in args.waiver]
        with Endpoint("candidate", args.candidate_url, key) as cand, \
                Endpoint("incumbent", args.incumbent_url, key) as inc:
            records = run_judged(cand, inc, lane=args.lane, size=args.size, lane_gates=settings,
                                 incumbent_identity=identity, candidate_ref=ref, waivers=waivers,
                                 progress=_progress)
    except (BadInput, SettingsError, CorpusError, IdentityError) as exc:
        print(f"bad input: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except EndpointUnavailable as exc:
        print(f"unavailable: {exc}", file=sys.stderr)
        return exit_codes.UNAVAILABLE
    _write_all(Path(args.out), records)
    for kind, record in records.items():
        state = "blocks" if blocks(record) else "ok"
        first = record["reasons"][0] if record["reasons"] and record["verdict"] != "pass" else ""
        print(f"{kind:24} {record['verdict']:13} {state:7} {first}")
    return exit_codes.FAILED if any(blocks(r) for r in records.values()) else exit_codes.OK
