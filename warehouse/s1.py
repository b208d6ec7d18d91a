"""S1-Bench (paper 002): its tables, views and their documentation in the warehouse.

`warehouse/schema.py` creates them with every other family's (`configuration/families.py`).
"""

from __future__ import annotations

import re

from warehouse.parts import WarehouseParts
from warehouse.sql import current_rows
from warehouse.sql import pct as _pct

TABLES: dict[str, str] = {
    # S1-Bench (paper 002). The construction tables are rebuilt as a whole by `s1_items`.
    "s1.candidates": """
        candidate_id VARCHAR NOT NULL,        -- reduced versions append -r<round>, human edits -h
        parent_id    VARCHAR,                 -- the version it was reduced or edited from
        round        INTEGER NOT NULL,        -- 0 = generated; n = after n difficulty reductions
        subcategory  VARCHAR NOT NULL,
        category     VARCHAR NOT NULL,
        language     VARCHAR NOT NULL,        -- en or zh
        question     VARCHAR NOT NULL,
        answer       VARCHAR NOT NULL,
        check_spec   JSON,                    -- exact answers or a pattern (programmatic); null = judged
        origin       VARCHAR NOT NULL         -- programmatic:<generator>, llm:<model>, reduced:<model>, human
    """,
    "s1.rounds": """
        candidate_id VARCHAR NOT NULL,
        round        INTEGER NOT NULL,
        stage        VARCHAR NOT NULL,        -- generation, discrimination, annotation, dedup, validation, reduction, decision
        actor        VARCHAR NOT NULL,        -- model, human annotator, all-MiniLM-L6-v2, rule
        decision     VARCHAR NOT NULL,
        detail       VARCHAR                  -- reasons, similarity and match, validation counts, child id
    """,
    "s1.validations": """
        candidate_id VARCHAR NOT NULL,
        round        INTEGER NOT NULL,
        validator    VARCHAR NOT NULL,
        temperature  DOUBLE NOT NULL,
        sample_index INTEGER NOT NULL,
        reply        VARCHAR,
        correct      BOOLEAN,                 -- NULL: failed call or unreadable judge verdict
        method       VARCHAR NOT NULL,        -- exact, judge, judge_unreadable, judge_no_answer, not_judged (already
                                              -- failed), call_failed, judge_failed
        detail       VARCHAR,
        call_key     VARCHAR NOT NULL
    """,
    "s1.items": """
        item_id        VARCHAR NOT NULL,      -- the accepted candidate version
        root_candidate VARCHAR NOT NULL,      -- the generated candidate it descends from
        rounds_taken   INTEGER NOT NULL,
        subcategory    VARCHAR NOT NULL,
        category       VARCHAR NOT NULL,
        language       VARCHAR NOT NULL,
        question       VARCHAR NOT NULL,
        answer         VARCHAR NOT NULL,
        check_spec     JSON,
        origin         VARCHAR NOT NULL,
        item_digest    VARCHAR                -- digest of the item's content (the writer stamps it)
    """,
    # Human annotator decisions; written by people, read by the loop, never overwritten by it.
    "s1.annotations": """
        candidate_id VARCHAR NOT NULL,
        decision     VARCHAR NOT NULL,        -- retain, modify, discard
        question     VARCHAR,                 -- for modify: the corrected question and answer
        answer       VARCHAR,
        annotator    VARCHAR,
        note         VARCHAR
    """,
    "s1.responses": """
        model             VARCHAR NOT NULL,
        item_id           VARCHAR NOT NULL,
        subcategory       VARCHAR NOT NULL,
        category          VARCHAR NOT NULL,
        language          VARCHAR NOT NULL,
        mode              VARCHAR NOT NULL,   -- sample (top-p), greedy, or t=<temperature> (table 2's sweep)
        sample_index      INTEGER NOT NULL,
        format_type       INTEGER,            -- table 9: 100/101, 200-207, 300/301; 102: reasoning hidden by the API
        has_thinking      BOOLEAN NOT NULL,
        has_answer        BOOLEAN NOT NULL,
        judged_part       VARCHAR,            -- answer when the reply was scored, else NULL
        correct           BOOLEAN,            -- a reasoning model's malformed reply is not correct (not judged)
        method            VARCHAR NOT NULL,   -- exact, judge, judge_unreadable, malformed (not scored), empty,
                                              -- call_failed, judge_failed
        detail            VARCHAR,
        completion_tokens INTEGER,            -- the server's count (its own tokenizer)
        finish_reason     VARCHAR,
        difficulty_class  INTEGER,            -- table 23: 1 easy, 2 difficult, 3 neutral, 4 no comment
        redundancy        JSON,               -- max similarity of segments 2..k to earlier ones (C.4)
        reply             VARCHAR,
        call_key          VARCHAR NOT NULL,
        well_formatted    BOOLEAN,            -- format 100 / 101; NULL for a model that does not think first
        tokens            INTEGER,            -- the reply (thinking and answer) by the Qwen2.5 tokenizer (section 3.2)
        item_digest       VARCHAR             -- the digest of the item it was made on
    """,
    "s1.metrics": """
        model    VARCHAR NOT NULL,
        level    VARCHAR NOT NULL,            -- all, category, subcategory, language, language_category
        scope    VARCHAR NOT NULL,            -- the category, subcategory, language, or 'en:reasoning'
        metric   VARCHAR NOT NULL,            -- pass@1, acc@k, f-acc, greedy_acc, mean_tokens, format_type, ... and
                                              -- greedy_ variants
        category VARCHAR NOT NULL,            -- difficulty class, format id or segment position; else '-'
        value    DOUBLE,
        n        INTEGER NOT NULL,            -- answered replies (or items) behind the value
        n_failed INTEGER                      -- replies left out because the call or its judgement failed
    """,
}

def _s1(metric: str, category: str = "-", level: str = "all", scope: str = "all") -> str:
    return _pct(f"max(value) FILTER (metric = '{metric}' AND category = '{category}' AND level = '{level}' "
                f"AND scope = '{scope}')")


def _s1_formats(prefix: str) -> str:
    return ", ".join(f'{_s1(prefix + "format_type", str(f))} AS "{f}"'
                     for f in (100, 101, 200, 201, 202, 203, 204, 205, 206, 207, 300, 301))


_S1_CELLS = [(f"{lang.upper()} {short}", "language_category", f"{lang}:{cat}")
             for lang in ("en", "zh")
             for short, cat in (("Rsn", "reasoning"), ("Kno", "knowledge"), ("If", "instruction following"),
                                ("Ana", "analysis"), ("Avg", None))]
_S1_CELLS = [(c, "language", c.split()[0].lower()) if c.endswith("Avg") else (c, lvl, sc) for c, lvl, sc in _S1_CELLS]
_S1_CELLS.append(("Avg", "all", "all"))


def _s1_tokens(prefix: str = "", metric: str = "mean_tokens", scale: str = "1") -> str:
    """Table 5's (and 4's) cells: `metric` per language x category, per language and overall."""
    return ",\n               ".join(
        f"round({scale} * max(value) FILTER (metric = '{prefix}{metric}' AND level = '{lvl}' AND scope = '{sc}'), 1) "
        f"AS \"{col}\"" for col, lvl, sc in _S1_CELLS)


def _s1_table5() -> str:
    """Table 5: one row per model, then each group's Column Avg (the mean over its models: the small
    LLMs, which have no f-acc, and the LRMs, which have one or hid their reasoning) and Improvement
    = LRM Column Avg / LLM Column Avg per column. The paper's printed footer (713.8, x9.6 in the first
    column) is not the mean of its own printed rows: fed the 32 printed rows, this view gives 662.3 and
    x8.9. The definition is kept (a footer is the mean of the rows above it); the view does not
    reproduce the printed 713.8 / x9.6, and no row set taken from the paper would."""
    cols = [c for c, _, _ in _S1_CELLS]
    q = lambda c: f'"{c}"'  # noqa: E731
    return f"""
        WITH per_model AS (
            SELECT model, {_s1_tokens()},
                   bool_or((metric = 'f-acc' AND level = 'all' AND value IS NOT NULL) OR metric = 'reasoning_hidden')
                       AS lrm
            FROM s1.metrics GROUP BY model),
        groups AS (
            SELECT lrm, {", ".join(f"avg({q(c)}) AS {q(c)}" for c in cols)} FROM per_model GROUP BY lrm)
        SELECT model, {", ".join(q(c) for c in cols)}, 0 AS o FROM per_model
        UNION ALL
        SELECT CASE WHEN lrm THEN 'Column Avg (LRMs)' ELSE 'Column Avg (LLMs)' END,
               {", ".join(f"round({q(c)}, 1)" for c in cols)}, CASE WHEN lrm THEN 2 ELSE 1 END FROM groups
        UNION ALL
        SELECT 'Improvement', {", ".join(
            f"round(max({q(c)}) FILTER (lrm) / nullif(max({q(c)}) FILTER (NOT lrm), 0), 1)" for c in cols)}, 3
        FROM groups HAVING count(*) FILTER (lrm) > 0 AND count(*) FILTER (NOT lrm) > 0
        ORDER BY o, model
    """


_S1_TABLE4 = [("pass@1", "all", "all"), ("RSN", "category", "reasoning"), ("KNO", "category", "knowledge"),
              ("IF", "category", "instruction following"), ("ANA", "category", "analysis")]


def _s1_table4() -> str:
    """Table 4: pass@1 per model overall and per category, unrounded inside; then the Average row, the
    mean of the models' values (the paper's 83.3 = mean of 81.5, 79.8, 88.6), rounded to one place."""
    cells = ", ".join(f"100 * max(value) FILTER (metric = 'pass@1' AND level = '{lvl}' AND scope = '{sc}') AS \"{c}\""
                      for c, lvl, sc in _S1_TABLE4)
    cols = [c for c, _, _ in _S1_TABLE4]
    return f"""
        WITH per_model AS (SELECT model, {cells} FROM s1.metrics GROUP BY model
                           HAVING count(*) FILTER (metric = 'pass@1') > 0)
        SELECT model, {", ".join(f'round("{c}", 1) AS "{c}"' for c in cols)}, 0 AS o FROM per_model
        UNION ALL
        SELECT 'Average', {", ".join(f'round(avg("{c}"), 1)' for c in cols)}, 1 FROM per_model HAVING count(*) > 0
        ORDER BY o, model
    """


# S1-Bench (paper 002): its tables, one row per model; rates in percent as printed.
VIEWS: dict[str, str] = {
    # Table 3 (top-p sampling): pass@1, acc@k, f-acc (NULL: not a reasoning model), tokens.
    "s1.table3": f"""
        SELECT model, {_pct("max(value) FILTER (metric = 'pass@1' AND level = 'all')")} AS "pass@1",
               {_pct("max(value) FILTER (metric LIKE 'acc@%' AND level = 'all')")} AS "acc@k",
               {_pct("max(value) FILTER (metric = 'f-acc' AND level = 'all')")} AS "f-acc",
               round(max(value) FILTER (metric = 'mean_tokens' AND level = 'all'), 2) AS "Tokens"
        FROM s1.metrics GROUP BY model ORDER BY model
    """,
    # Table 5: mean response tokens (top-p) per language and category, endless replies left out, with
    # the Column Avg and Improvement rows.
    "s1.table5": f"SELECT * EXCLUDE (o) FROM ({_s1_table5()})",
    # Table 2: mean accuracy over the samples (percent) of the models in s1.table2_models at each swept
    # temperature, and tokens.
    "s1.table2": f"""
        SELECT model,
               {_pct("max(value) FILTER (metric = 'table2_acc' AND level = 'all' AND category = '0.0')")} AS "t=0.0",
               {_pct("max(value) FILTER (metric = 'table2_acc' AND level = 'all' AND category = '0.2')")} AS "t=0.2",
               {_pct("max(value) FILTER (metric = 'table2_acc' AND level = 'all' AND category = '0.4')")} AS "t=0.4",
               round(max(value) FILTER (metric = 'table2_tokens' AND level = 'all'), 2) AS "Tokens"
        FROM s1.metrics WHERE metric LIKE 'table2_%' GROUP BY model ORDER BY model
    """,
    # Table 4: pass@1 (percent) overall and per category (RSN, KNO, IF, ANA), one row per model, then
    # the Average row (the mean over the models shown). The paper lists only models below 90 % pass@1;
    # every model is listed here (filter with WHERE "pass@1" < 90).
    "s1.table4": f"SELECT * EXCLUDE (o) FROM ({_s1_table4()})",
    # Table 8 (greedy decoding): accuracy, f-acc, tokens.
    "s1.table8": f"""
        SELECT model, {_pct("max(value) FILTER (metric = 'greedy_acc' AND level = 'all')")} AS "acc",
               {_pct("max(value) FILTER (metric = 'greedy_f-acc' AND level = 'all')")} AS "f-acc",
               round(max(value) FILTER (metric = 'greedy_mean_tokens' AND level = 'all'), 2) AS "tokens"
        FROM s1.metrics GROUP BY model ORDER BY model
    """,
    # Tables 19 and 20: the rate of each format type (table 9) under top-p sampling and greedy decoding.
    "s1.table19": f"""
        SELECT model, {_s1_formats("")} FROM s1.metrics GROUP BY model ORDER BY model
    """,
    "s1.table20": f"""
        SELECT model, {_s1_formats("greedy_")} FROM s1.metrics GROUP BY model ORDER BY model
    """,
}

TABLE_DOCS: dict[str, str] = {
    "s1.candidates": "Every S1-Bench candidate version: generated, reduced or edited by a person.",
    "s1.rounds": "Every decision of the S1-Bench construction loop, with its actor and reasons.",
    "s1.validations": "Every validator answer to an S1-Bench candidate (30 per validator), checked or judged.",
    "s1.items": "The accepted S1-Bench questions, with the candidate they descend from.",
    "s1.annotations": "Human decisions on S1-Bench candidates (written by people; they override discriminators).",
    "s1.responses": "One S1-Bench answer per model x item x mode x sample: format type, correctness, tokens.",
    "s1.metrics": "S1-Bench metrics (pass@1, acc@k, f-acc, format rates, tokens, awareness) per scope.",
    "s1.table3": "S1-Bench paper table 3: pass@1, acc@k, f-acc (percent) and mean response tokens.",
    "s1.table5": ("S1-Bench paper table 5: mean response tokens per language and category, with the Column Avg "
                  "of the LLMs and of the LRMs and their ratio (Improvement)."),
    "s1.table4": "S1-Bench paper table 4: pass@1 (percent) overall and per category (RSN, KNO, IF, ANA), and Average.",
    "s1.table2": ("S1-Bench paper table 2: mean accuracy over the samples (percent) at t = 0, 0.2, 0.4 and tokens "
                  "of the swept models."),
    "s1.table8": "S1-Bench paper table 8 (greedy decoding): accuracy, f-acc (percent), tokens.",
    "s1.table19": "S1-Bench paper table 19: the rate (percent) of each response format type under top-p sampling.",
    "s1.table20": "S1-Bench paper table 20: the rate (percent) of each response format type under greedy decoding.",
}

# The items table, the columns naming one item, and the reply tables made on them (`report.stale`).
ITEM_KEYS: dict[str, tuple[str, ...]] = {"s1.items": ("item_id",)}
MADE_ON: dict[str, str] = {"s1.responses": "s1.items"}

# `report.headline`'s rows: pass@1, acc@k, greedy accuracy and tokens overall; accepted items.
HEADLINE = """
    SELECT 's1' AS family, model, 'all' AS scope, CASE WHEN metric LIKE 'acc@%' THEN 'acc@k' ELSE metric END
           AS metric, value, n
    FROM s1.metrics
    WHERE level = 'all' AND category = '-' AND (metric IN ('pass@1', 'greedy_acc', 'mean_tokens') OR metric LIKE 'acc@%')
    UNION ALL
    SELECT 's1', '-', language, 'accepted_items', count(*), count(*) FROM s1.items GROUP BY language"""

# The units each headline number rests on (`report.units`): one per item. pass@1 is the mean over
# items of each item's share of right samples; acc@k counts items whose k samples were all answered
# (k: the most any item has); greedy accuracy one answer per item; tokens leave out endless replies.
HEADLINE_UNITS = f"""
    WITH r AS (SELECT * FROM {current_rows('s1.responses', 's1.items', ITEM_KEYS['s1.items'], 'r')}
               WHERE method NOT IN ('call_failed', 'judge_failed')),
    sampled AS (SELECT model, item_id, count(*) AS n, count(*) FILTER (correct) AS right_
                FROM r WHERE mode = 'sample' GROUP BY ALL),
    k AS (SELECT model, max(n) AS k FROM sampled GROUP BY model)
    SELECT 's1' AS family, model, 'all' AS scope, 'pass@1' AS metric, item_id AS unit,
           right_ / n AS num, 1.0 AS den, NULL::DOUBLE AS conf FROM sampled
    UNION ALL
    SELECT 's1', s.model, 'all', 'acc@k', item_id, CAST(right_ = n AS DOUBLE), 1.0, NULL
    FROM sampled s JOIN k ON k.model = s.model WHERE s.n = k.k
    UNION ALL
    SELECT 's1', model, 'all', 'greedy_acc', item_id, CAST(count(*) FILTER (correct) AS DOUBLE),
           CAST(count(*) AS DOUBLE), NULL FROM r WHERE mode = 'greedy' GROUP BY ALL
    UNION ALL
    SELECT 's1', model, 'all', 'mean_tokens', item_id, CAST(sum(tokens) AS DOUBLE), CAST(count(*) AS DOUBLE), NULL
    FROM r WHERE mode = 'sample' AND tokens IS NOT NULL AND coalesce(format_type, 0) <> 301 GROUP BY ALL"""


# `report.near_duplicates`' texts: each accepted question, its language as its split.
ITEM_TEXTS = """
    SELECT 's1' AS family, language AS split, item_id AS item, question AS text FROM s1.items"""

# `report.mechanisms`' rows: whether several questions were accepted, per language.
MECHANISMS = """
    SELECT 's1' AS family, '-' AS model, c.language AS scope,
           'several questions accepted by every validator answer' AS mechanism, count(i.item_id) >= 2 AS reached,
           count(i.item_id) || ' accepted of ' || count(DISTINCT c.candidate_id) || ' candidate versions' AS detail
    FROM s1.candidates c LEFT JOIN s1.items i ON i.item_id = c.candidate_id GROUP BY c.language"""

# The view columns this family's views name.
VIEW_COLUMN_DOCS: dict[str, str] = {
    "pass@1": "mean correctness over k samples, percent",
    "acc@k": "share of items with all k samples correct, percent",
    "f-acc": "share of well formatted replies, percent",
    "Tokens": "mean response tokens (endless replies left out)",
    "tokens": "mean response tokens (endless replies left out)",
    "acc": "greedy accuracy, percent",
    "Avg": "mean response tokens over all items",
    "RSN": "pass@1 on reasoning questions, percent",
    "KNO": "pass@1 on knowledge questions, percent",
    "IF": "pass@1 on instruction-following questions, percent",
    "ANA": "pass@1 on analysis questions, percent",
    "t=0.0": "mean accuracy over the samples at temperature 0, percent",
    "t=0.2": "mean accuracy over the samples at temperature 0.2, percent",
    "t=0.4": "mean accuracy over the samples at temperature 0.4, percent",
}


def view_column_doc(col: str) -> str | None:
    """Columns named by pattern: '<EN|ZH> <category>' token means, and the format types (1xx-3xx)."""
    m = re.fullmatch(r"(EN|ZH) (Rsn|Kno|If|Ana|Avg)", col)
    if m:
        return f"mean response tokens, {m.group(1)} questions, {m.group(2)}"
    if re.fullmatch(r"[123]\d\d", col):
        return f"share of replies of response format type {col} (paper table 9), percent"
    return None

# The replies a headline scope rests on (scopes as `report.headline` names them), each with its item,
# how it was read and the verdict, for a model's samples page: current replies only.
SAMPLES = f"""
        SELECT 'all' AS scope, r.item_id || ' ' || r.mode || '#' || r.sample_index AS item, r.mode AS step,
               NULL AS context, i.question, r.reply,
               r.method || ' (format ' || coalesce(CAST(r.format_type AS VARCHAR), '-') || ')' AS how_read,
               r.judged_part AS answer, i.answer AS gold,
               CASE WHEN r.correct THEN 'correct' WHEN NOT r.correct THEN 'wrong' ELSE r.method END AS verdict,
               json_array(r.call_key)::VARCHAR AS call_keys
        FROM {current_rows('s1.responses', 's1.items', ITEM_KEYS['s1.items'], 'r')} JOIN s1.items i ON i.item_id = r.item_id
        WHERE r.model = ? ORDER BY scope, item"""


# The construction's checks, over what the warehouse holds (`generators.s1_construction.item_checks`):
# accepted built items whose lineage does not lead back to their root candidate, and accepted built
# items with a validation answer that is not correct.
LINEAGE_BROKEN = """
    WITH RECURSIVE chain(start, cid, parent) AS (
      SELECT i.item_id, c.candidate_id, c.parent_id FROM s1.items i JOIN s1.candidates c ON c.candidate_id = i.item_id
      UNION ALL SELECT chain.start, c.candidate_id, c.parent_id FROM chain JOIN s1.candidates c ON c.candidate_id = chain.parent)
    SELECT i.item_id FROM s1.items i WHERE i.origin NOT LIKE 'release:%'
      AND NOT EXISTS (SELECT 1 FROM chain WHERE chain.start = i.item_id AND chain.cid = i.root_candidate AND chain.parent IS NULL)
    ORDER BY 1"""
NOT_ALL_CORRECT = """
    SELECT v.candidate_id FROM s1.validations v JOIN s1.items i ON i.item_id = v.candidate_id
    WHERE i.origin NOT LIKE 'release:%'
    GROUP BY 1 HAVING bool_and(coalesce(v.correct, false)) = false OR count(*) = 0
    ORDER BY 1"""

# what the cross-family code reads (configuration/families.py: Parts.warehouse)
PARTS = WarehouseParts(tables=TABLES, views=VIEWS, table_docs=TABLE_DOCS, view_column_docs=VIEW_COLUMN_DOCS,
                       item_keys=ITEM_KEYS, made_on=MADE_ON, headline=HEADLINE, mechanisms=MECHANISMS,
                       samples=SAMPLES, headline_units=HEADLINE_UNITS, item_texts=ITEM_TEXTS,
                       view_column_doc=view_column_doc)
