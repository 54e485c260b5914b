"""`python -m engine import-gguf GGUF OUT_DIR [--dtype float32|bfloat16]`."""
from __future__ import annotations

import argparse
import sys

from engine.gguf_import.errors import GGUFError
from engine.gguf_import.importer import DTYPES, import_gguf


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("gguf", help="the .gguf file to import")
    parser.add_argument("out_dir", help="directory to write the Hugging Face model into")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32",
                        help="dtype of the dequantized weights (default float32)")


def main(args: argparse.Namespace) -> int:
    try:
        result = import_gguf(args.gguf, args.out_dir, dtype=args.dtype)
    except GGUFError as e:
        print(f"import-gguf: {e}", file=sys.stderr)
        return 2
    for name, sha in sorted(result.files.items()):
        print(f"{sha}  {name}")
    print(f"imported {result.source_sha256[:12]} into {result.out_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="import-gguf")
    add_arguments(p)
    sys.exit(main(p.parse_args()))
