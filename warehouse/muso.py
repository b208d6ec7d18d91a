"""MuSoBench (paper 001): its tables, views and their documentation in the warehouse.

`warehouse/schema.py` creates them with every other family's (`configuration/families.py`).
"""

from __future__ import annotations

import re

from warehouse.parts import WarehouseParts
from warehouse.sql import current_rows
from warehouse.sql import pct as _pct

TABLES: dict[str, str] = {
    # MuSoBench (paper 001). One partition = one task's complexity level, e.g. 'timetabling_51-100'.
    "muso.instances": """
        partition_key     VARCHAR NOT NULL,
        instance_id       VARCHAR NOT NULL,     -- e.g. 'ti-51-100-007': task, bin, index in the bin
        task              VARCHAR NOT NULL,     -- 'timetabling' or 'subsetsum'
        level             INTEGER NOT NULL,     -- 1-based position of the bin in the configuration
        level_lo          INTEGER NOT NULL,     -- bin bounds on the solution count
        level_hi          INTEGER,              -- NULL: open bin (lo or more)
        solution_count    INTEGER NOT NULL,
        question          VARCHAR NOT NULL,     -- the paper's question text
        reference_answer  VARCHAR NOT NULL,     -- all solutions in the paper's answer format
        parameters        JSON NOT NULL,        -- the problem and the generator arm that drew it
        config_seed       BIGINT NOT NULL,
        level_seed        BIGINT NOT NULL,      -- derived from (config seed, task, bin)
        candidate_index   INTEGER NOT NULL,     -- candidates drawn in this level before this one
        generator_version VARCHAR NOT NULL,
        item_digest       VARCHAR               -- digest of the item's content (the writer stamps it)
    """,
    "muso.solutions": """
        partition_key  VARCHAR NOT NULL,
        instance_id    VARCHAR NOT NULL,
        solution_index INTEGER NOT NULL,
        solution       JSON NOT NULL            -- [[time, room], ...] per course, or the sorted subset
    """,
    "muso.responses": """
        partition_key     VARCHAR NOT NULL,
        model             VARCHAR NOT NULL,
        paradigm          VARCHAR NOT NULL,     -- 'short_cot' or 'long_cot'
        variant           VARCHAR NOT NULL,     -- standard, exploration, sc_path, sc_vote, sc_median
        path              INTEGER,              -- self-consistency path (sample index)
        instance_id       VARCHAR NOT NULL,
        task              VARCHAR NOT NULL,
        level             INTEGER NOT NULL,     -- the bin's position when the instance was generated
        status            VARCHAR NOT NULL,     -- 'ok' or 'call_failed' (solve turn)
        error             VARCHAR,
        answers_first     JSON,                 -- parsed solution set after the solve turn
        n_first           INTEGER,
        n_first_correct   INTEGER,
        n_first_invalid   INTEGER,              -- answers that cannot be solutions (kept, scored wrong)
        parse_error       VARCHAR,              -- why no answer could be parsed, if none
        parse_method      VARCHAR,              -- how the solve reply was read (validators.read); empty or
                                                -- unfinished_thinking: no answer (validators.outcomes)
        claimed_total     INTEGER,              -- the "Total N feasible solutions" the model wrote
        confidence        DOUBLE,               -- 0-100
        confidence_method VARCHAR,              -- tagged, boxed, keyword, bare, why none, call_failed
        recheck           VARCHAR,              -- unchanged, changed, changed_without_marker, no_marker, call_failed
        answers_second    JSON,
        n_second          INTEGER,
        n_second_correct  INTEGER,
        precision         DOUBLE,
        recall            DOUBLE,
        retention         DOUBLE,
        correction        DOUBLE,
        discovery         DOUBLE,
        truncated         BOOLEAN NOT NULL,     -- some turn hit max_tokens
        call_keys         JSON NOT NULL,        -- llm.calls keys of this conversation, in order
        level_lo          INTEGER,              -- the instance's bin: lower bound
        level_hi          INTEGER,              -- upper bound; NULL for an open last bin
        temperature       DOUBLE,               -- decoding temperature (a sweep is a dimension, section 4.3)
        solve_tokens      INTEGER,              -- completion tokens of the solve turn (figure 5a: length vs confidence)
        item_digest       VARCHAR               -- the digest of the item it was made on
    """,
    "muso.metrics": """
        model            VARCHAR NOT NULL,
        paradigm         VARCHAR NOT NULL,
        variant          VARCHAR NOT NULL,      -- as muso.responses; checkpoint_<n>_fixed: over the fixed set
        task             VARCHAR NOT NULL,
        level            INTEGER,               -- 0 = all levels of the task; else the bin's position in the
                                                -- configured bins; NULL: a bin no longer configured
        level_label      VARCHAR NOT NULL,      -- '51-100', '301+', 'all': derived from the bin
        level_lo         INTEGER,               -- the bin rows are grouped by
        level_hi         INTEGER,
        n_instances      INTEGER NOT NULL,
        n_scored         INTEGER NOT NULL,      -- solve turn answered (parsed or not)
        n_failed_calls   INTEGER NOT NULL,
        n_parse_failures INTEGER NOT NULL,
        n_truncated      INTEGER NOT NULL,
        precision        DOUBLE,
        recall           DOUBLE,
        n_confidence     INTEGER NOT NULL,
        mean_confidence  DOUBLE,
        ece_precision    DOUBLE,
        ece_recall       DOUBLE,
        n_stability      INTEGER NOT NULL,      -- instances with a usable recheck turn
        retention        DOUBLE,
        correction       DOUBLE,
        discovery        DOUBLE,
        temperature      DOUBLE                 -- decoding temperature of the responses
    """,
}

# MuSoBench (paper 001): its tables in percent, over all levels of a task (level 0).
VIEWS: dict[str, str] = {
    # Table 1: behaviour in the recheck turn per paradigm: CSR (retention), ESC (correction), NSD (discovery).
    "muso.table1": f"""
        SELECT model, CASE paradigm WHEN 'short_cot' THEN 'Short-CoT' ELSE 'Long-CoT' END AS "Paradigm",
               temperature,
               {_pct("max(retention) FILTER (task = 'timetabling')")} AS "TimeTabling CSR (%)",
               {_pct("max(correction) FILTER (task = 'timetabling')")} AS "TimeTabling ESC (%)",
               {_pct("max(discovery) FILTER (task = 'timetabling')")} AS "TimeTabling NSD (%)",
               {_pct("max(retention) FILTER (task = 'subsetsum')")} AS "SubsetSum CSR (%)",
               {_pct("max(correction) FILTER (task = 'subsetsum')")} AS "SubsetSum ESC (%)",
               {_pct("max(discovery) FILTER (task = 'subsetsum')")} AS "SubsetSum NSD (%)"
        FROM muso.metrics WHERE level = 0 AND variant = 'standard'
        GROUP BY model, paradigm, temperature ORDER BY model, paradigm DESC, temperature
    """,
    # Table 2: self-consistency aggregation against the single-path answer.
    "muso.table2": f"""
        SELECT model, CASE paradigm WHEN 'short_cot' THEN 'Short-CoT' ELSE 'Long-CoT' END AS "Paradigm",
               temperature,
               CASE task WHEN 'timetabling' THEN 'TimeTabling' ELSE 'SubsetSum' END AS "Task",
               CASE variant WHEN 'standard' THEN CASE paradigm WHEN 'short_cot' THEN 'Short-CoT' ELSE 'Long-CoT' END
                            WHEN 'sc_median' THEN 'w/ Median Conf' ELSE 'w/ Voting' END AS "Method",
               {_pct("precision")} AS "Precision (%)", {_pct("recall")} AS "Recall (%)",
               {_pct("ece_recall")} AS "ECE (r)"
        FROM muso.metrics WHERE level = 0 AND variant IN ('standard', 'sc_median', 'sc_vote')
        ORDER BY model, paradigm, temperature, task DESC,
                 CASE variant WHEN 'standard' THEN 0 WHEN 'sc_median' THEN 1 ELSE 2 END
    """,
}

TABLE_DOCS: dict[str, str] = {
    "muso.instances": "MuSoBench instances (TimeTabling, SubsetSum) with their complexity bin and generator parameters.",
    "muso.solutions": "Every solution of every MuSoBench instance, enumerated exactly.",
    "muso.responses": "One MuSoBench conversation (solve, confidence, recheck) per model x paradigm x variant x instance.",
    "muso.metrics": "MuSoBench precision, recall, ECE and stability per model x paradigm x temperature x variant x bin.",
    "muso.table1": "MuSoBench paper table 1 (percent): CSR, ESC, NSD per task and paradigm.",
    "muso.table2": "MuSoBench paper table 2 (percent): precision, recall, ECE (r) of self-consistency strategies.",
}

# The items table, the columns naming one item, and the reply tables made on them (`report.stale`).
ITEM_KEYS: dict[str, tuple[str, ...]] = {"muso.instances": ("partition_key", "instance_id")}
MADE_ON: dict[str, str] = {"muso.responses": "muso.instances"}

# `report.headline`'s rows: recall, precision and ECE (recall) over all levels, standard variant.
HEADLINE = """
    SELECT 'muso' AS family, model, task || ' ' || paradigm || ' T=' || temperature AS scope, metric, value, n
    FROM (SELECT model, task, paradigm, temperature, 'recall' AS metric, recall AS value, n_scored AS n
              FROM muso.metrics WHERE level = 0 AND variant = 'standard'
          UNION ALL SELECT model, task, paradigm, temperature, 'precision', precision, n_scored
              FROM muso.metrics WHERE level = 0 AND variant = 'standard'
          UNION ALL SELECT model, task, paradigm, temperature, 'ece_recall', ece_recall, n_confidence
              FROM muso.metrics WHERE level = 0 AND variant = 'standard')"""

# The units each headline number rests on (`report.units`): one per instance (standard variant,
# answered); the ECE's units carry their stated confidence (`conf`, 0-1) beside their recall.
HEADLINE_UNITS = f"""
    WITH r AS (SELECT model, task || ' ' || paradigm || ' T=' || temperature AS scope,
                      partition_key || ':' || instance_id AS instance_id, precision,
                      recall, confidence
               FROM {current_rows('muso.responses', 'muso.instances', ITEM_KEYS['muso.instances'])}
               WHERE variant = 'standard' AND status = 'ok' AND recall IS NOT NULL)
    SELECT 'muso' AS family, model, scope, 'recall' AS metric, instance_id AS unit, recall AS num, 1.0 AS den,
           NULL::DOUBLE AS conf FROM r
    UNION ALL SELECT 'muso', model, scope, 'precision', instance_id, precision, 1.0, NULL FROM r
        WHERE precision IS NOT NULL
    UNION ALL SELECT 'muso', model, scope, 'ece_recall', instance_id, recall, 1.0, confidence / 100 FROM r
        WHERE confidence IS NOT NULL"""


# `report.mechanisms`' rows: replies within the budget, a solution set read, a confidence stated.
MECHANISMS = """
    SELECT 'muso' AS family, model, task AS scope, 'replies finish within the token budget' AS mechanism,
           sum(n_scored - n_truncated) > 0 AS reached,
           sum(n_scored - n_truncated) || ' of ' || sum(n_scored) || ' answered conversations not cut' AS detail
    FROM muso.metrics WHERE level = 0 AND variant = 'standard' GROUP BY model, task
    UNION ALL
    SELECT 'muso', model, task, 'a solution set read from the reply', sum(n_scored - n_parse_failures) > 0,
           sum(n_scored - n_parse_failures) || ' of ' || sum(n_scored) || ' replies read'
    FROM muso.metrics WHERE level = 0 AND variant = 'standard' GROUP BY model, task
    UNION ALL
    SELECT 'muso', model, task, 'a confidence stated', sum(n_confidence) > 0,
           sum(n_confidence) || ' of ' || sum(n_scored) || ' replies with a confidence'
    FROM muso.metrics WHERE level = 0 AND variant = 'standard' GROUP BY model, task"""

# The view columns this family's views name.
VIEW_COLUMN_DOCS: dict[str, str] = {
    "Task": "TimeTabling or SubsetSum",
    "Paradigm": "Short-CoT or Long-CoT",
    "Method": "single path or aggregation",
    "Precision (%)": "mean precision",
    "Recall (%)": "mean recall",
    "ECE (r)": "calibration error against recall, percent",
}


def view_column_doc(col: str) -> str | None:
    """Columns named by pattern: '<Task> CSR|ESC|NSD (%)'."""
    m = re.fullmatch(r"(TimeTabling|SubsetSum) (CSR|ESC|NSD) \(%\)", col)
    if m:
        what = {"CSR": "correct solutions retained", "ESC": "wrong solutions corrected", "NSD": "new solutions discovered"}
        return f"{m.group(1)}: {what[m.group(2)]} in the recheck turn, percent"
    return None

# The replies a headline scope rests on (scopes as `report.headline` names them), each with its item,
# how it was read and the verdict, for a model's samples page: current replies only.
SAMPLES = f"""
        SELECT r.task || ' ' || r.paradigm || ' T=' || r.temperature AS scope, r.instance_id AS item,
               'level ' || r.level AS step, NULL AS context, i.question, c.response_text AS reply,
               coalesce(r.parse_error, 'read ' || r.n_first || ' solutions (' || r.n_first_correct || ' right)')
                   || '; confidence: ' || coalesce(r.confidence_method, '-') AS how_read,
               CAST(r.answers_first AS VARCHAR) AS answer, i.reference_answer AS gold,
               'recall ' || coalesce(CAST(round(r.recall, 3) AS VARCHAR), '-') || ', confidence '
                   || coalesce(CAST(r.confidence AS VARCHAR), '-') AS verdict,
               CAST(r.call_keys AS VARCHAR) AS call_keys
        FROM {current_rows('muso.responses', 'muso.instances', ITEM_KEYS['muso.instances'], 'r')}
        JOIN muso.instances i ON i.partition_key = r.partition_key AND i.instance_id = r.instance_id
        LEFT JOIN llm.calls c ON c.key = json_extract_string(r.call_keys, '$[0]')
        WHERE r.model = ? AND r.variant = 'standard' ORDER BY scope, item"""

# what the cross-family code reads (configuration/families.py: Parts.warehouse)
PARTS = WarehouseParts(tables=TABLES, views=VIEWS, table_docs=TABLE_DOCS, view_column_docs=VIEW_COLUMN_DOCS,
                       item_keys=ITEM_KEYS, made_on=MADE_ON, headline=HEADLINE, mechanisms=MECHANISMS,
                       samples=SAMPLES, headline_units=HEADLINE_UNITS, view_column_doc=view_column_doc)
