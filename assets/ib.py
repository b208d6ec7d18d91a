"""Instruction Boundary assets (paper 003): items per dataset, responses per setting, bias metrics.

Partitions: one per configured dataset, plus `miscellany` (the disturbing-miscellany items).
"""

from collections import Counter

import dagster as dg

from assets.metadata import check_results, column_schema, figure_markdown, headline, stacked_bar_chart, table
from assets.partitions import by_model, items_partitions, model_slice
from assets.release import released_tables
from assets.reply_checks import reply_check_results, reply_check_specs
from assets.resources import LLMResource, SettingsResource, WarehouseResource
from assets.versions import code_version
from configuration import Config
from evaluations.ib import Item, Runner, all_metric_rows, coverage, slice_args
from generators import ib as gen
from reporting.figures import figure, legend
from validators import outcomes
from warehouse.schema import current

GROUP = "ib"
# bumped when the responses or the metrics computed from the same inputs change
RESPONSES_VERSION, METRICS_VERSION = "ib-responses-1", "ib-metrics-1"


def build_assets(cfg: Config) -> list[dg.AssetsDefinition]:
    """The three Instruction Boundary assets: items per dataset, responses per (dataset, model) slice, metrics."""
    datasets = items_partitions(cfg, "ib")
    slices = by_model("dataset", datasets, cfg)
    items = dg.asset(
        ib_items, name="ib_items", group_name=GROUP, metadata=column_schema("ib.items"), partitions_def=datasets,
        kinds={"duckdb"}, code_version=code_version(gen.ITEMS_VERSION, cfg, "ib"),
        check_specs=[dg.AssetCheckSpec("tense_sparse_balanced", asset="ib_items", partitions_def=datasets,
                                       description="complete items with tense and sparse labels differ by at "
                                                   "most one (multi-select items are all sparse: table 3's GR3)"),
                     dg.AssetCheckSpec("gold_among_options", asset="ib_items", partitions_def=datasets,
                                       description="every gold option number is one of the item's options")])
    responses = dg.asset(
        ib_responses, name="ib_responses", group_name=GROUP, metadata=column_schema("ib.responses"),
        partitions_def=slices, deps=[items], code_version=code_version(RESPONSES_VERSION, cfg, "ib"),
        kinds={"duckdb"}, check_specs=reply_check_specs("ib_responses", slices))
    metrics = dg.asset(
        ib_metrics, name="ib_metrics", group_name=GROUP, metadata=column_schema("ib.metrics"), deps=[responses],
        kinds={"duckdb"}, code_version=code_version(METRICS_VERSION, cfg, "ib"),
        check_specs=[dg.AssetCheckSpec("every_model_setting_form", asset="ib_metrics",
                                       description="every evaluated model has accuracy for every setting and form")])
    return [items, responses, metrics]


def ib_items(context: dg.AssetExecutionContext, settings: SettingsResource,
             warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Judging, single- and multiple-choice items with tense and sparse labels, each in a complete and
    an insufficient variant (paper appendix A.3), choice questions fitted to the configured option
    count (questions that cannot supply it counted in the metadata), or, for `miscellany`,
    ten-option questions asked with 1..9 wrong options; options numbered 1..n, gold as option
    numbers; into `ib.items` (sources into `sources.records`)."""
    cfg = settings.load()
    name = context.partition_key
    spec = cfg.ib.miscellany if name == gen.MISCELLANY else cfg.ib.datasets[name]
    count = spec.count.at(cfg.scale)
    report: dict = {}
    released = released_tables(cfg, "ib", name)
    if released is not None:  # a release read back: its items, not built again
        records, rows = [], released["ib.items"]
    else:
        bases, records = gen.load_bases(name, spec, count, cfg.seed, report)
        rows = (gen.miscellany_items(name, bases, count, cfg.seed) if name == gen.MISCELLANY
                else gen.build_items(name, bases, count, cfg.seed, spec.options, spec.true_options, report,
                                   spec.combined_option))
        rows = gen.stored_rows(rows)
    source_rows = [{**rec.row(), "dataset": f"ib:{name}", "source": rec.dataset} for rec in records]
    wh = warehouse.get()
    wh.replace_partitions({"ib.items": rows}, {"dataset": name})
    wh.replace_partitions({"sources.records": source_rows}, {"dataset": f"ib:{name}"})
    stored = wh.rows("SELECT * FROM ib.items WHERE dataset = ?", [name])
    complete = Counter(r["label_type"] for r in stored if r["variant"] == "complete")
    version = dg.DataVersion(wh.item_set_version("ib.items", {"dataset": name}))
    return dg.MaterializeResult(
        data_version=version,
        metadata={"dagster/row_count": len(stored),
                  # source rows that could not serve (one option, no correct answer), by reason
                  "skipped_source_rows": dg.MetadataValue.json(report.get("skipped", {})),
                  # questions that could not supply the configured options (too few, one true answer)
                  "questions_left_out": dg.MetadataValue.json(report.get("unfit", {})),
                  "variants": dg.MetadataValue.json(dict(Counter(r["variant"] for r in stored))),
                  "label_types": dg.MetadataValue.json(dict(complete))},
        check_results=check_results(gen.item_checks(name, spec, stored)),
    )


def ib_responses(context: dg.AssetExecutionContext, settings: SettingsResource,
                 warehouse: WarehouseResource, llm: LLMResource) -> dg.MaterializeResult:
    """One evaluated model asked this dataset's items (partition `dataset|model`) under each
    configured setting (paper table 2); the prompts into `ib.prompts` (polished rewrites included), the checked answers into
    `ib.responses` with the extraction method (keywords first, the judge model for the rest)."""
    cfg = settings.load()
    name, model = model_slice(context, "dataset")
    wh = warehouse.get()
    items = [Item.from_row(r) for r in wh.rows("SELECT * FROM ib.items WHERE dataset = ? ORDER BY item_id", [name])]
    ledger = llm.ledger(context, wh)
    asked, miscellany, settings_here, params = slice_args(cfg, name, items)
    runner = Runner(ledger, model, cfg.judge, cfg.ib.polisher or cfg.judge, params)
    runner.run(asked, miscellany, settings_here)
    prompts, responses = runner.prompts, runner.responses
    for r in (*prompts, *responses):
        r["dataset"] = name
    wh.replace_partitions({"ib.prompts": prompts, "ib.responses": responses}, {"dataset": name, "model": model})
    return dg.MaterializeResult(
        metadata={"dagster/row_count": len(responses), "correct": sum(bool(r["correct"]) for r in responses),
                  "methods": dg.MetadataValue.json(dict(Counter(r["method"] for r in responses)))},
        check_results=reply_check_results(
            wh, cfg.reply_checks, context.partition_key, total=len(responses),
            failed=sum(outcomes.failed(r["method"]) for r in responses),
            undecided=sum(outcomes.undecided(r["method"], r["output_category"]) for r in responses),
            call_keys=[r["call_key"] for r in responses]),
    )


def ib_metrics(settings: SettingsResource, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Acc, SR, GR, RR, RS, OR, OR_T, OR_S, FR and the judge's share per model x setting x dataset
    form (paper section 2.2, table 7), and disturbing-miscellany accuracy by number of options
    (table 6), into `ib.metrics`; views `ib.summary` and `ib.miscellany`; charts in the metadata."""
    cfg = settings.load()
    wh = warehouse.get()
    responses = wh.rows(f"SELECT * FROM {current('ib.responses')} ORDER BY dataset, model, setting, item_id")
    rows = all_metric_rows(responses)
    wh.replace_partition("ib.metrics", rows)
    forms = {spec.form for spec in cfg.ib.datasets.values()}  # configured: an empty warehouse is no pass
    return dg.MaterializeResult(
        metadata={"dagster/row_count": len(rows), **headline(wh, "ib"),
                  "summary": table(wh.rows("SELECT * FROM ib.summary")),
                  "output_distribution": _output_chart(rows),
                  "accuracy_by_options": _options_chart(rows)},
        check_results=check_results([coverage(cfg.evaluate, cfg.ib.settings, forms, rows)]),
    )


def _output_chart(rows: list[dict]) -> dg.MetadataValue:
    """Output-label distribution (OR) under the vanilla setting, per model and form (figure 6)."""
    bars: dict[str, dict[str, float]] = {}
    for r in rows:
        if r["metric"] == "OR" and r["setting"] == "vanilla":
            bars.setdefault(f"{r['model']}\n{r['form']}", {})[r["category"]] = r["value"] or 0.0
    return stacked_bar_chart(bars, "Instruction Boundary: output distribution (vanilla)")


def _options_chart(rows: list[dict]) -> dg.MetadataValue:
    """Disturbing-miscellany accuracy by number of options (figure 3, left)."""
    fig, ax = figure((5, 3.5))
    for model in sorted({r["model"] for r in rows}):
        pts = sorted((int(r["category"]), r["value"]) for r in rows
                     if r["model"] == model and r["metric"] == "Acc_by_options" and r["value"] is not None)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=model)
    ax.set_xlabel("options shown")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.set_title("Disturbing miscellany")
    legend(ax, fontsize=7)
    return figure_markdown(fig)
