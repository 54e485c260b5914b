"""`python -m releases.install` and the zipapp's entry point."""
import sys

from releases.install.cli import main

sys.exit(main())
