import sys

from gates.stats.cli import main

sys.exit(main())
