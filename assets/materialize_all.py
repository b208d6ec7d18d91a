"""`python -m assets.materialize_all`: the run command, by the name the README and the Makefile give it.
The command itself is `runner/command.py`, above the asset definitions."""

import sys

from runner.command import main

if __name__ == "__main__":
    sys.exit(main())
