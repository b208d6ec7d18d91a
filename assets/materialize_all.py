"""`python -m assets.materialize_all`: the run command, by the name the README and the Makefile give it.
The command itself is `runner/command.py`, above the asset definitions."""

from runner.command import main, run_as_main

__all__ = ["main"]

if __name__ == "__main__":
    run_as_main()
