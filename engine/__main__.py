"""`python -m engine SUBCOMMAND`: make-tiny-model, generate, serve, import-gguf."""
from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand -> module exposing add_arguments(parser) and main(args) -> int. Imported lazily
# so that `generate` never pays for the server's or the GGUF importer's imports.
SUBCOMMANDS = {
    "make-tiny-model": ("engine.cli.make_tiny_model", "write a deterministic tiny random model directory"),
    "generate": ("engine.cli.generate", "generate from a prompt with the engine"),
    "serve": ("engine.server.cli", "serve the OpenAI-compatible HTTP API"),
    "import-gguf": ("engine.gguf_import.cli", "convert a GGUF file into a model directory"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m engine")
    sub = parser.add_subparsers(dest="command", required=True)
    chosen = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if name == chosen:
            importlib.import_module(module).add_arguments(p)
    args, extra = parser.parse_known_args(argv) if chosen is None else (parser.parse_args(argv), [])
    return int(importlib.import_module(SUBCOMMANDS[args.command][0]).main(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
