"""What the run command prints: the progress line, the end-of-run summary, what the demo scale
leaves out, the item partitions stored (plain Python; `runner/command.py` runs the steps)."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from configuration import Config
from configuration.families import BY_KEY, FAMILIES, KEYS, title
from evaluations.calls import protocol_of
from llm_calls import TOTALS
from warehouse import Warehouse
from warehouse.sql import in_list


@dataclass
class Done:
    step: Any  # assets.jobs.Step: its family and label are shown
    ok: bool
    seconds: float
    calls: tuple[int, int, int]  # cached, answered, failed
    failed_checks: list[str] = field(default_factory=list)
    warned_checks: list[str] = field(default_factory=list)
    started: float | None = None  # time.monotonic() at its start: steps that ran at once overlap
    skipped: bool = False  # up to date (runner/up_to_date.py): not run again


def elapsed(done: list[Done]) -> float:
    """The wall time of `done`: from the first start to the last end where the starts are known
    (steps that ran at once count once), else the steps' seconds added up."""
    if done and all(d.started is not None for d in done):
        return max(d.started + d.seconds for d in done) - min(d.started for d in done)  # type: ignore[operator]
    return sum(d.seconds for d in done)


class Progress:
    """One line for the whole run, rewritten in place on a terminal (a line per step and every
    `every_s` seconds otherwise): steps, calls against the plan, elapsed, estimated time left."""

    def __init__(self, total_steps: int, planned: tuple[int, int, int] | None = None,
                 stream=None, every_s: float | None = None):
        self.total_steps = total_steps
        # calls the configuration fixes, of them not cached, and the most that replies may add
        self.exact, self.exact_new, self.bounded = planned or (0, 0, 0)
        self.stream = stream = stream or sys.stdout  # the stdout of now, not of the module's import
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.every_s = every_s if every_s is not None else (1.0 if self.tty else 30.0)
        self.steps_done = 0
        self.current = ""
        self._running: list[str] = []
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def line(self) -> str:
        elapsed = time.monotonic() - self.t0
        calls = f"calls {TOTALS.done}" + (f"/{self.exact}" if self.exact else "")
        calls += f"+<={self.bounded}" if self.bounded else ""
        calls += f" ({TOTALS.cached} cached, {TOTALS.failed} failed)"
        new = TOTALS.answered + TOTALS.failed
        if self.exact_new and new and new < self.exact_new:
            # the calls the configuration fixes, at the rate so far; replies may add more: at least this
            eta = f">={clock((self.exact_new - new) * elapsed / new)} left"
        elif self.steps_done:
            eta = f"~{clock((self.total_steps - self.steps_done) * elapsed / self.steps_done)} left"
        else:
            eta = "time left: measuring"
        held = TOTALS.held()
        waits = ("rate limited: " + ", ".join(f"{m} waits {clock(s)}" for m, s in held.items()) + " | ") if held else ""
        return (f"[{self.steps_done}/{self.total_steps} steps] {calls} | {clock(elapsed)} elapsed, {eta} | "
                f"{waits}{self.current}")

    def start(self) -> None:
        self._thread.start()

    def begin(self, label: str) -> None:
        """A step started; steps that run at once are listed newest first."""
        self._running.insert(0, label)
        self.current = self._running[0] + (f" (+{len(self._running) - 1} running)" if len(self._running) > 1 else "")
        self.show(force=True)

    def finish(self, label: str | None = None) -> None:
        """A step ended (`label`; by default the oldest still running)."""
        if self._running:
            self._running.remove(label if label in self._running else self._running[-1])
        self.steps_done += 1
        if self._running:
            self.current = self._running[0] + (f" (+{len(self._running) - 1} running)" if len(self._running) > 1 else "")
        self.show()

    def show(self, force: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + self.line()[:200])
        elif force:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.show(force=True)

    def stop(self) -> None:
        self._stop.set()
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


def stored_items(wh: Warehouse | None) -> dict[str, set[str]]:
    """Per family, the item partitions the warehouse holds ('' for an unpartitioned family)."""
    if wh is None or not wh.exists():
        return {f.key: set() for f in FAMILIES}
    empty = "''"  # an unpartitioned family's one partition
    return {f.key: {r["p"] for r in wh.rows(f"SELECT DISTINCT {f.partition_column or empty} AS p FROM {f.items_table}")}
            for f in FAMILIES}


def left_out_at_demo(config: Config) -> list[str]:
    """What the demo scale leaves out of the configuration, one line each (the summary and the plan
    print them): each family's own account (its `Protocol.left_out_at_demo`, where it has one:
    MuSoBench levels beyond `muso.demo_levels`, S1-Bench subcategories other than
    `demo_subcategories`)."""
    if config.scale != "demo":
        return []
    out: list[str] = []
    for f in FAMILIES:
        left_out = protocol_of(f).left_out_at_demo
        out += left_out(config) if left_out else []
    return out


def summary(done: list[Done], wh: Warehouse, config: Config, warehouse_path: str) -> str:
    """The end-of-run table per family, the headline numbers per model, and where to look next."""
    by_family: dict[str, list[Done]] = {}
    for d in done:
        by_family.setdefault(d.step.family, []).append(d)
    families = [f for f in by_family if f in KEYS]
    out = _step_table(done, by_family, wh)
    out += ["", "headline numbers (report.headline; fractions unless named):"] + _headlines(wh, families)
    out += _left_out_of_metrics(wh, families)
    left_out = left_out_at_demo(config)
    if left_out:
        out += ["", "left out at demo scale (configured, not built):"] + [f"  {line}" for line in left_out]
    reports = wh.folder / "reports"
    out += ["", "where to look next:",
            f"  reports:   {reports / 'index.html'}" + ("" if (reports / "index.html").exists() else " (not built)"),
            f"  warehouse: {warehouse_path}   (python -m warehouse.query \"SELECT * FROM report.headline\")",
            "  Dagster UI: make ui, then http://127.0.0.1:3000 (runs, check verdicts per partition)"]
    failed = [d for d in done if not d.ok]
    if failed:
        out += ["", f"{len(failed)} step(s) failed: " + ", ".join(d.step.label for d in failed[:10])]
    return "\n".join(out)


def _step_table(done: list[Done], by_family: dict[str, list[Done]], wh: Warehouse) -> list[str]:
    """The table of the steps: per family its items, calls cached, new and failed, time and status."""
    out = ["", f"{'family':<22}{'items':>7}{'cached':>8}{'new':>7}{'failed':>8}  {'time':>7}  status"]
    for family, ds in by_family.items():
        items = wh.scalar(f"SELECT count(*) FROM {BY_KEY[family].items_table}") if family in BY_KEY else ""
        cached, answered, failed = (sum(d.calls[i] for d in ds) for i in range(3))
        out.append(f"{title(family):<22}{items!s:>7}{cached:>8}{answered + failed:>7}{failed:>8}  "
                   f"{clock(elapsed(ds)):>7}  {_status(ds)}")
    out.append(f"{'total':<22}{'':>7}{sum(d.calls[0] for d in done):>8}"
               f"{sum(d.calls[1] + d.calls[2] for d in done):>7}{sum(d.calls[2] for d in done):>8}  "
               f"{clock(elapsed(done)):>7}")
    skipped = sum(d.skipped for d in done)
    if skipped:
        out.append(f"{skipped} of {len(done)} steps up to date, not run again (runs.steps says what each last ran "
                   "with; --all runs them)")
    return out


def _status(ds: list[Done]) -> str:
    """One family's status: up to date, ok or the steps that failed, with the checks that failed or warned."""
    bad = [d for d in ds if not d.ok]
    warned = sorted({c for d in ds for c in d.warned_checks})
    status = ("up to date" if all(d.skipped for d in ds) else "ok") if not bad else "FAILED: " + ", ".join(
        d.step.label + (f" (checks: {', '.join(d.failed_checks)})" if d.failed_checks else "") for d in bad)[:200]
    # a failed check that does not stop its step (coverage: a partial selection fails it too) still shows
    unmet = sorted({c for d in ds if d.ok for c in d.failed_checks})
    if unmet:
        status += f" (failed checks: {', '.join(unmet)})"
    if warned:
        status += f" (warnings: {', '.join(warned)})"
    return status


def _headlines(wh: Warehouse, families: list[str]) -> list[str]:
    """Each model's first headline numbers per family, with their intervals."""
    rows = wh.rows(f"SELECT * FROM report.headline WHERE family IN {in_list(families)} "
                   "ORDER BY family, model, scope, metric") if families else []
    if not rows:
        return ["  none: no metrics were computed"]
    out: list[str] = []
    for family in families:
        cells: dict[str, list[str]] = {}
        gone: set[str] = set()
        for r in rows:
            if r["family"] == family:
                value = "NULL" if r["value"] is None else (f"{r['value']:.3g}")
                if r.get("lo") is not None and r.get("hi") is not None:
                    value += f" [{r['lo']:.2g}-{r['hi']:.2g}]"
                cells.setdefault(r["model"], []).append(f"{r['scope']} {r['metric']}={value}")
                if not r["configured"]:
                    gone.add(r["model"])
        for model, parts in cells.items():
            shown = "; ".join(parts[:6]) + (f"; ... {len(parts) - 6} more" if len(parts) > 6 else "")
            mark = " (no longer configured: rows of an earlier configuration)" if model in gone else ""
            out.append(f"  {title(family)} [{model}]{mark}: {shown}")
    return out


def _left_out_of_metrics(wh: Warehouse, families: list[str]) -> list[str]:
    """The stale replies every metric leaves out, and the mechanisms a run did not exercise."""
    if not families:
        return []
    out: list[str] = []
    stale = wh.rows(f"SELECT * FROM report.stale WHERE family IN {in_list(families)}")
    if stale:
        out += ["", "stale replies, left out of every metric (report.stale): made on items since rebuilt "
                    "differently or removed; run those slices again (--model NAME):"]
        out += [f"  {title(r['family'])} [{r['model']}] {r['scope']}: {r['replies']} replies in {r['table']} "
                f"({r['item_changed']} on changed items, {r['item_gone']} on items no longer stored)" for r in stale]
    missed = wh.rows(f"SELECT * FROM report.mechanisms WHERE family IN {in_list(families)} AND NOT reached")
    measured = {r["family"] for r in wh.rows("SELECT DISTINCT family FROM report.mechanisms")}
    nothing = [f for f in families if f not in measured]
    out += ["", "mechanisms not exercised (report.mechanisms):" if missed or nothing else
            "every family's main mechanism was exercised (report.mechanisms)"]
    out += [f"  {title(r['family'])} [{r['model']}] {r['scope']}: {r['mechanism']}: {r['detail']}" for r in missed]
    out += [f"  {title(f)}: nothing measured (no current replies or items)" for f in nothing]
    return out
