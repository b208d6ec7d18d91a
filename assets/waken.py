"""WakenLLM assets (paper 000): items per dataset, the pipeline's outcomes per model, metrics.

Partitions: one per configured dataset (`waken.datasets` keys).
"""

from collections import Counter

import dagster as dg

from assets.metadata import check_results, column_schema, headline, stacked_bar_chart, table
from assets.partitions import by_model, items_partitions, model_slice
from assets.release import released_tables
from assets.reply_checks import reply_check_results, reply_check_specs
from assets.resources import LLMResource, SettingsResource, WarehouseResource
from assets.versions import code_version
from configuration import Config
from evaluations.waken import Pipeline, items_from_rows, pipeline_params
from evaluations.waken_metrics import all_metric_rows, coverage, identity_violations
from generators.waken import ITEMS_VERSION, ItemsError, build_items, counts_reached, fol_checks, item_checks, load_records, stored_rows
from reporting.panels.waken import RATE_COLOURS
from validators import outcomes
from validators.judge import Judge, unknown_verifier
from warehouse.schema import current

GROUP = "waken"
# bumped when the outcomes or the metrics computed from the same inputs change
OUTCOMES_VERSION, METRICS_VERSION = "waken-outcomes-1", "waken-metrics-1"


def build_assets(cfg: Config) -> list[dg.AssetsDefinition]:
    """The three WakenLLM assets: items per dataset, outcomes per (dataset, model) slice, metrics."""
    datasets = items_partitions(cfg, "waken")
    slices = by_model("dataset", datasets, cfg)
    items = dg.asset(
        waken_items, name="waken_items", group_name=GROUP, metadata=column_schema("waken.items"),
        partitions_def=datasets, kinds={"duckdb"}, code_version=code_version(ITEMS_VERSION, cfg, "waken"),
        check_specs=[dg.AssetCheckSpec(n, asset="waken_items", partitions_def=datasets, description=d)
                     for n, d in _ITEM_CHECKS.items()])
    outcomes = dg.asset(
        waken_outcomes, name="waken_outcomes", group_name=GROUP, metadata=column_schema("waken.outcomes"),
        partitions_def=slices, deps=[items], code_version=code_version(OUTCOMES_VERSION, cfg, "waken"),
        kinds={"duckdb"}, check_specs=[dg.AssetCheckSpec("converting_identities", asset="waken_outcomes",
                                                         partitions_def=slices,
                                                         description="TC/FC/UC identities of every stage hold"),
                                       *reply_check_specs("waken_outcomes", slices)])
    metrics = dg.asset(
        waken_metrics, name="waken_metrics", group_name=GROUP, metadata=column_schema("waken.metrics"),
        deps=[outcomes], kinds={"duckdb"}, code_version=code_version(METRICS_VERSION, cfg, "waken"),
        check_specs=[dg.AssetCheckSpec("every_model_and_dataset", asset="waken_metrics",
                                       description="every evaluated model has outcomes on every built dataset")])
    return [items, outcomes, metrics]


_ITEM_CHECKS = {
    "solvable_unknown_one_to_one": "solvable and Unknown items differ in number by at most one",
    "no_duplicate_items": "no item id occurs twice",
    "paper_counts_reached": ("the configured count of items was built (per ScienceQA topic: solvable and Unknown "
                             "wanted against built); a warning: a release may not supply it honestly"),
    "gold_label_matches_proof": "FOLIO: gold labels that z3 contradicts from the FOL",
    "folio_fol_read": ("FOLIO: every row of the source file has its FOL read; per file rows, parsed, agreeing "
                       "with gold (waken.fol_checks)"),
}


def waken_items(context: dg.AssetExecutionContext, settings: SettingsResource,
                warehouse: WarehouseResource, llm: LLMResource) -> dg.MaterializeResult:
    """Items of one dataset into `waken.items`: half solvable, half Unknown (paper section
    3.1), seeded by (seed, dataset); from the offline FLD-style generator (labels confirmed by
    the prover) or from a configured source, stored whole in `sources.records`. ScienceQA
    Unknown items lose the two most supporting sentences of their own context (hint or passage)
    and are kept only when the judge model finds no unique answer left, neither with the cut
    context nor from the question and options alone (failures replaced from the pool; appendix
    C); a release that cannot supply the count builds fewer, 1:1 (`paper_counts_reached`); every
    draft and its verdict goes to `waken.unknown_drafts`, also when none passes and the step fails."""
    cfg = settings.load()
    name = context.partition_key
    spec = cfg.waken.datasets[name]
    wh = warehouse.get()
    drafts: list[dict] = []
    released = released_tables(cfg, "waken", name)
    if released is not None:  # a release read back: its items, not built again
        records, rows = [], released["waken.items"]
    else:
        records = load_records(spec)
        verify = unknown_verifier(Judge(llm.ledger(context, wh), cfg.judge)) if spec.kind == "scienceqa" else None
        try:
            rows = build_items(name, spec, spec.count.at(cfg.scale), cfg.seed, records, verify, drafts)
        except ItemsError:
            if drafts:  # the verdicts are kept; the dataset's items are left as they were
                wh.replace_partitions({"waken.unknown_drafts": drafts}, {"dataset": name})
            raise
        rows = stored_rows(rows)
    source_rows = [{**rec.row(), "dataset": f"waken:{name}", "source": rec.dataset} for rec in records]
    checks = fol_checks(name, records) if spec.kind == "folio" else []
    wh.replace_partitions({"waken.items": rows, "waken.fol_checks": checks, "waken.unknown_drafts": drafts},
                          {"dataset": name})
    wh.replace_partitions({"sources.records": source_rows}, {"dataset": f"waken:{name}"})
    stored = wh.rows("SELECT sample_type, label, item_id, verified_label, extra FROM waken.items WHERE dataset = ?",
                     [name])
    return dg.MaterializeResult(
        data_version=dg.DataVersion(wh.item_set_version("waken.items", {"dataset": name})),
        metadata={"dagster/row_count": len(stored), "source_records": len(source_rows),
                  "labels": dg.MetadataValue.json(dict(Counter(r["label"] for r in stored))),
                  "unknown_drafts": dg.MetadataValue.json(dict(Counter(d["verdict"] for d in drafts)))},
        check_results=check_results([*item_checks(stored, checks, spec.kind),
                                     counts_reached(stored, spec.count.at(cfg.scale), spec.topics)]),
    )


def waken_outcomes(context: dg.AssetExecutionContext, settings: SettingsResource,
                   warehouse: WarehouseResource, llm: LLMResource) -> dg.MaterializeResult:
    """One evaluated model through the WakenLLM pipeline on this dataset (partition
    `dataset|model`): direct pass,
    vague-perception extraction, two stimulation stages, Remind-then-Guide at each misguiding
    rate and with earlier reasoning, the ablation, the prompt baselines and the cause
    classification, into `waken.outcomes` (one row per model x item x step x setting)."""
    cfg = settings.load()
    name, model = model_slice(context, "dataset")
    wh = warehouse.get()
    items = items_from_rows(wh.rows(
        "SELECT item_id, form, label, context, question, extra FROM waken.items WHERE dataset = ? ORDER BY item_id",
        [name]))
    ledger = llm.ledger(context, wh)
    w = cfg.waken
    params = pipeline_params(cfg)
    pipe = Pipeline(ledger, model, cfg.judge, items, params["temperature"], w.ablation_temperature,
                    params["max_tokens"], cfg.seed, w.rtg_rounds, w.style_swap)
    rows = pipe.run(w.misguiding_rates, w.baselines)
    for r in rows:
        r["dataset"] = name
    wh.replace_partition("waken.outcomes", rows, {"dataset": name, "model": model})
    problems = identity_violations(rows)
    direct = [r for r in rows if r["step"] == "direct"]
    return dg.MaterializeResult(
        metadata={"dagster/row_count": len(rows),
                  "direct_methods": dg.MetadataValue.json(dict(Counter(r["method"] for r in direct))),
                  "steps": dg.MetadataValue.json(dict(Counter(r["step"] for r in rows)))},
        check_results=[dg.AssetCheckResult(check_name="converting_identities", passed=not problems,
                                           metadata={"violations": dg.MetadataValue.json(problems)}),
                       *reply_check_results(wh, cfg.reply_checks, context.partition_key, total=len(rows),
                                            failed=sum(outcomes.failed(r["outcome"]) for r in rows),
                                            undecided=sum(outcomes.undecided(r["method"], r["outcome"]) for r in rows),
                                            call_keys=[r["call_key"] for r in rows])],
    )


def waken_metrics(settings: SettingsResource, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """TC/FC/UC and their rates per sample type and stage, OCR, Conf, RPC, CGR, Deg,
    Acc(Direct), Acc(WakenLLM), baseline accuracies, vague-perception and cause shares
    (paper section 3, 5, appendix F) per model x dataset, into `waken.metrics`; the paper's
    tables as views in percent (`waken.table3`, `table5`, `table6`, `table8`, `table9_11`,
    `table12`); a converting-rate chart in the metadata."""
    cfg = settings.load()
    wh = warehouse.get()
    stored = wh.rows(f"SELECT * FROM {current('waken.outcomes')} ORDER BY dataset, model, step, setting, item_id")
    sizes = {(r["dataset"], r["t"]): r["n"] for r in wh.rows(
        "SELECT dataset, CASE WHEN sample_type = 'solvable' THEN 's' ELSE 'u' END AS t, count(*) AS n "
        "FROM waken.items GROUP BY ALL")}
    rows = all_metric_rows(stored, sizes, cfg.waken.misguiding_rates, cfg.waken.baselines)
    wh.replace_partition("waken.metrics", rows)
    return dg.MaterializeResult(
        metadata={"dagster/row_count": len(rows), **headline(wh, "waken"),
                  "table3": table(wh.rows("SELECT * FROM waken.table3")),
                  "converting_rates": _converting_chart(rows)},
        check_results=check_results([coverage(cfg.evaluate, list(cfg.waken.datasets), stored)]),
    )


def _converting_chart(rows: list[dict]) -> dg.MetadataValue:
    """Stacked TCR / FCR / UCR bars per model, dataset and stage (paper figure 4 style)."""
    bars: dict[str, dict[str, float]] = {}
    for r in rows:
        if r["metric"] in ("TCR", "FCR", "UCR") and r["sample_type"] == "all" and r["setting"] == "vanilla":
            bars.setdefault(f"{r['model']}\n{r['dataset']} s{r['stage']}", {})[r["metric"]] = r["value"] or 0.0
    return stacked_bar_chart(bars, "WakenLLM converting rates", "share of stage input", RATE_COLOURS)
