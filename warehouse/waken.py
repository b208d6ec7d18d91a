"""WakenLLM (paper 000): its tables, views and their documentation in the warehouse.

`warehouse/schema.py` creates them with every other family's (`configuration/families.py`).
"""

from __future__ import annotations

import re

from warehouse.parts import WarehouseParts
from warehouse.sql import current_rows
from warehouse.sql import pct as _pct

TABLES: dict[str, str] = {
    # WakenLLM (paper 000). One partition = one dataset.
    "waken.items": """
        dataset         VARCHAR NOT NULL,     -- configured name, e.g. 'fld', 'folio'
        item_id         VARCHAR NOT NULL,
        kind            VARCHAR NOT NULL,     -- 'fld' or 'folio'
        form            VARCHAR NOT NULL,     -- 'fact' or 'story' (decides the stimulation style)
        sample_type     VARCHAR NOT NULL,     -- 'solvable' or 'unsolvable'
        label           VARCHAR NOT NULL,     -- True / False / Unknown
        original_label  VARCHAR,              -- upstream spelling (PROVED, Uncertain, ...)
        verified_label  VARCHAR,              -- FOLIO: label proved from the FOL by z3; NULL if not checked
        context         VARCHAR NOT NULL,
        question        VARCHAR NOT NULL,     -- the hypothesis / conclusion
        origin          VARCHAR NOT NULL,     -- 'generator:fld', hub id or file
        extra           JSON NOT NULL,        -- depth, distractors, FOL, source ids
        dataset_seed    BIGINT NOT NULL,
        items_version   VARCHAR NOT NULL,
        item_digest     VARCHAR               -- digest of the item's content (the writer stamps it)
    """,
    "waken.fol_checks": """
        dataset     VARCHAR NOT NULL,     -- configured name (the partition)
        origin      VARCHAR NOT NULL,     -- the source file or hub id the row came from
        row_number  INTEGER NOT NULL,     -- row position in the source file
        source_id   VARCHAR NOT NULL,     -- the row's id in its source
        story_id    VARCHAR,              -- FOLIO story the example belongs to
        gold        VARCHAR,              -- the file's label as True / False / Unknown
        parsed      BOOLEAN NOT NULL,     -- every premise and the conclusion were read
        reason      VARCHAR,              -- why not: the formula and the position
        warnings    JSON NOT NULL,        -- repairs made while reading (a dropped or added bracket)
        proved      VARCHAR,              -- what z3 proved: True / False / Unknown / Inconsistent / Timeout
        agrees      BOOLEAN               -- proved = gold; NULL when the FOL was not read
    """,
    "waken.unknown_drafts": """
        dataset     VARCHAR NOT NULL,     -- configured name (the partition)
        item_id     VARCHAR NOT NULL,     -- the Unknown item the draft would become
        source_id   VARCHAR NOT NULL,     -- the ScienceQA row it was made from
        topic       VARCHAR,              -- the row's ScienceQA topic
        verdict     VARCHAR NOT NULL,     -- accepted, rejected (a unique answer remains), unverified, failed
        evidence    VARCHAR               -- what the judge said (and its call), or why the call failed
    """,
    "waken.outcomes": """
        dataset      VARCHAR NOT NULL,
        model        VARCHAR NOT NULL,
        item_id      VARCHAR NOT NULL,
        sample_type  VARCHAR NOT NULL,        -- 's' solvable, 'u' unsolvable
        gold         VARCHAR NOT NULL,
        step         VARCHAR NOT NULL,        -- direct, diagnosis, stage1, stage2, rtg_label_stage1/2, rtg_rp_stage1/2,
                                              -- ablation, baseline, cause
        setting      VARCHAR NOT NULL,        -- vanilla, M=<misguiding rate>, reasoning, T=<temperature>, baseline name, judge
        prediction   VARCHAR,                 -- True / False / Unknown; NULL when undecided or failed
        method       VARCHAR NOT NULL,        -- how the reply was read (validators.read): final_answer, strict, conclusion,
                                              -- scan, judge, needs_judge, judge_no_answer, judge_unreadable, empty,
                                              -- unfinished_thinking; failures: call_failed, judge_failed
        outcome      VARCHAR NOT NULL,        -- TC/FC/UC, correct/wrong, explanation_fails/holds, a cause, undecided,
                                              -- call_failed, judge_failed
        reply        VARCHAR,
        call_key     VARCHAR NOT NULL,        -- llm.calls key
        error        VARCHAR,
        item_digest  VARCHAR                  -- the digest of the item it was made on
    """,
    "waken.metrics": """
        model        VARCHAR NOT NULL,
        dataset      VARCHAR NOT NULL,
        metric       VARCHAR NOT NULL,        -- TC, TCR, FCR, UCR, OCR, Conf, RPC, CGR, Deg, acc_direct, acc_wakenllm, ...
        sample_type  VARCHAR NOT NULL,        -- 's', 'u', 'all'
        stage        VARCHAR NOT NULL,        -- '1', '2', 'all', '-'
        setting      VARCHAR NOT NULL,        -- vanilla, M=..., rtg_label, rtg_rp, ablation, baseline or cause name
        value        DOUBLE,
        numerator    DOUBLE,
        denominator  DOUBLE
    """,
}

def _waken(metric: str, t: str = "all", stage: str = "-", setting: str = "vanilla") -> str:
    return (f"max(value) FILTER (metric = '{metric}' AND sample_type = '{t}' AND stage = '{stage}' "
            f"AND setting = '{setting}')")


# WakenLLM (paper 000): the paper's tables, one row per model and dataset, in percent as printed.
VIEWS: dict[str, str] = {
    # Table 3: vanilla TCR1, TCR2, OCR; RtG (label) Conf_s, Conf_u; RtG (RP) CGR, RPC.
    "waken.table3": f"""
        SELECT model, dataset,
               {_pct(_waken('TCR', stage='1'))} AS "TCR1", {_pct(_waken('TCR', stage='2'))} AS "TCR2",
               {_pct(_waken('OCR', stage='all'))} AS "OCR",
               {_pct(_waken('Conf', 's', 'all', 'rtg_label'))} AS "Conf_s",
               {_pct(_waken('Conf', 'u', 'all', 'rtg_label'))} AS "Conf_u",
               {_pct(_waken('CGR', stage='2', setting='rtg_rp'))} AS "CGR",
               {_pct(_waken('RPC', stage='1', setting='rtg_rp'))} AS "RPC"
        FROM waken.metrics GROUP BY model, dataset ORDER BY model, dataset
    """,
    # Table 5: degradation analysis.
    "waken.table5": f"""
        SELECT model, dataset, {_pct(_waken('TCR', stage='2'))} AS "TCR2",
               {_pct(_waken('Deg', stage='2'))} AS "Deg"
        FROM waken.metrics GROUP BY model, dataset ORDER BY model, dataset
    """,
    # Table 6: accuracy of the direct pass, the prompt baselines and WakenLLM (no SFT/DPO: not trained here).
    "waken.table6": f"""
        SELECT model, dataset, {_pct(_waken('acc_direct'))} AS "Direct",
               {_pct(_waken('acc_baseline', setting='cot'))} AS "CoT",
               {_pct(_waken('acc_baseline', setting='few_shot'))} AS "Few-shot",
               {_pct(_waken('acc_baseline', setting='tree_of_thought'))} AS "Tree-of-Thought",
               {_pct(_waken('acc_baseline', setting='plan_and_solve'))} AS "Plan & Solve",
               {_pct(_waken('acc_baseline', setting='self_reflection'))} AS "Self-Reflection",
               {_pct(_waken('acc_wakenllm'))} AS "WakenLLM",
               {_pct(_waken('acc_wakenllm_dedup'))} AS "WakenLLM (de-duplicated)"
        FROM waken.metrics GROUP BY model, dataset ORDER BY model, dataset
    """,
    # Table 8: shares of items showing vague perception (V: solvable, U: unsolvable).
    "waken.table8": f"""
        SELECT model, dataset, {_pct(_waken('vague_perception_share', 's'))} AS "V",
               {_pct(_waken('vague_perception_share', 'u'))} AS "U"
        FROM waken.metrics GROUP BY model, dataset ORDER BY model, dataset
    """,
    # Tables 9-11: Remind-then-Guide per misguiding rate (the configured rate itself: 66.67 for 2/3, where the
    # setting's name rounds it to M=0.667), TCR1 and TCR2 split by sample type.
    "waken.table9_11": """
        SELECT model, dataset,
               round(100 * coalesce(max(value) FILTER (metric = 'misguiding_rate'),
                                    CAST(substr(setting, 3) AS DOUBLE)), 2) AS "M (%)",
               round(100 * max(value) FILTER (metric = 'TCR' AND stage = '1' AND sample_type = 's'), 2) AS "TCR1 S",
               round(100 * max(value) FILTER (metric = 'TCR' AND stage = '1' AND sample_type = 'u'), 2) AS "TCR1 U",
               round(100 * max(value) FILTER (metric = 'TCR' AND stage = '2' AND sample_type = 's'), 2) AS "TCR2 S",
               round(100 * max(value) FILTER (metric = 'TCR' AND stage = '2' AND sample_type = 'u'), 2) AS "TCR2 U"
        FROM waken.metrics WHERE setting LIKE 'M=%'
        GROUP BY model, dataset, setting ORDER BY model, dataset, "M (%)" DESC
    """,
    # Table 12: vanilla TCR1 and TCR2 split into solvable (V) and unsolvable (U) samples.
    # Table 4 (section 5.4): stage 1's TCR under the concise (CS) and the detailed (DS) stimulation on the
    # same Vague Perception items (`waken.style_swap`); `pipeline` marks the style the dataset's form uses
    # (the paper's shaded rows).
    "waken.table4": """
        WITH forms AS (SELECT dataset, any_value(form) AS form FROM waken.items GROUP BY dataset),
        styled AS (
            SELECT m.model, m.dataset, m.setting,
                   CASE WHEN (f.form = 'fact') = (m.setting = 'vanilla') THEN 'DS' ELSE 'CS' END AS style,
                   m.setting = 'vanilla' AS pipeline, m.sample_type, m.value, m.denominator
            FROM waken.metrics m JOIN forms f USING (dataset) WHERE m.metric = 'TCR_paired')
        SELECT model, dataset, style,
               round(100 * max(value) FILTER (sample_type = 'all'), 2) AS "TCR1",
               round(100 * max(value) FILTER (sample_type = 's'), 2) AS "TCR1 S",
               round(100 * max(value) FILTER (sample_type = 'u'), 2) AS "TCR1 U",
               bool_or(pipeline) AS pipeline, CAST(max(denominator) AS BIGINT) AS items
        FROM styled GROUP BY model, dataset, style ORDER BY model, dataset, style
    """,
    "waken.table12": f"""
        SELECT model, dataset,
               {_pct(_waken('TCR', 's', '1'))} AS "TCR1 V", {_pct(_waken('TCR', 'u', '1'))} AS "TCR1 U",
               {_pct(_waken('TCR', 's', '2'))} AS "TCR2 V", {_pct(_waken('TCR', 'u', '2'))} AS "TCR2 U"
        FROM waken.metrics GROUP BY model, dataset ORDER BY model, dataset
    """,
}

TABLE_DOCS: dict[str, str] = {
    "waken.items": "WakenLLM items: half solvable (True/False or an option), half Unknown.",
    "waken.fol_checks": "FOLIO: every row of the source file read and decided by z3 from its FOL, against its gold label.",
    "waken.unknown_drafts": "ScienceQA Unknown drafts (two supporting sentences deleted) and the judge's verdict on each.",
    "waken.outcomes": "One WakenLLM reading per model x item x step x setting (direct, stages, RtG, baselines, causes).",
    "waken.metrics": "WakenLLM metrics (TCR/FCR/UCR, OCR, Conf, RPC, CGR, Deg, accuracies) in long form.",
    "waken.table3": "WakenLLM paper table 3 (percent): TCR1, TCR2, OCR, Conf_s, Conf_u, CGR, RPC.",
    "waken.table5": "WakenLLM paper table 5 (percent): TCR2 and Deg.",
    "waken.table6": ("WakenLLM paper table 6 (percent): accuracy of the direct pass, the baselines and WakenLLM "
                     "(Acc(Direct) + |TC1|/|D| + |TC2|/|D| as the table prints it; the de-duplicated form beside it)."),
    "waken.table8": "WakenLLM paper table 8 (percent): vague-perception shares V and U.",
    "waken.table9_11": "WakenLLM paper tables 9-11 (percent): TCR1 and TCR2 by sample type per misguiding rate.",
    "waken.table4": ("WakenLLM paper table 4 (percent): stage-1 TCR under the concise and the detailed stimulation "
                     "on the same items (waken.style_swap)."),
    "waken.table12": "WakenLLM paper table 12 (percent): TCR1 and TCR2 split into solvable and unsolvable samples.",
}

# The items table, the columns naming one item, and the reply tables made on them (`report.stale`).
ITEM_KEYS: dict[str, tuple[str, ...]] = {"waken.items": ("dataset", "item_id")}
MADE_ON: dict[str, str] = {"waken.outcomes": "waken.items"}

# `report.headline`'s rows: the direct and WakenLLM accuracies, V, and TCR per stage (vanilla).
HEADLINE = """
    SELECT 'waken' AS family, model, dataset AS scope, CASE metric WHEN 'TCR' THEN 'TCR' || stage ELSE metric END
           AS metric, value, CAST(denominator AS BIGINT) AS n
    FROM waken.metrics
    WHERE setting = 'vanilla' AND ((metric IN ('acc_direct', 'acc_wakenllm') AND sample_type = 'all')
          OR (metric = 'vague_perception_share' AND sample_type = 's')
          OR (metric = 'TCR' AND sample_type = 'all' AND stage IN ('1', '2')))"""

# The units each headline number rests on (`report.units`): one per item. Acc(WakenLLM) is table 6's
# literal Acc(Direct) + |TC1|/|D| + |TC2|/|D|, so an item converted at both stages counts twice.
HEADLINE_UNITS = f"""
    WITH o AS (SELECT * FROM {current_rows('waken.outcomes', 'waken.items', ITEM_KEYS['waken.items'])}
               WHERE setting = 'vanilla'),
    direct AS (SELECT dataset, model, item_id, sample_type, outcome, prediction FROM o WHERE step = 'direct'),
    tc AS (SELECT dataset, model, item_id, count(*) FILTER (step = 'stage1' AND outcome = 'TC') AS tc1,
                  count(*) FILTER (step = 'stage2' AND outcome = 'TC') AS tc2
           FROM o WHERE step IN ('stage1', 'stage2') GROUP BY ALL)
    SELECT 'waken' AS family, model, dataset AS scope, 'acc_direct' AS metric, item_id AS unit,
           CAST(coalesce(outcome = 'correct', false) AS DOUBLE) AS num, 1.0 AS den, NULL::DOUBLE AS conf
    FROM direct WHERE outcome NOT IN ('call_failed', 'judge_failed')
    UNION ALL
    SELECT 'waken', d.model, d.dataset, 'acc_wakenllm', d.item_id,
           CAST(d.outcome = 'correct' AS DOUBLE) + coalesce(tc.tc1, 0) + coalesce(tc.tc2, 0), 1.0, NULL
    FROM direct d LEFT JOIN tc USING (dataset, model, item_id) WHERE d.outcome NOT IN ('call_failed', 'judge_failed')
    UNION ALL
    SELECT 'waken', model, dataset, 'vague_perception_share', item_id, CAST(coalesce(prediction = 'Unknown', false) AS DOUBLE), 1.0, NULL
    FROM direct WHERE sample_type = 's'
    UNION ALL
    SELECT 'waken', model, dataset, 'TCR' || substr(step, 6), item_id, CAST(outcome = 'TC' AS DOUBLE), 1.0, NULL
    FROM o WHERE step IN ('stage1', 'stage2') AND outcome IN ('TC', 'FC', 'UC')"""


# `report.item_answers`' rows: each model's direct label and the gold per unit of `acc_direct`
# (read replies only), for `report.item_stats`' label checks.
ITEM_ANSWERS = f"""
    SELECT 'waken' AS family, model, dataset AS scope, 'acc_direct' AS metric, item_id AS unit,
           prediction AS answer, gold, outcome = 'correct' AS correct
    FROM {current_rows('waken.outcomes', 'waken.items', ITEM_KEYS['waken.items'])}
    WHERE setting = 'vanilla' AND step = 'direct' AND prediction IS NOT NULL"""

# `report.near_duplicates`' texts: the facts and the hypothesis of each item.
ITEM_TEXTS = """
    SELECT 'waken' AS family, dataset AS split, item_id AS item, context || ' ' || question AS text FROM waken.items"""

# `report.mechanisms`' rows: how many items entered each stimulation stage, and why.
MECHANISMS = """
    SELECT 'waken' AS family, d.model, d.dataset AS scope,
           'stage ' || d.stage || ' stimulation (vague-perception set)' AS mechanism,
           coalesce(d.value, 0) > 0 AS reached,
           CAST(coalesce(d.value, 0) AS BIGINT) || ' items entered stage ' || d.stage
           || '; direct answers Unknown on solvable items: ' || coalesce(CAST(v.numerator AS BIGINT), 0) || ' of '
           || coalesce(CAST(v.denominator AS BIGINT), 0) || ', Unknown items whose explanation failed: '
           || coalesce(CAST(u.numerator AS BIGINT), 0) || ' of ' || coalesce(CAST(u.denominator AS BIGINT), 0) AS detail
    FROM waken.metrics d
    LEFT JOIN waken.metrics v ON v.model = d.model AND v.dataset = d.dataset AND v.setting = 'vanilla'
         AND v.metric = 'vague_perception_share' AND v.sample_type = 's'
    LEFT JOIN waken.metrics u ON u.model = d.model AND u.dataset = d.dataset AND u.setting = 'vanilla'
         AND u.metric = 'vague_perception_share' AND u.sample_type = 'u'
    WHERE d.metric = 'd_vp' AND d.setting = 'vanilla' AND d.stage IN ('1', '2')"""

# The view columns this family's views name.
VIEW_COLUMN_DOCS: dict[str, str] = {
    "OCR": "overall converting rate: Vague Perception items converted in stage 1 or 2, percent",
    "Conf_s": "label conformity on solvable samples (M=0% minus M=100%), percent",
    "Conf_u": "label conformity on unsolvable samples (M=0% minus M=100%), percent",
    "CGR": "stage-2 true conversions with the earlier reasoning shown minus without, percent",
    "RPC": "stage-1 true conversions with the stage-1 reasoning shown minus without, percent",
    "Deg": "degradation: stage-1 false conversions answered Unknown in stage 2, percent",
    "V": "solvable samples answered Unknown, percent",
    "U": "Unknown samples whose explanation failed, percent",
    "M (%)": "misguiding rate: share of assigned labels that are wrong",
    "WakenLLM": "Acc(WakenLLM), percent",
    "Direct": "accuracy of the direct pass, percent",
    "style": "stimulation style: CS concise, DS detailed",
    "pipeline": "the style the pipeline uses for the dataset's form (the paper's shaded rows)",
}


def view_column_doc(col: str) -> str | None:
    """Columns named by pattern: TCR<stage> [S|U|V], and the prompt baselines."""
    m = re.fullmatch(r"TCR(\d)(?: ([SUV]))?", col)
    if m:
        part = {"S": ", solvable samples", "V": ", solvable samples", "U": ", unsolvable samples", None: ""}[m.group(2)]
        return f"true converting rate at stage {m.group(1)}{part}, percent"
    if col in ("CoT", "Few-shot", "Tree-of-Thought", "Plan & Solve", "Self-Reflection"):
        return f"accuracy with the {col} prompt baseline, percent"
    return None

# The replies a headline scope rests on (scopes as `report.headline` names them), each with its item,
# how it was read and the verdict, for a model's samples page: current replies only.
SAMPLES = f"""
        SELECT r.dataset AS scope, r.item_id AS item, r.step, i.context, i.question, r.reply, r.method AS how_read,
               r.prediction AS answer, r.gold, r.outcome AS verdict, json_array(r.call_key)::VARCHAR AS call_keys
        FROM {current_rows('waken.outcomes', 'waken.items', ITEM_KEYS['waken.items'], 'r')}
        JOIN waken.items i ON i.dataset = r.dataset AND i.item_id = r.item_id
        WHERE r.model = ? AND r.setting = 'vanilla'
        ORDER BY scope, item, CASE r.step WHEN 'direct' THEN 0 WHEN 'diagnosis' THEN 1 WHEN 'stage1' THEN 2
                                          WHEN 'stage2' THEN 3 ELSE 4 END, r.step"""

# The replies each headline metric rests on, as a filter of its scope's replies (the step they were made at)
SAMPLE_STEPS: dict[str, str] = {"acc_direct": "direct", "vague_perception_share": "direct", "TCR1": "stage1",
                                "TCR2": "stage2"}

# what the cross-family code reads (configuration/families.py: Parts.warehouse)
PARTS = WarehouseParts(tables=TABLES, views=VIEWS, table_docs=TABLE_DOCS, view_column_docs=VIEW_COLUMN_DOCS,
                       item_keys=ITEM_KEYS, made_on=MADE_ON, headline=HEADLINE, mechanisms=MECHANISMS,
                       samples=SAMPLES, headline_units=HEADLINE_UNITS, item_answers=ITEM_ANSWERS,
                       item_texts=ITEM_TEXTS, sample_steps=SAMPLE_STEPS, view_column_doc=view_column_doc)
