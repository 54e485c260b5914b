"""`python -m engine.server --profile ...`: the same as `python -m engine serve`."""
import argparse
import sys

from engine.server.cli import add_arguments, main

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m engine serve")
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
