"""`python -m engine make-tiny-model OUT [--arch qwen3|llama] [--seed N] [--dtype float32|bfloat16]`."""
from __future__ import annotations

import argparse

from engine.model.tiny import make_tiny_model


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", help="directory to write")
    p.add_argument("--arch", choices=["qwen3", "llama"], default="qwen3")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")


def main(args: argparse.Namespace) -> int:
    out = make_tiny_model(args.out, args.arch, args.seed, args.dtype)
    print(out)
    return 0
