"""Instruction Boundary (paper 003): its tables, views and their documentation in the warehouse.

`warehouse/schema.py` creates them with every other family's (`configuration/families.py`).
"""

from __future__ import annotations

from warehouse.parts import WarehouseParts
from warehouse.sql import current_rows

TABLES: dict[str, str] = {
    # Instruction Boundary (paper 003). One partition = one dataset (or 'miscellany').
    "ib.items": """
        dataset        VARCHAR NOT NULL,
        item_id        VARCHAR NOT NULL,      -- '<base_id>:complete', ':insufficient', ':miscellany_<n>'
        base_id        VARCHAR NOT NULL,
        form           VARCHAR NOT NULL,      -- judging, single, multiple
        label_type     VARCHAR NOT NULL,      -- tense or sparse (the correct label's kind)
        variant        VARCHAR NOT NULL,      -- complete, insufficient, miscellany_<n options>
        options        JSON NOT NULL,         -- option texts, shown numbered 1..n
        gold           JSON NOT NULL,         -- correct option numbers, or "none"
        n_options      INTEGER NOT NULL,
        number_scheme  VARCHAR NOT NULL,
        context        VARCHAR,
        question       VARCHAR NOT NULL,
        removed_option VARCHAR,               -- insufficient items: the option taken out
        origin         VARCHAR NOT NULL,
        extra          JSON NOT NULL,
        dataset_seed   BIGINT NOT NULL,
        items_version  VARCHAR NOT NULL,
        item_digest    VARCHAR                -- digest of the item's content (the writer stamps it)
    """,
    "ib.prompts": """
        dataset  VARCHAR NOT NULL,
        setting  VARCHAR NOT NULL,
        item_id  VARCHAR NOT NULL,
        model    VARCHAR NOT NULL,            -- the model asked (polished prompts differ per polisher run)
        prompt   VARCHAR NOT NULL,            -- the last user message sent
        details  JSON NOT NULL,               -- suggested label, example label type, polished_by and original, turn
        item_digest VARCHAR                   -- the digest of the item it was made on
    """,
    "ib.responses": """
        dataset         VARCHAR NOT NULL,
        model           VARCHAR NOT NULL,
        setting         VARCHAR NOT NULL,
        item_id         VARCHAR NOT NULL,
        form            VARCHAR NOT NULL,
        label_type      VARCHAR NOT NULL,
        variant         VARCHAR NOT NULL,
        n_options       INTEGER NOT NULL,
        selected        JSON,                 -- option numbers chosen, "none", or NULL if undecided
        correct         BOOLEAN,              -- exact set match with the gold; NULL when the call or the judge failed
        method          VARCHAR NOT NULL,     -- how the reply was read (validators.read): final_answer, strict, conclusion,
                                              -- scan, judge, needs_judge, judge_no_answer, judge_unreadable, empty,
                                              -- unfinished_thinking; failures: call_failed, judge_failed
        output_category VARCHAR NOT NULL,     -- True/False/Unknown, single/multiple/all_wrong/combined, none, undecided,
                                              -- call_failed, judge_failed
        reply           VARCHAR,
        call_key        VARCHAR,
        error           VARCHAR,
        item_digest     VARCHAR               -- the digest of the item it was made on
    """,
    "ib.metrics": """
        model       VARCHAR NOT NULL,
        setting     VARCHAR NOT NULL,
        form        VARCHAR NOT NULL,         -- judging, single, multiple, all
        metric      VARCHAR NOT NULL,         -- Acc, SR, GR, RR, RS, OR, OR_T, OR_S, FR, judge_share, Acc_by_options
        category    VARCHAR NOT NULL,         -- OR: output category; Acc_by_options: number of options; else '-'
        value       DOUBLE,
        numerator   DOUBLE,
        denominator DOUBLE,                   -- answered items only: failed calls and judgements are not in it
        n_failed    INTEGER                   -- replies left out because the call or its judgement failed
    """,
}

_CHOICE = "form IN ('single', 'multiple')"
_JUDGING = "category IN ('True', 'False', 'Unknown')"
_CHOICES = "category IN ('single', 'multiple', 'combined', 'all_wrong', 'none')"


def _share(form: str, part: str, whole: str) -> str:
    """Figure 6's cell: the outputs of `part` among the decided outputs `whole` of the `form` items."""
    return (f"round(100 * coalesce(sum(numerator) FILTER ({form} AND {part}), 0) "
            f"/ nullif(sum(numerator) FILTER ({form} AND {whole}), 0), 2)")


VIEWS: dict[str, str] = {
    # Paper table 3 / figure 7 layout: accuracy, stability, generalisation, robustness per setting.
    "ib.summary": """
        SELECT model, setting, form,
               max(value) FILTER (metric = 'Acc') AS acc,
               max(value) FILTER (metric = 'SR') AS sr,
               max(value) FILTER (metric = 'GR') AS gr,
               max(value) FILTER (metric = 'RR') AS rr,
               max(value) FILTER (metric = 'RS') AS rs,
               max(value) FILTER (metric = 'FR') AS fr,
               max(value) FILTER (metric = 'judge_share') AS judge_share
        FROM ib.metrics WHERE category = '-'
        GROUP BY model, setting, form ORDER BY model, setting, form
    """,
    # Paper table 3 layout (percent): judging Acc_b^1 = (SR1 + GR1) / 2; choices Acc_b^2 = the mean of SR2
    # (single-choice tense), GR2 (single-choice sparse) and GR3 (multiple-choice sparse). Disturbing
    # miscellany has its own table, 6 (`ib.miscellany`).
    "ib.table3": """
        WITH m AS (
            SELECT model, setting,
                   max(value) FILTER (form = 'judging' AND metric = 'SR') AS sr1,
                   max(value) FILTER (form = 'judging' AND metric = 'GR') AS gr1,
                   max(value) FILTER (form = 'single' AND metric = 'SR') AS sr2,
                   max(value) FILTER (form = 'single' AND metric = 'GR') AS gr2,
                   max(value) FILTER (form = 'multiple' AND metric = 'GR') AS gr3
            FROM ib.metrics WHERE category = '-' AND setting <> 'disturbing_miscellany' GROUP BY model, setting)
        SELECT model, setting,
               round(100 * (sr1 + gr1) / 2, 2) AS "Acc_b^1", round(100 * sr1, 2) AS "SR1", round(100 * gr1, 2) AS "GR1",
               round(100 * (sr2 + gr2 + gr3) / 3, 2) AS "Acc_b^2", round(100 * sr2, 2) AS "SR2",
               round(100 * gr2, 2) AS "GR2", round(100 * gr3, 2) AS "GR3"
        FROM m ORDER BY model, setting
    """,
    # Figure 7: the robustness score, the judging harmonic mean of SR and GR (percent).
    "ib.figure7": """
        SELECT model, setting, round(100 * value, 2) AS "RS"
        FROM ib.metrics WHERE form = 'judging' AND metric = 'RS' AND category = '-' ORDER BY model, setting
    """,
    # Paper table 6 layout: disturbing-miscellany accuracy (percent) by the number of wrong options kept
    # beside the correct one (its columns 1..9); `ib.miscellany_items` has the counts behind each.
    "ib.miscellany": "SELECT model, " + ", ".join(
        f"round(100 * max(value) FILTER (metric = 'Acc_by_options' AND category = '{k + 1}'), 2) AS \"{k}\""
        for k in range(1, 10)) + " FROM ib.metrics WHERE metric = 'Acc_by_options' GROUP BY model ORDER BY model",
    "ib.miscellany_items": """
        SELECT model, CAST(category AS INTEGER) - 1 AS wrong_options, CAST(category AS INTEGER) AS n_options,
               value AS accuracy, numerator AS correct, denominator AS items
        FROM ib.metrics WHERE metric = 'Acc_by_options' ORDER BY model, n_options
    """,
    # Paper table 7: how often the judge was needed (percent of answered replies) on the choice items, the
    # single- and multiple-choice replies pooled: its values are multiples of 1/450 (34 of 35 cells), the
    # 450 choice items (ScienceQA 150, MMLU 50, CSQA 50, TruthfulQA 50, MultiRC 150); the judging items
    # are not in it.
    "ib.table7": "SELECT model, " + ", ".join(
        f"round(100 * sum(numerator) FILTER (setting = '{s}') / nullif(sum(denominator) FILTER (setting = '{s}'), 0), "
        f"2) AS \"{label}\"" for s, label in (
            ("vanilla", "Vanilla Scenario"), ("missing_choices", "Missing-Choices"), ("few_shot", "Few-shot Learning"),
            ("vagueness", "Vagueness"), ("prompt_polishing", "Prompt-Polishing"),
            ("multi_turn", "Multi-turn Dialogue"), ("conformity", "Conformity")))
        + " FROM ib.metrics WHERE metric = 'judge_share' AND form IN ('single', 'multiple') GROUP BY model ORDER BY model",
    # Paper figure 6: the output distribution (percent), judging outputs over the judging items and choice
    # outputs over the single- and multiple-choice items, per model and setting (the figure does not say
    # which settings it pools; filter setting). Each group is over its decided outputs, so its columns sum
    # to 100 (as the figure's Single + Multiple + All Wrong do for every model): a stated "no correct
    # answer" is All Wrong beside the "all other options are false" option, the combined option (the true
    # answers in one option) is Multiple Choices; a share of none is 0, not NULL.
    "ib.figure6": f"""
        SELECT model, setting,
               {_share("form = 'judging'", "category = 'Unknown'", _JUDGING)} AS "Unknown (%)",
               {_share("form = 'judging'", "category = 'True'", _JUDGING)} AS "True (%)",
               {_share("form = 'judging'", "category = 'False'", _JUDGING)} AS "False (%)",
               {_share(_CHOICE, "category = 'single'", _CHOICES)} AS "Single Choice (%)",
               {_share(_CHOICE, "category IN ('multiple', 'combined')", _CHOICES)} AS "Multiple Choices (%)",
               {_share(_CHOICE, "category IN ('all_wrong', 'none')", _CHOICES)} AS "All Wrong (%)"
        FROM ib.metrics WHERE metric = 'OR' GROUP BY model, setting ORDER BY model, setting
    """,
}

TABLE_DOCS: dict[str, str] = {
    "ib.items": "Instruction Boundary items: judging and choice questions with tense or sparse correct labels.",
    "ib.prompts": "The prompt each model was sent per setting and item (suggestions, examples, rewrites in details).",
    "ib.responses": "One Instruction Boundary answer per model x setting x item, read and scored.",
    "ib.metrics": "Instruction Boundary metrics (Acc, SR, GR, RR, RS, OR, FR, judge share) per model x setting x form.",
    "ib.summary": "Instruction Boundary metrics per model x setting x form in one row (fractions).",
    "ib.table3": "Instruction Boundary paper table 3 (percent): Acc_b^1, SR1, GR1, Acc_b^2, SR2, GR2, GR3.",
    "ib.figure7": "Instruction Boundary figure 7 (percent): the judging robustness score RS.",
    "ib.miscellany": ("Instruction Boundary paper table 6 (percent): disturbing-miscellany accuracy by the number of "
                      "wrong options kept beside the correct one (1..9)."),
    "ib.miscellany_items": "Instruction Boundary disturbing miscellany per option count, with the items behind it.",
    "ib.table7": "Instruction Boundary paper table 7 (percent): judge usage per setting over the choice items.",
    "ib.figure6": "Instruction Boundary paper figure 6 (percent): output distribution per model and setting.",
}

# The items table, the columns naming one item, and the reply tables made on them (`report.stale`
# lists stale `ib.responses`; `ib.prompts` are stamped too, and follow their responses).
ITEM_KEYS: dict[str, tuple[str, ...]] = {"ib.items": ("dataset", "item_id")}
MADE_ON: dict[str, str] = {"ib.responses": "ib.items", "ib.prompts": "ib.items"}
STALE_LISTED: tuple[str, ...] = ("ib.responses",)

# `report.headline`'s rows: accuracy per setting, pooled over the forms.
HEADLINE = """
    SELECT 'ib' AS family, model, setting AS scope, 'Acc' AS metric,
           sum(numerator) / nullif(sum(denominator), 0) AS value, CAST(sum(denominator) AS BIGINT) AS n
    FROM ib.metrics WHERE metric = 'Acc' AND category = '-' GROUP BY model, setting"""

# The units each headline number rests on (`report.units`, reporting/stats.py): one per item and
# setting, its answered replies (the miscellany asks one question several times: they form one unit).
HEADLINE_UNITS = f"""
    SELECT 'ib' AS family, model, setting AS scope, 'Acc' AS metric, dataset || ':' || item_id AS unit,
           CAST(count(*) FILTER (correct) AS DOUBLE) AS num, CAST(count(*) AS DOUBLE) AS den, NULL::DOUBLE AS conf
    FROM {current_rows('ib.responses', 'ib.items', ITEM_KEYS['ib.items'])}
    WHERE correct IS NOT NULL GROUP BY ALL"""


# `report.item_answers`' rows: each model's answer and the gold per unit of `Acc` (decided replies only),
# from which `report.item_stats` flags items whose models agree on another answer than the gold.
ITEM_ANSWERS = f"""
    SELECT 'ib' AS family, r.model, r.setting AS scope, 'Acc' AS metric, r.dataset || ':' || r.item_id AS unit,
           CAST(r.selected AS VARCHAR) AS answer, CAST(i.gold AS VARCHAR) AS gold, r.correct
    FROM {current_rows('ib.responses', 'ib.items', ITEM_KEYS['ib.items'], 'r')}
    JOIN ib.items i ON i.dataset = r.dataset AND i.item_id = r.item_id
    WHERE r.selected IS NOT NULL AND r.correct IS NOT NULL"""

# `report.near_duplicates`' texts: one per base question (its variants share it on purpose).
ITEM_TEXTS = """
    SELECT 'ib' AS family, dataset AS split, base_id AS item, min(coalesce(context || ' ', '') || question) AS text
    FROM ib.items GROUP BY dataset, base_id"""

# `report.mechanisms`' rows: replies decided per setting (over the current replies).
MECHANISMS = f"""
    SELECT 'ib' AS family, model, setting AS scope, 'decided replies' AS mechanism,
           count(*) FILTER (output_category <> 'undecided') > 0 AS reached,
           count(*) FILTER (output_category <> 'undecided') || ' of ' || count(*) || ' replies decided' AS detail
    FROM {current_rows('ib.responses', 'ib.items', ITEM_KEYS['ib.items'])} GROUP BY model, setting"""

# The view columns this family's views name.
VIEW_COLUMN_DOCS: dict[str, str] = {
    "Acc_b^1": "judging balanced accuracy (SR1 + GR1) / 2, percent",
    "Acc_b^2": "choice balanced accuracy (SR2 + GR2 + GR3) / 3, percent",
    "SR1": "judging accuracy on tense-label items, percent",
    "GR1": "judging accuracy on sparse-label items, percent",
    "SR2": "single-choice accuracy on tense-label items, percent",
    "GR2": "single-choice accuracy on sparse-label items, percent",
    "GR3": "multiple-choice accuracy on sparse-label items, percent",
    "RS": "robustness score: harmonic mean of SR and GR, percent",
    "accuracy": "accuracy (fraction)",
    "items": "items behind the accuracy",
}

# The replies a headline scope rests on (scopes as `report.headline` names them), each with its item,
# how it was read and the verdict, for a model's samples page: current replies only.
SAMPLES = f"""
        SELECT r.setting AS scope, r.dataset || ':' || r.item_id AS item, r.dataset AS step, i.context, i.question,
               r.reply, r.method AS how_read, CAST(r.selected AS VARCHAR) AS answer, CAST(i.gold AS VARCHAR) AS gold,
               CASE WHEN r.correct THEN 'correct' WHEN NOT r.correct THEN 'wrong' ELSE r.output_category END AS verdict,
               json_array(r.call_key)::VARCHAR AS call_keys
        FROM {current_rows('ib.responses', 'ib.items', ITEM_KEYS['ib.items'], 'r')}
        JOIN ib.items i ON i.dataset = r.dataset AND i.item_id = r.item_id
        WHERE r.model = ? ORDER BY scope, item"""

# what the cross-family code reads (configuration/families.py: Parts.warehouse)
PARTS = WarehouseParts(tables=TABLES, views=VIEWS, table_docs=TABLE_DOCS, view_column_docs=VIEW_COLUMN_DOCS,
                       item_keys=ITEM_KEYS, made_on=MADE_ON, headline=HEADLINE, mechanisms=MECHANISMS,
                       samples=SAMPLES, headline_units=HEADLINE_UNITS, item_answers=ITEM_ANSWERS,
                       item_texts=ITEM_TEXTS, stale_listed=STALE_LISTED)
