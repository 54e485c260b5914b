"""`python -m gates.stats {abba|noninferiority|determinism|latency} INPUT.json [--json]`.

Exit codes: 0 pass, 1 fail, 2 inconclusive, 3 bad input (usage errors included, so that 2 only
ever means inconclusive). Whatever the input holds, it never exits 1 unless a judge said "fail":
an input too large for a judge's arithmetic is bad input, not a failed verdict.
"""

from __future__ import annotations

import argparse
import json
import sys

from gates.stats import JUDGES, EXIT_CODES, InputError
from gates.stats.inputs import load_input
from releases.exit_codes import BAD_INPUT


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
    except (ArithmeticError, RecursionError, MemoryError) as exc:
        # Valid by schema, yet beyond what the judge can compute with (values near the float limit):
        # an uncaught exception would exit 1, which reads as a "fail" verdict.
        print(f"bad input: {args.input}: values out of the range the {args.judge} judge can compute with "
              f"({type(exc).__name__}: {exc})", file=sys.stderr)
        return BAD_INPUT
    try:
        json.dumps(record, allow_nan=False)
    except ValueError:
        # e.g. latencies near 1e308: the judge's sums overflow to inf; such a record judges nothing
        print(f"bad input: {args.input}: values too large for the {args.judge} judge (its record would hold a "
              "non-finite number)", file=sys.stderr)
        return BAD_INPUT
    if args.json:
        print(json.dumps(record, indent=2, sort_keys=True))
    else:
        from gates.stats.render import print_verdict

        print_verdict(record)
    return EXIT_CODES[record["verdict"]]
