"""Exit codes shared by every Assay command line (docs/INTERFACES.md)."""

OK = 0
FAILED = 1
USAGE = 2
BAD_INPUT = 3
UNAVAILABLE = 4
