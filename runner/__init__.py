"""The run command, `python -m assets.materialize_all` (the README's name for it; `runner/command.py`):
the steps it plans from the configuration (`steps.py`), which of them are up to date
(`up_to_date.py`), and the Dagster instance parts it runs them with in one process: its run storage
(`instance_storage.py`), each run's captured output (`compute_logs.py`) and the tags of a run
launched from the UI (`ui_runs.py`). It sits above `assets/`, which holds the definitions."""

import time as _time

# when the command's process began its own work (this package is the first of it a command imports):
# the start of `runs.commands.started_at` and `wall_s` (runner/command_records.py)
LOADED = (_time.time(), _time.monotonic())
