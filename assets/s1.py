"""S1-Bench assets (paper 002): the constructed benchmark, its evaluation, and the metrics."""

from collections import Counter

import dagster as dg

from assets.metadata import check_results, column_schema, figure_markdown, headline, table
from assets.partitions import models_partitions
from assets.release import released_s1_items
from assets.reply_checks import reply_check_results, reply_check_specs
from assets.resources import LLMResource, SettingsResource, WarehouseResource
from assets.versions import code_version
from configuration import Config
from evaluations.s1 import evaluate, evaluation_args, metric_rows
from generators.s1 import built_subcategories, load_registry, load_release
from generators.s1_construction import Budgets, Construction, item_checks
from reporting.figures import figure
from validators import outcomes
from validators.judge import Judge
from warehouse.s1 import LINEAGE_BROKEN, NOT_ALL_CORRECT
from warehouse.schema import current

GROUP = "s1"


ITEMS_VERSION, RESPONSES_VERSION, METRICS_VERSION = "s1-items-1", "s1-responses-1", "s1-metrics-1"


def build_assets(cfg: Config) -> list[dg.AssetsDefinition]:
    """The three S1-Bench assets; `s1_responses` is partitioned by the evaluated models (S1-Bench
    has one item set, no datasets)."""
    items = dg.asset(
        s1_items, name="s1_items", group_name=GROUP, metadata=column_schema("s1.items"), kinds={"duckdb"},
        code_version=code_version(ITEMS_VERSION, cfg, "s1"),
        check_specs=[dg.AssetCheckSpec("lineage_complete", asset="s1_items",
                                       description="every accepted item leads back to a generated candidate"),
                     dg.AssetCheckSpec("accepted_only_if_every_answer_correct", asset="s1_items",
                                       description="an accepted item has every validation answer correct"),
                     dg.AssetCheckSpec("every_subcategory_accepted", asset="s1_items",
                                       description="every built subcategory and language yielded candidates and "
                                                   "at least one accepted question (a warning otherwise)"),
                     *reply_check_specs("s1_items")])
    by_model = models_partitions(cfg)
    responses = dg.asset(s1_responses, name="s1_responses", group_name=GROUP, metadata=column_schema("s1.responses"),
                         deps=[items], kinds={"duckdb"}, partitions_def=by_model, check_specs=reply_check_specs("s1_responses", by_model),
                         code_version=code_version(RESPONSES_VERSION, cfg, "s1"))
    metrics = dg.asset(s1_metrics, name="s1_metrics", group_name=GROUP, metadata=column_schema("s1.metrics"),
                       deps=[responses], kinds={"duckdb"}, code_version=code_version(METRICS_VERSION, cfg, "s1"))
    return [items, responses, metrics]


def s1_items(context: dg.AssetExecutionContext, settings: SettingsResource, warehouse: WarehouseResource,
             llm: LLMResource) -> dg.MaterializeResult:
    """The S1-Bench construction loop (paper section 2): candidates from programmatic generators
    (exact answers) and configured LLM generators; discrimination (human decisions in
    `s1.annotations` win); MiniLM near-duplicate removal; posterior validation by the validator
    models (10 answers at each of 0, 0.2, 0.4), every one correct to accept; difficulty reduction
    for at most `max_rounds`. Writes `s1.candidates`, `s1.rounds`, `s1.validations`, `s1.items`."""
    cfg = settings.load()
    s = cfg.s1
    wh = warehouse.get()
    reg = load_registry()
    subs = built_subcategories(cfg, reg)
    annotations = {r["candidate_id"]: r for r in wh.rows("SELECT * FROM s1.annotations")}
    ledger = llm.ledger(context, wh)
    wh.begin_staging("s1.validations")  # validation rows are written as they are made, swapped in at the end
    build = Construction(
        ledger, reg, Judge(ledger, cfg.judge), cfg.seed, generators=s.generators, discriminators=s.discriminators,
        validators=s.validators or [cfg.judge], reducer=s.reducer or cfg.judge, temperatures=s.temperatures,
        samples_per_temperature=s.samples_per_temperature, max_rounds=s.max_rounds.at(cfg.scale),
        dedup_threshold=s.dedup_threshold, annotations=annotations,
        budgets=Budgets.at(cfg.scale, s.generation_max_tokens, s.discrimination_max_tokens, s.validator_max_tokens,
                           s.reduction_max_tokens),
        sink=lambda table, rows: wh.append_staging(table, rows),
    )
    loaded = released_s1_items(cfg)  # a Benchsmith release read back instead of building
    building = s.build and loaded is None
    if building:
        build.run(subs, s.languages, s.candidates_per_subcategory.at(cfg.scale), s.programmatic)
    released = (load_release(s.release, reg) if s.release else []) + (loaded or [])
    wh.replace_partitions({"s1.candidates": build.candidates, "s1.rounds": build.rounds,
                           "s1.items": build.items + released}, staged=["s1.validations"])
    # checks, from what the warehouse now holds
    items = wh.rows("SELECT * FROM s1.items")
    decisions = Counter(r["decision"] for r in build.rounds if r["stage"] == "decision")
    checks = item_checks(subs if building else [], s.languages, build.candidates, items,
                         [r["item_id"] for r in wh.rows(LINEAGE_BROKEN)],
                         [r["candidate_id"] for r in wh.rows(NOT_ALL_CORRECT)])
    return dg.MaterializeResult(
        data_version=dg.DataVersion(wh.item_set_version("s1.items")),
        metadata={"dagster/row_count": len(items), "candidates": len(build.candidates),
                  "decisions": dg.MetadataValue.json(dict(decisions)),
                  "accepted_by_subcategory": dg.MetadataValue.json(dict(Counter(r["subcategory"] for r in items)))},
        check_results=[
            *check_results(checks),
            *reply_check_results(wh, cfg.reply_checks, None, **_validation_counts(wh)),
        ],
    )


def _validation_counts(wh) -> dict:
    [c] = wh.rows("SELECT count(*) AS total, count(*) FILTER (method IN (SELECT unnest(?::VARCHAR[]))) AS failed, "
                  "count(*) FILTER (method IN (SELECT unnest(?::VARCHAR[]))) AS undecided, "
                  "list(call_key) AS keys FROM s1.validations", [sorted(outcomes.FAILED), sorted(outcomes.NO_ANSWER)])
    return {"total": c["total"], "failed": c["failed"], "undecided": c["undecided"], "call_keys": c["keys"] or []}


def s1_responses(context: dg.AssetExecutionContext, settings: SettingsResource, warehouse: WarehouseResource,
                    llm: LLMResource) -> dg.MaterializeResult:
    """One evaluated model (the partition) answers every accepted item k times (temperature 0.6, top_p 0.95) and
    greedily; format type, thinking / answer split, correctness (exact or judge; a reasoning
    model's malformed replies are not correct and not judged), tokens, difficulty awareness and
    redundancy per response, into `s1.responses` (paper section 3)."""
    cfg = settings.load()
    wh = warehouse.get()
    items = wh.rows("SELECT * FROM s1.items ORDER BY item_id")
    ledger = llm.ledger(context, wh)
    judge = Judge(ledger, cfg.judge)
    model = context.partition_key
    rows = evaluate(ledger, model, items, judge, **evaluation_args(cfg, model))
    wh.replace_partition("s1.responses", rows, {"model": model})
    return dg.MaterializeResult(
        metadata={"dagster/row_count": len(rows), "items": len(items),
                  "format_types": dg.MetadataValue.json(dict(Counter(str(r["format_type"]) for r in rows))),
                  "methods": dg.MetadataValue.json(dict(Counter(r["method"] for r in rows)))},
        check_results=reply_check_results(
            wh, cfg.reply_checks, model, total=len(rows),
            failed=sum(outcomes.failed(r["method"]) for r in rows),
            undecided=sum(outcomes.undecided(r["method"]) for r in rows),
            call_keys=[r["call_key"] for r in rows]),
    )


def s1_metrics(settings: SettingsResource, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """pass@1, acc@k, f-acc, greedy accuracy, format rates, mean response tokens (endless replies
    left out), difficulty-awareness shares and thinking redundancy per model, overall, per
    category, subcategory, language and language x category, into `s1.metrics`; views
    `s1.table3`, `s1.table5`, `s1.table8`, `s1.table19`, `s1.table20`; a per-subcategory token
    heatmap in the metadata."""
    cfg = settings.load()
    wh = warehouse.get()
    responses = wh.rows(f"SELECT * FROM {current('s1.responses')}")
    rows = []
    for model in sorted({r["model"] for r in responses}):
        rows += metric_rows(model, [r for r in responses if r["model"] == model], cfg.s1.k)
    wh.replace_partition("s1.metrics", rows)
    overall = [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k in ("model", "metric", "category", "value", "n")}
               for r in rows if r["level"] == "all"]
    return dg.MaterializeResult(metadata={"dagster/row_count": len(rows), **headline(wh, "s1"),
                                          "overall": table(overall),
                                          "token_heatmap": _heatmap(rows)})


def _heatmap(rows: list[dict]) -> dg.MetadataValue:
    """Mean response tokens per model (rows) and subcategory (columns), paper figure 9."""
    cells = {(r["model"], r["scope"]): r["value"] for r in rows
             if r["level"] == "subcategory" and r["metric"] == "mean_tokens" and r["value"] is not None}
    models = sorted({m for m, _ in cells})
    subs = sorted({s for _, s in cells})
    fig, ax = figure((max(4, 0.5 * len(subs) + 2), max(2, 0.5 * len(models) + 1.5)))
    if cells:
        grid = [[cells.get((m, s), float("nan")) for s in subs] for m in models]
        im = ax.imshow(grid, aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(subs)), subs, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(models)), models, fontsize=7)
        fig.colorbar(im, ax=ax, label="mean tokens")
    ax.set_title("S1-Bench response tokens by subcategory")
    return figure_markdown(fig)
