"""`python -m engine` subcommands that live in the engine core (engine/__main__.py dispatches)."""
