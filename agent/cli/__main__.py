"""`python -m agent.cli`: the same as the `krefine` console script."""
import sys

from agent.cli import main

sys.exit(main())
