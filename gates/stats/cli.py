"""`python -m gates.stats {abba|noninferiority|determinism|latency} INPUT.json [--json]`.

Exit codes: 0 pass, 1 fail, 2 inconclusive, 3 bad input (usage errors included, so that 2 only
ever means inconclusive).
"""

from __future__ import annotations

import argparse
import json
import sys

from gates.stats import JUDGES, EXIT_CODES, InputError
from gates.stats.inputs import load_input

BAD_INPUT = 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would exit 2, which means "inconclusive" here
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m gates.stats", description="Judge measurements into a verdict record.")
    parser.add_argument("judge", choices=list(JUDGES), help="which judge to run")
    parser.add_argument("input", help="input JSON file (see gates/stats/schemas/input-<judge>.schema.json)")
    parser.add_argument("--json", action="store_true", help="print the verdict record as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        data = load_input(args.input)
        record = JUDGES[args.judge](data, source=args.input)
    except InputError as exc:
        print(f"bad input: {exc}", file=sys.stderr)
        return BAD_INPUT
    if args.json:
        print(json.dumps(record, indent=2, sort_keys=True))
    else:
        from gates.stats.render import print_verdict

        print_verdict(record)
    return EXIT_CODES[record["verdict"]]
