"""MuSoBench assets (paper 001): instances with complete solution sets, model responses, metrics.

Partitions: one per task and complexity level, keyed like `timetabling_51-100`
or `subsetsum_301+`, taken from the bins in the configuration (adding a bin adds
a partition and leaves the others' instances unchanged).
"""

import json
import time
from collections import Counter

import dagster as dg

from assets.metadata import check_results, column_schema, figure_markdown, headline, rounded, table
from assets.partitions import by_model, items_partitions, model_slice
from assets.release import released_tables
from assets.reply_checks import reply_check_results, reply_check_specs
from assets.resources import LLMResource, SettingsResource, WarehouseResource
from assets.versions import code_version
from configuration import Config
from evaluations import muso as protocol
from evaluations import scoring
from generators import ahead
from generators import muso as gen
from generators.muso import partitions, task_bins
from llm_calls import Waiting
from reporting.figures import draw_reliability, figure
from validators import outcomes
from validators.outcomes import CALL_FAILED
from warehouse.schema import current

GROUP = "muso"
# bumped when the responses or the metrics computed from the same inputs change
RESPONSES_VERSION, METRICS_VERSION = "muso-responses-1", "muso-metrics-1"


def build_assets(cfg: Config) -> list[dg.AssetsDefinition]:
    """The three MuSoBench assets: instances per level, responses per (level, model) slice, metrics."""
    levels = items_partitions(cfg, "muso")
    slices = by_model("level", levels, cfg)
    instances = dg.asset(
        muso_instances, name="muso_instances", group_name=GROUP, metadata=column_schema("muso.instances"),
        partitions_def=levels, kinds={"duckdb"}, code_version=code_version(gen.GENERATOR_VERSION, cfg, "muso"),
        check_specs=[dg.AssetCheckSpec(n, asset="muso_instances", partitions_def=levels, description=d)
                     for n, d in _INSTANCE_CHECKS.items()])
    responses = dg.asset(
        muso_responses, name="muso_responses", group_name=GROUP, metadata=column_schema("muso.responses"),
        partitions_def=slices, deps=[instances], kinds={"duckdb"},
        code_version=code_version(RESPONSES_VERSION, cfg, "muso"), check_specs=reply_check_specs("muso_responses", slices))
    metrics = dg.asset(
        muso_metrics, name="muso_metrics", group_name=GROUP, metadata=column_schema("muso.metrics"), deps=[responses],
        kinds={"duckdb"}, code_version=code_version(METRICS_VERSION, cfg, "muso"),
        check_specs=[dg.AssetCheckSpec("every_model_task_level", asset="muso_metrics",
                                       description="every evaluated model has metrics for every configured bin, "
                                                   "and none for a bin no longer configured")])
    return [instances, responses, metrics]


_INSTANCE_CHECKS = {
    "quota_met": "the level holds the configured number of instances",
    "counts_in_bin": "every instance's solution count lies in the level's bin and equals its stored solutions",
    "enumerators_agree": "CP-SAT re-enumerates (a sample of) the instances and finds exactly the stored solutions",
    "no_duplicate_instances": "no two instances of a task share a problem or an id",
}


def muso_instances(context: dg.AssetExecutionContext, settings: SettingsResource,
                   warehouse: WarehouseResource) -> dg.MaterializeResult:
    """TimeTabling or SubsetSum instances of one complexity level, with every solution
    (paper appendix A.1), into `muso.instances` and `muso.solutions`. Seeded per
    (seed, task, bin); counted with early stop, parameters steered toward the bin;
    every solution re-checked by a validator independent of the enumerators."""
    cfg = settings.load()
    pk = context.partition_key
    task, level, b = partitions(cfg)[pk]
    quota = cfg.muso.quota.at(cfg.scale)
    clock = _Clock()
    released = released_tables(cfg, "muso", pk)
    if released is not None:  # a release read back: its instances, checked below as built ones are
        inst_rows, sol_rows = released["muso.instances"], released["muso.solutions"]
        clock.lap("generation")
    else:
        # built ahead by `materialize_all`'s worker process while earlier levels were written, or here
        job = gen.level_job(cfg, pk)
        built = ahead.take(gen.build_level, job)
        if built is not None:
            clock.lap("waited")
        else:
            built = gen.build_level(job)
            clock.restart()
        clock.seconds.update(built.seconds)
        inst_rows, sol_rows = built.instances, built.solutions
    gen.check_solution_rows(inst_rows, sol_rows)
    clock.lap("validation")
    wh = warehouse.get()
    wh.replace_partitions({"muso.instances": inst_rows, "muso.solutions": sol_rows}, {"partition_key": pk})
    version = dg.DataVersion(wh.item_set_version("muso.instances", {"partition_key": pk}))
    clock.lap("write")
    checks = check_results(_level_checks(wh, cfg, pk, task, b, quota))
    clock.lap("checks")
    return dg.MaterializeResult(
        data_version=version,
        metadata={
            "dagster/row_count": len(inst_rows),
            "solutions": len(sol_rows),
            "solution_counts": dg.MetadataValue.json([r["solution_count"] for r in inst_rows]),
            "candidates_drawn": inst_rows[-1]["candidate_index"] + 1 if inst_rows else 0,
            "from_release": released is not None,
            "generated_ahead": "waited" in clock.seconds,
            "generation_seconds": round(clock.seconds["generation"], 3),
            # where the step's time went: generation (or reading the release), the rows, every
            # solution's independent validation, the write, the quality checks (CP-SAT re-enumeration
            # included); generated ahead, the first two were the worker's, `waited` this step's wait for it
            "build_seconds": dg.MetadataValue.json({k: round(v, 3) for k, v in clock.seconds.items()}),
        },
        check_results=checks,
    )


def muso_responses(context: dg.AssetExecutionContext, settings: SettingsResource,
                   warehouse: WarehouseResource, llm: LLMResource) -> dg.MaterializeResult:
    """One evaluated model's answers to this level's instances (partition `level|model`) through
    the three-turn protocol (solve, confidence, recheck; paper section 3, appendix A.3), per
    paradigm and variant (exploration cue, self-consistency when configured), parsed and scored
    into `muso.responses`. Failed calls are rows with status `call_failed`."""
    cfg = settings.load()
    pk, model = model_slice(context, "level")
    wh = warehouse.get()
    items = load_items(wh, pk)
    ledger = llm.ledger(context, wh)
    m = cfg.muso
    rows = []
    waiting = Waiting()  # in batch-files mode every run writes its files in one round
    for paradigm in m.paradigms_for(model):
        for variant in protocol.variants(cfg):
            for temperature in m.temperatures:
                with waiting.part():
                    rows += protocol.run(
                        ledger, model, items, paradigm, variant, temperature=temperature,
                        solve_max_tokens=m.solve_max_tokens.at(cfg.scale),
                        confidence_max_tokens=m.confidence_max_tokens.at(cfg.scale),
                        paths=max(1, m.self_consistency.at(cfg.scale)),
                    )
    if m.reflection_checkpoints and "long_cot" in m.paradigms_for(model):
        for temperature in m.temperatures:
            with waiting.part():
                rows += protocol.checkpoints(
                    ledger, model, items, m.reflection_checkpoints, temperature=temperature,
                    solve_max_tokens=m.solve_max_tokens.at(cfg.scale),
                    confidence_max_tokens=m.confidence_max_tokens.at(cfg.scale),
                    continue_params=cfg.model(model).prefill_params)
    waiting.done()
    for r in rows:
        r["partition_key"] = pk
    wh.replace_partition("muso.responses", rows, {"partition_key": pk, "model": model})
    scored = [r for r in rows if r["status"] == "ok" and r["variant"] != "sc_path"]
    conversations = [r for r in rows if r["variant"] not in ("sc_vote", "sc_median")]  # aggregates call nothing
    checks = reply_check_results(
        wh, cfg.reply_checks, context.partition_key, total=len(conversations),
        failed=sum(r["status"] == CALL_FAILED for r in conversations),
        # a reply without a readable solution is scored (recall 0); undecided is a reply with no answer text at all
        undecided=sum(outcomes.undecided(r["parse_method"], r["status"]) for r in conversations),
        call_keys=[k for r in conversations for k in json.loads(r["call_keys"])])
    return dg.MaterializeResult(check_results=checks, metadata={
        "dagster/row_count": len(rows),
        "failed_calls": sum(r["status"] == CALL_FAILED for r in rows),
        "parse_failures": sum(r["parse_error"] is not None for r in scored),
        "truncated": sum(r["truncated"] for r in rows),
        "mean_recall": rounded(scoring.mean([r["recall"] for r in scored])),
        "recheck_outcomes": dg.MetadataValue.json(dict(Counter(str(r["recheck"]) for r in scored))),
    })


def muso_metrics(settings: SettingsResource, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Precision, recall, ECE against precision and against recall (10 equal-width bins),
    retention, correction and discovery (paper appendix A.2) per model x paradigm x variant x
    temperature x task x bin (level 0 = all levels), into `muso.metrics`; a recall-confidence
    reliability diagram in the metadata; views `muso.table1`, `muso.table2`."""
    cfg = settings.load()
    wh = warehouse.get()
    responses = wh.rows(f"SELECT * FROM {current('muso.responses')} "
                        "ORDER BY partition_key, model, paradigm, variant, instance_id, path")
    bins = {task: [(b.lo, b.hi) for b in task_bins(cfg, task)] for task in gen.TASKS}
    rows = protocol.metric_rows(responses, bins)
    wh.replace_partition("muso.metrics", rows)
    # what the configuration builds, not what the warehouse happens to hold
    built = {(task, b.lo, b.hi) for task, _, b in partitions(cfg).values()}
    shown = [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
              if k in ("model", "paradigm", "variant", "task", "level_label", "n_scored", "precision",
                       "recall", "mean_confidence", "ece_recall")} for r in rows if r["level"] == 0]
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(rows), **headline(wh, "muso"),
            "overall": table(shown),
            "reliability_diagram": _reliability_plot(responses),
        },
        check_results=check_results([protocol.coverage(cfg.evaluate, built, rows)]),
    )


class _Clock:
    """Seconds per named phase of a step, each lap from the previous one."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self._last
        self._last = now

    def restart(self) -> None:
        """The next lap counts from now (the time since was counted elsewhere)."""
        self._last = time.perf_counter()


def load_items(wh, partition_key: str) -> list[protocol.Item]:
    """A level's items as the protocol takes them, from the warehouse."""
    return protocol.items_from_rows(
        wh.rows("SELECT instance_id, task, level, level_lo, level_hi, question, parameters FROM muso.instances "
                "WHERE partition_key = ? ORDER BY instance_id", [partition_key]),
        wh.rows("SELECT s.instance_id, s.solution, i.task FROM muso.solutions s JOIN muso.instances i "
                "USING (instance_id) WHERE s.partition_key = ?", [partition_key]))


def _level_checks(wh, cfg: Config, pk: str, task: str, b: gen.LevelBin, quota: int) -> list:
    """The level's quality gates (generators.muso.level_checks) over what the warehouse now holds:
    the solutions counted per instance in SQL, read back only for the instances CP-SAT re-checks."""
    with wh.connect(read_only=True):  # one attach for the queries (each reuses it)
        dup = wh.rows("SELECT parameters->>'$.problem' AS problem, list(instance_id) AS ids FROM muso.instances "
                      "WHERE task = ? GROUP BY 1 HAVING count(*) > 1", [task])
        dup_ids = wh.rows("SELECT instance_id FROM muso.instances GROUP BY 1 HAVING count(*) > 1")
        instances = wh.rows("SELECT instance_id, solution_count, parameters FROM muso.instances "
                            "WHERE partition_key = ? ORDER BY instance_id", [pk])
        counts = {r["instance_id"]: r["n"] for r in wh.rows(
            "SELECT instance_id, count(*) AS n FROM muso.solutions WHERE partition_key = ? GROUP BY 1", [pk])}
        sample = [r["instance_id"] for r in instances[:cfg.muso.cpsat_check_per_level.at(cfg.scale)]]
        solutions = wh.rows("SELECT instance_id, solution FROM muso.solutions WHERE partition_key = ? "
                            "AND list_contains(?::VARCHAR[], instance_id)", [pk, sample]) if sample else []
    return gen.level_checks(task, b, quota, len(sample), instances, counts, solutions,
                            [d["ids"] for d in dup] + [d["instance_id"] for d in dup_ids])


def _reliability_plot(responses: list[dict]) -> dg.MetadataValue:
    """Recall-confidence reliability diagram (paper figure 3a) per model and paradigm."""
    series: dict[str, tuple[list[float], list[float]]] = {}
    for r in responses:
        if r["variant"] == "standard" and r["status"] == "ok" and r["confidence"] is not None:
            c, s = series.setdefault(f"{r['model']} / {r['paradigm']}", ([], []))
            c.append(r["confidence"] / 100)
            s.append(r["recall"])
    fig, ax = figure((5, 4))
    draw_reliability(ax, series)
    ax.set_title("MuSoBench recall vs confidence")
    return figure_markdown(fig)
