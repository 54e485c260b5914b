"""python -m tests.testbed up --count N --inventory OUT.toml | down"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.testbed import bed
from hosts.rootfs_image import TestbedError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.testbed")
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start sshd containers and write an inventory")
    p_up.add_argument("--count", type=int, default=2)
    p_up.add_argument("--inventory", type=Path, required=True)
    p_up.add_argument("--bed", default=None, help="label for this bed (default: random)")
    p_down = sub.add_parser("down", help="remove test bed containers")
    p_down.add_argument("--bed", default=None, help="only this bed's containers (default: all)")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            if args.count < 1:
                parser.error("--count must be at least 1")
            bed.up(args.count, args.inventory, bed_id=args.bed)
        else:
            bed.down(bed_id=args.bed)
    except TestbedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
