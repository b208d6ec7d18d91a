"""Every table of the warehouse, in one place, so analysts and code read the same definitions.

Schemas: `llm` (the model-call ledger and the model probe), `sources` (loaded
source datasets), and one per benchmark family (`muso`, `waken`, `s1`, `ib`).
Tables are created if missing; a family adds its DDL to `TABLES` below.
"""

from __future__ import annotations

import hashlib
import re

import duckdb

SCHEMAS = ("llm", "sources", "muso", "waken", "s1", "ib", "report")

TABLES: dict[str, str] = {
    # One row per distinct call (the key). A failed call is stored as a failure and
    # replaced by the next run's attempt; `total_attempts` counts across runs.
    "llm.calls": """
        key               VARCHAR PRIMARY KEY,  -- sha256 of model identity, messages, sampling, sample index
        model             VARCHAR NOT NULL,     -- configured model name
        model_identity    VARCHAR NOT NULL,     -- what the key hashes: served id @ host, or the embedded file
        served_model      VARCHAR,
        endpoint_host     VARCHAR,              -- host:port only, never a credential
        purpose           VARCHAR,              -- e.g. 'models.probe', 'muso.solve'
        request           JSON NOT NULL,        -- messages and the sampling parameters sent
        sample_index      INTEGER NOT NULL,
        status            VARCHAR NOT NULL,     -- 'ok' or 'failed'
        response_text     VARCHAR,              -- message content (the reply after any reasoning)
        finish_reason     VARCHAR,              -- 'stop', 'length' (truncated), ...
        prompt_tokens     INTEGER,
        completion_tokens INTEGER,
        latency_s         DOUBLE,
        attempts          INTEGER NOT NULL,     -- attempts in the run that wrote this row
        total_attempts    INTEGER NOT NULL,     -- attempts over all runs
        error             VARCHAR,
        run_id            VARCHAR,
        created_at        TIMESTAMP NOT NULL,
        finished_at       TIMESTAMP NOT NULL,
        reasoning_text    VARCHAR,              -- reasoning the server returned in a separate field ('' = empty think block)
        reasoning_tokens  INTEGER               -- usage.completion_tokens_details.reasoning_tokens; with reasoning_text NULL: reasoning hidden by the API
    """,
    "llm.models": """
        name            VARCHAR PRIMARY KEY,
        kind            VARCHAR NOT NULL,       -- 'embedded' or 'remote'
        served_model    VARCHAR,
        endpoint_host   VARCHAR,
        reachable       BOOLEAN NOT NULL,
        evaluated       BOOLEAN,                -- listed under `evaluate` in the configuration that probed it
        served_ids      VARCHAR[],              -- what the endpoint's /models lists
        error           VARCHAR,
        probe_prompt    VARCHAR,
        probe_answer    VARCHAR,
        probe_latency_s DOUBLE,
        probe_cached    BOOLEAN,
        checked_at      TIMESTAMP NOT NULL
    """,
    # Loaded source datasets, normalised (generators/sources.py). One partition = one configured dataset.
    "sources.records": """
        dataset         VARCHAR NOT NULL,     -- the configured dataset name that loaded it
        source          VARCHAR NOT NULL,     -- 'fld', 'folio', 'scienceqa'
        subset          VARCHAR NOT NULL,     -- FLD config, 'folio', ScienceQA form (science / arts)
        split           VARCHAR NOT NULL,
        source_id       VARCHAR NOT NULL,
        origin          VARCHAR NOT NULL,     -- hub id[/config] or file path
        row_number      INTEGER NOT NULL,
        context         VARCHAR NOT NULL,
        question        VARCHAR NOT NULL,
        label           VARCHAR,              -- True / False / Unknown (NULL for multiple choice)
        original_label  VARCHAR,
        choices         JSON,
        answer_index    INTEGER,
        topic           VARCHAR,
        extra           JSON NOT NULL
    """,
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
        variant          VARCHAR NOT NULL,
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
        step         VARCHAR NOT NULL,        -- direct, diagnosis, stage1, stage2, rtg_label_stage1/2, rtg_rp_stage1/2, ablation, baseline, cause
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

# -- which items a response was made on (issue 25) ------------------------------------------------
# Each family's items table and the columns that name one item; the tables of replies to those
# items share the columns. Every row of both carries `item_digest`: the warehouse writer stamps an
# item with the digest of its content and a reply with the digest of its item as stored when the
# reply is written. A reply whose item is gone, or now holds another question (another seed or
# configuration rebuilt the items), is stale: the metrics leave it out and `report.stale` lists it.
ITEM_KEYS: dict[str, tuple[str, ...]] = {
    "muso.instances": ("partition_key", "instance_id"), "waken.items": ("dataset", "item_id"),
    "ib.items": ("dataset", "item_id"), "s1.items": ("item_id",),
}
MADE_ON: dict[str, str] = {
    "muso.responses": "muso.instances", "waken.outcomes": "waken.items", "ib.responses": "ib.items",
    "ib.prompts": "ib.items", "s1.responses": "s1.items",
}


def _made_on_join(table: str, alias: str = "r") -> str:
    items = MADE_ON[table]
    keys = " AND ".join(f"i.{k} = {alias}.{k}" for k in ITEM_KEYS[items])
    return f"{items} i ON {keys}"


def current(table: str, alias: str = "") -> str:
    """A subquery of the rows of a reply table made on the items stored now (same digest), for the
    metrics: `SELECT * FROM {current('ib.responses')} ORDER BY ...`."""
    return (f"(SELECT r.* FROM {table} r JOIN {_made_on_join(table)} "
            f"AND i.item_digest IS NOT DISTINCT FROM r.item_digest) AS {alias or table.split('.')[1]}")


def _stale_branch(table: str) -> str:
    """`report.stale`'s rows for one reply table: its replies whose item is gone or differs."""
    keys = ITEM_KEYS[MADE_ON[table]]
    scope = f"r.{keys[0]}" if len(keys) > 1 else "'all'"  # the partition column, if the family has one
    item = f"i.{keys[-1]}"  # NULL when no stored item matched
    return f"""
    SELECT '{table.split(".")[0]}' AS family, r.model, {scope} AS scope, '{table}' AS "table", count(*) AS replies,
           count(*) FILTER ({item} IS NULL) AS item_gone, count(*) FILTER ({item} IS NOT NULL) AS item_changed
    FROM {table} r LEFT JOIN {_made_on_join(table)}
    WHERE {item} IS NULL OR i.item_digest IS DISTINCT FROM r.item_digest
    GROUP BY ALL"""


VIEWS: dict[str, str] = {
    "llm.call_summary": """
        SELECT model, purpose, status,
               count(*)                          AS calls,
               count(*) FILTER (finish_reason = 'length') AS truncated,
               sum(prompt_tokens)                AS prompt_tokens,
               sum(completion_tokens)            AS completion_tokens,
               round(avg(latency_s), 3)          AS mean_latency_s,
               sum(total_attempts)               AS attempts
        FROM llm.calls
        GROUP BY ALL
        ORDER BY ALL
    """,
}


def _pct(expr: str) -> str:
    return f"round(100 * ({expr}), 2)"


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
    = LRM Column Avg / LLM Column Avg per column (the paper's first column: 713.8 / 74.6 = x9.6)."""
    cols = [c for c, _, _ in _S1_CELLS]
    q = lambda c: f'"{c}"'  # noqa: E731
    return f"""
        WITH per_model AS (
            SELECT model AS "Model", {_s1_tokens()},
                   bool_or((metric = 'f-acc' AND level = 'all' AND value IS NOT NULL) OR metric = 'reasoning_hidden')
                       AS lrm
            FROM s1.metrics GROUP BY model),
        groups AS (
            SELECT lrm, {", ".join(f"avg({q(c)}) AS {q(c)}" for c in cols)} FROM per_model GROUP BY lrm)
        SELECT "Model", {", ".join(q(c) for c in cols)}, 0 AS o FROM per_model
        UNION ALL
        SELECT CASE WHEN lrm THEN 'Column Avg (LRMs)' ELSE 'Column Avg (LLMs)' END,
               {", ".join(f"round({q(c)}, 1)" for c in cols)}, CASE WHEN lrm THEN 2 ELSE 1 END FROM groups
        UNION ALL
        SELECT 'Improvement', {", ".join(
            f"round(max({q(c)}) FILTER (lrm) / nullif(max({q(c)}) FILTER (NOT lrm), 0), 1)" for c in cols)}, 3
        FROM groups HAVING count(*) FILTER (lrm) > 0 AND count(*) FILTER (NOT lrm) > 0
        ORDER BY o, "Model"
    """


# S1-Bench (paper 002): its tables, one row per model; rates in percent as printed.
VIEWS.update({
    # Table 3 (top-p sampling): pass@1, acc@k, f-acc (NULL: not a reasoning model), tokens.
    "s1.table3": f"""
        SELECT model AS "Model", {_pct("max(value) FILTER (metric = 'pass@1' AND level = 'all')")} AS "pass@1",
               {_pct("max(value) FILTER (metric LIKE 'acc@%' AND level = 'all')")} AS "acc@k",
               {_pct("max(value) FILTER (metric = 'f-acc' AND level = 'all')")} AS "f-acc",
               round(max(value) FILTER (metric = 'mean_tokens' AND level = 'all'), 2) AS "Tokens"
        FROM s1.metrics GROUP BY model ORDER BY model
    """,
    # Table 5: mean response tokens (top-p) per language and category, endless replies left out, with
    # the Column Avg and Improvement rows.
    "s1.table5": f"SELECT * EXCLUDE (o) FROM ({_s1_table5()})",
    # Table 2: acc@n (percent) of the models in s1.table2_models at each swept temperature, and tokens.
    "s1.table2": f"""
        SELECT model AS "Model",
               {_pct("max(value) FILTER (metric = 'table2_acc' AND level = 'all' AND category = '0.0')")} AS "t=0.0",
               {_pct("max(value) FILTER (metric = 'table2_acc' AND level = 'all' AND category = '0.2')")} AS "t=0.2",
               {_pct("max(value) FILTER (metric = 'table2_acc' AND level = 'all' AND category = '0.4')")} AS "t=0.4",
               round(max(value) FILTER (metric = 'table2_tokens' AND level = 'all'), 2) AS "Tokens"
        FROM s1.metrics WHERE metric LIKE 'table2_%' GROUP BY model ORDER BY model
    """,
    # Table 4: pass@1 (percent) per language and category.
    "s1.table4": f"""
        SELECT model AS "Model", {_s1_tokens(metric="pass@1", scale="100")}
        FROM s1.metrics GROUP BY model ORDER BY model
    """,
    # Table 8 (greedy decoding): accuracy, f-acc, tokens.
    "s1.table8": f"""
        SELECT model AS "Model", {_pct("max(value) FILTER (metric = 'greedy_acc' AND level = 'all')")} AS "acc",
               {_pct("max(value) FILTER (metric = 'greedy_f-acc' AND level = 'all')")} AS "f-acc",
               round(max(value) FILTER (metric = 'greedy_mean_tokens' AND level = 'all'), 2) AS "tokens"
        FROM s1.metrics GROUP BY model ORDER BY model
    """,
    # Tables 19 and 20: the rate of each format type (table 9) under top-p sampling and greedy decoding.
    "s1.table19": f"""
        SELECT model AS "Model", {_s1_formats("")} FROM s1.metrics GROUP BY model ORDER BY model
    """,
    "s1.table20": f"""
        SELECT model AS "Model", {_s1_formats("greedy_")} FROM s1.metrics GROUP BY model ORDER BY model
    """,
})


# MuSoBench (paper 001): its tables in percent, over all levels of a task (level 0).
VIEWS.update({
    # Table 1: behaviour in the recheck turn per paradigm: CSR (retention), ESC (correction), NSD (discovery).
    "muso.table1": f"""
        SELECT model AS "Model", CASE paradigm WHEN 'short_cot' THEN 'Short-CoT' ELSE 'Long-CoT' END AS "Paradigm",
               temperature AS "Temperature",
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
        SELECT model AS "Model", CASE paradigm WHEN 'short_cot' THEN 'Short-CoT' ELSE 'Long-CoT' END AS "Paradigm",
               temperature AS "Temperature",
               CASE task WHEN 'timetabling' THEN 'TimeTabling' ELSE 'SubsetSum' END AS "Task",
               CASE variant WHEN 'standard' THEN CASE paradigm WHEN 'short_cot' THEN 'Short-CoT' ELSE 'Long-CoT' END
                            WHEN 'sc_median' THEN 'w/ Median Conf' ELSE 'w/ Voting' END AS "Method",
               {_pct("precision")} AS "Precision (%)", {_pct("recall")} AS "Recall (%)",
               {_pct("ece_recall")} AS "ECE (r)"
        FROM muso.metrics WHERE level = 0 AND variant IN ('standard', 'sc_median', 'sc_vote')
        ORDER BY model, paradigm, temperature, task DESC,
                 CASE variant WHEN 'standard' THEN 0 WHEN 'sc_median' THEN 1 ELSE 2 END
    """,
})


def _waken(metric: str, t: str = "all", stage: str = "-", setting: str = "vanilla") -> str:
    return (f"max(value) FILTER (metric = '{metric}' AND sample_type = '{t}' AND stage = '{stage}' "
            f"AND setting = '{setting}')")


# WakenLLM (paper 000): the paper's tables, one row per model and dataset, in percent as printed.
VIEWS.update({
    # Table 3: vanilla TCR1, TCR2, OCR; RtG (label) Conf_s, Conf_u; RtG (RP) CGR, RPC.
    "waken.table3": f"""
        SELECT model AS "Model", dataset AS "Dataset",
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
        SELECT model AS "Model", dataset AS "Dataset", {_pct(_waken('TCR', stage='2'))} AS "TCR2",
               {_pct(_waken('Deg', stage='2'))} AS "Deg"
        FROM waken.metrics GROUP BY model, dataset ORDER BY model, dataset
    """,
    # Table 6: accuracy of the direct pass, the prompt baselines and WakenLLM (no SFT/DPO: not trained here).
    "waken.table6": f"""
        SELECT model AS "Model", dataset AS "Dataset", {_pct(_waken('acc_direct'))} AS "Direct",
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
        SELECT model AS "Model", dataset AS "Dataset", {_pct(_waken('vague_perception_share', 's'))} AS "V",
               {_pct(_waken('vague_perception_share', 'u'))} AS "U"
        FROM waken.metrics GROUP BY model, dataset ORDER BY model, dataset
    """,
    # Tables 9-11: Remind-then-Guide per misguiding rate, TCR1 and TCR2 split by sample type.
    "waken.table9_11": """
        SELECT model AS "Model", dataset AS "Dataset",
               round(100 * CAST(substr(setting, 3) AS DOUBLE), 2) AS "M (%)",
               round(100 * max(value) FILTER (metric = 'TCR' AND stage = '1' AND sample_type = 's'), 2) AS "TCR1 S",
               round(100 * max(value) FILTER (metric = 'TCR' AND stage = '1' AND sample_type = 'u'), 2) AS "TCR1 U",
               round(100 * max(value) FILTER (metric = 'TCR' AND stage = '2' AND sample_type = 's'), 2) AS "TCR2 S",
               round(100 * max(value) FILTER (metric = 'TCR' AND stage = '2' AND sample_type = 'u'), 2) AS "TCR2 U"
        FROM waken.metrics WHERE setting LIKE 'M=%'
        GROUP BY model, dataset, setting ORDER BY model, dataset, "M (%)" DESC
    """,
    # Table 12: vanilla TCR1 and TCR2 split into solvable (V) and unsolvable (U) samples.
    "waken.table12": f"""
        SELECT model AS "Model", dataset AS "Dataset",
               {_pct(_waken('TCR', 's', '1'))} AS "TCR1 V", {_pct(_waken('TCR', 'u', '1'))} AS "TCR1 U",
               {_pct(_waken('TCR', 's', '2'))} AS "TCR2 V", {_pct(_waken('TCR', 'u', '2'))} AS "TCR2 U"
        FROM waken.metrics GROUP BY model, dataset ORDER BY model, dataset
    """,
})


VIEWS.update({
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
    # (single-choice tense), GR2 (single-choice sparse) and GR3 (multiple-choice sparse).
    "ib.table3": """
        WITH m AS (
            SELECT model, setting,
                   max(value) FILTER (form = 'judging' AND metric = 'SR') AS sr1,
                   max(value) FILTER (form = 'judging' AND metric = 'GR') AS gr1,
                   max(value) FILTER (form = 'single' AND metric = 'SR') AS sr2,
                   max(value) FILTER (form = 'single' AND metric = 'GR') AS gr2,
                   max(value) FILTER (form = 'multiple' AND metric = 'GR') AS gr3
            FROM ib.metrics WHERE category = '-' GROUP BY model, setting)
        SELECT model AS "Model", setting AS "Setting",
               round(100 * (sr1 + gr1) / 2, 2) AS "Acc_b^1", round(100 * sr1, 2) AS "SR1", round(100 * gr1, 2) AS "GR1",
               round(100 * (sr2 + gr2 + gr3) / 3, 2) AS "Acc_b^2", round(100 * sr2, 2) AS "SR2",
               round(100 * gr2, 2) AS "GR2", round(100 * gr3, 2) AS "GR3"
        FROM m ORDER BY model, setting
    """,
    # Figure 7: the robustness score, the judging harmonic mean of SR and GR (percent).
    "ib.figure7": """
        SELECT model AS "Model", setting AS "Setting", round(100 * value, 2) AS "RS"
        FROM ib.metrics WHERE form = 'judging' AND metric = 'RS' AND category = '-' ORDER BY model, setting
    """,
    # Paper table 6 layout: disturbing-miscellany accuracy (percent) by the number of wrong options kept
    # beside the correct one (its columns 1..9); `ib.miscellany_items` has the counts behind each.
    "ib.miscellany": "SELECT model AS \"Model\", " + ", ".join(
        f"round(100 * max(value) FILTER (metric = 'Acc_by_options' AND category = '{k + 1}'), 2) AS \"{k}\""
        for k in range(1, 10)) + " FROM ib.metrics WHERE metric = 'Acc_by_options' GROUP BY model ORDER BY model",
    "ib.miscellany_items": """
        SELECT model, CAST(category AS INTEGER) - 1 AS wrong_options, CAST(category AS INTEGER) AS n_options,
               value AS accuracy, numerator AS correct, denominator AS items
        FROM ib.metrics WHERE metric = 'Acc_by_options' ORDER BY model, n_options
    """,
    # Paper table 7: how often the judge was needed (percent of answered replies), pooled over the forms.
    "ib.table7": "SELECT model AS \"Model\", " + ", ".join(
        f"round(100 * sum(numerator) FILTER (setting = '{s}') / nullif(sum(denominator) FILTER (setting = '{s}'), 0), "
        f"2) AS \"{label}\"" for s, label in (
            ("vanilla", "Vanilla Scenario"), ("missing_choices", "Missing-Choices"), ("few_shot", "Few-shot Learning"),
            ("vagueness", "Vagueness"), ("prompt_polishing", "Prompt-Polishing"),
            ("multi_turn", "Multi-turn Dialogue"), ("conformity", "Conformity")))
        + " FROM ib.metrics WHERE metric = 'judge_share' AND form <> 'all' GROUP BY model ORDER BY model",
    # Paper figure 6: the output distribution (percent), judging outputs over the judging items and choice
    # outputs over the single- and multiple-choice items, per model and setting (the figure does not say
    # which settings it pools; filter "Setting").
    "ib.figure6": """
        SELECT model AS "Model", setting AS "Setting",
               round(100 * sum(numerator) FILTER (form = 'judging' AND category = 'Unknown')
                     / nullif(sum(numerator) FILTER (form = 'judging'), 0), 2) AS "Unknown (%)",
               round(100 * sum(numerator) FILTER (form = 'judging' AND category = 'True')
                     / nullif(sum(numerator) FILTER (form = 'judging'), 0), 2) AS "True (%)",
               round(100 * sum(numerator) FILTER (form = 'judging' AND category = 'False')
                     / nullif(sum(numerator) FILTER (form = 'judging'), 0), 2) AS "False (%)",
               round(100 * sum(numerator) FILTER (form IN ('single', 'multiple') AND category = 'single')
                     / nullif(sum(numerator) FILTER (form IN ('single', 'multiple')), 0), 2) AS "Single Choice (%)",
               round(100 * sum(numerator) FILTER (form IN ('single', 'multiple') AND category = 'multiple')
                     / nullif(sum(numerator) FILTER (form IN ('single', 'multiple')), 0), 2) AS "Multiple Choices (%)",
               round(100 * sum(numerator) FILTER (form IN ('single', 'multiple') AND category = 'all_wrong')
                     / nullif(sum(numerator) FILTER (form IN ('single', 'multiple')), 0), 2) AS "All Wrong (%)"
        FROM ib.metrics WHERE metric = 'OR' GROUP BY model, setting ORDER BY model, setting
    """,
})


# Every family's headline numbers in one long table (fractions, tokens or counts; `n` is what the
# value is computed over), read by the end-of-run summary, the per-model reports and the README.
# `configured`: false for a model no longer under `evaluate` (its rows stay, from an earlier
# configuration); true when no configuration has been probed yet (`llm.models` empty).
VIEWS["report.headline"] = """
    SELECT h.*, h.model = '-' OR NOT EXISTS (SELECT 1 FROM llm.models)
           OR h.model IN (SELECT name FROM llm.models WHERE coalesce(evaluated, true)) AS configured
    FROM (
    SELECT 'muso' AS family, model, task || ' ' || paradigm || ' T=' || temperature AS scope, metric, value, n
    FROM (SELECT model, task, paradigm, temperature, 'recall' AS metric, recall AS value, n_scored AS n
              FROM muso.metrics WHERE level = 0 AND variant = 'standard'
          UNION ALL SELECT model, task, paradigm, temperature, 'precision', precision, n_scored
              FROM muso.metrics WHERE level = 0 AND variant = 'standard'
          UNION ALL SELECT model, task, paradigm, temperature, 'ece_recall', ece_recall, n_confidence
              FROM muso.metrics WHERE level = 0 AND variant = 'standard')
    UNION ALL
    SELECT 'waken', model, dataset, CASE metric WHEN 'TCR' THEN 'TCR' || stage ELSE metric END, value,
           CAST(denominator AS BIGINT)
    FROM waken.metrics
    WHERE setting = 'vanilla' AND ((metric IN ('acc_direct', 'acc_wakenllm') AND sample_type = 'all')
          OR (metric = 'vague_perception_share' AND sample_type = 's')
          OR (metric = 'TCR' AND sample_type = 'all' AND stage IN ('1', '2')))
    UNION ALL
    SELECT 'ib', model, setting, 'Acc', sum(numerator) / nullif(sum(denominator), 0), CAST(sum(denominator) AS BIGINT)
    FROM ib.metrics WHERE metric = 'Acc' AND category = '-' GROUP BY model, setting
    UNION ALL
    SELECT 's1', model, 'all', CASE WHEN metric LIKE 'acc@%' THEN 'acc@k' ELSE metric END, value, n
    FROM s1.metrics
    WHERE level = 'all' AND category = '-' AND (metric IN ('pass@1', 'greedy_acc', 'mean_tokens') OR metric LIKE 'acc@%')
    UNION ALL
    SELECT 's1', '-', language, 'accepted_items', count(*), count(*) FROM s1.items GROUP BY language
    ) h
    ORDER BY family, model, scope, metric
"""

# Replies made on items that have since been rebuilt differently or removed: left out of every
# metric until the slice is run again (`--model <model>` rebuilds it).
VIEWS["report.stale"] = " UNION ALL ".join(_stale_branch(t) for t in MADE_ON if t != "ib.prompts") \
    + "\n    ORDER BY family, model, scope"


# Whether each family's main mechanism was exercised, and why not: the demo's honest summary.
VIEWS["report.mechanisms"] = f"""
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
    WHERE d.metric = 'd_vp' AND d.setting = 'vanilla' AND d.stage IN ('1', '2')
    UNION ALL
    SELECT 'muso', model, task, 'replies finish within the token budget', sum(n_scored - n_truncated) > 0,
           sum(n_scored - n_truncated) || ' of ' || sum(n_scored) || ' answered conversations not cut'
    FROM muso.metrics WHERE level = 0 AND variant = 'standard' GROUP BY model, task
    UNION ALL
    SELECT 'muso', model, task, 'a solution set read from the reply', sum(n_scored - n_parse_failures) > 0,
           sum(n_scored - n_parse_failures) || ' of ' || sum(n_scored) || ' replies read'
    FROM muso.metrics WHERE level = 0 AND variant = 'standard' GROUP BY model, task
    UNION ALL
    SELECT 'muso', model, task, 'a confidence stated', sum(n_confidence) > 0,
           sum(n_confidence) || ' of ' || sum(n_scored) || ' replies with a confidence'
    FROM muso.metrics WHERE level = 0 AND variant = 'standard' GROUP BY model, task
    UNION ALL
    SELECT 's1', '-', c.language, 'several questions accepted by every validator answer', count(i.item_id) >= 2,
           count(i.item_id) || ' accepted of ' || count(DISTINCT c.candidate_id) || ' candidate versions'
    FROM s1.candidates c LEFT JOIN s1.items i ON i.item_id = c.candidate_id GROUP BY c.language
    UNION ALL
    SELECT 'ib', model, setting, 'decided replies', count(*) FILTER (output_category <> 'undecided') > 0,
           count(*) FILTER (output_category <> 'undecided') || ' of ' || count(*) || ' replies decided'
    FROM {current('ib.responses')} GROUP BY model, setting
    ORDER BY family, model, scope, mechanism
"""


def _schema_version() -> str:
    """A digest of every DDL statement: any new table, column or view changes it, so an existing
    warehouse is brought up to date without anyone bumping a number."""
    text = repr(sorted(TABLES.items())) + repr(sorted(VIEWS.items())) + repr(sorted(TABLE_DOCS.items())) \
        + repr(sorted(COLUMN_DOCS.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _add_missing_columns(con: duckdb.DuckDBPyConnection, name: str, columns: str) -> None:
    """Columns of `TABLES[name]` that an older file's table lacks are added (nullable: older rows
    have no value for them), and NOT NULL is dropped where the table now allows NULL."""
    schema, table = name.split(".")
    have = {r[0]: r[1] for r in con.execute(
        "SELECT column_name, is_nullable FROM information_schema.columns WHERE table_schema = ? AND table_name = ?",
        [schema, table]).fetchall()}
    con.execute(f"CREATE OR REPLACE TEMP TABLE __wanted ({columns})")
    try:
        for col, typ, nullable in con.execute(
                "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                "WHERE table_name = '__wanted' ORDER BY ordinal_position").fetchall():
            if col not in have:
                con.execute(f'ALTER TABLE {name} ADD COLUMN "{col}" {typ}')
            elif nullable == "YES" and have[col] == "NO":  # a column that may now be NULL
                con.execute(f'ALTER TABLE {name} ALTER COLUMN "{col}" DROP NOT NULL')
    finally:
        con.execute("DROP TABLE IF EXISTS __wanted")


def create_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every schema, table and view that does not exist yet, and add new columns to
    tables an older version created (idempotent).

    Cheap when the file is current: one lookup of `llm.schema_version`.
    """
    version = _schema_version()
    try:
        rows = con.execute("SELECT max(version) FROM llm.schema_version").fetchall()  # consumed whole
        if rows and rows[0][0] == version:
            return
    except duckdb.Error:
        pass
    for schema in SCHEMAS:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    for name, columns in TABLES.items():
        con.execute(f"CREATE TABLE IF NOT EXISTS {name} ({columns})")
        _add_missing_columns(con, name, columns)
    for name, query in VIEWS.items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {query}")
    comment_schema(con)
    con.execute("DROP TABLE IF EXISTS llm.schema_version")
    con.execute("CREATE TABLE llm.schema_version (version VARCHAR)")
    con.execute("COMMENT ON TABLE llm.schema_version IS 'the schema this file was last brought up to'")
    con.execute("COMMENT ON COLUMN llm.schema_version.version IS 'digest of every table, view and comment'")
    con.execute("INSERT INTO llm.schema_version VALUES (?)", [version])


# -- documentation inside the warehouse: COMMENT ON every table, view and column ----------------

TABLE_DOCS: dict[str, str] = {
    "llm.calls": "One row per distinct model call (the ledger and cache): request, response, tokens, status, error.",
    "llm.models": "One row per configured model: whether its endpoint answered a probe, and why not.",
    "sources.records": "Rows loaded from source datasets (hub or local files) for WakenLLM and Instruction Boundary.",
    "muso.instances": "MuSoBench instances (TimeTabling, SubsetSum) with their complexity bin and generator parameters.",
    "muso.solutions": "Every solution of every MuSoBench instance, enumerated exactly.",
    "muso.responses": "One MuSoBench conversation (solve, confidence, recheck) per model x paradigm x variant x instance.",
    "muso.metrics": "MuSoBench precision, recall, ECE and stability per model x paradigm x temperature x variant x bin.",
    "waken.items": "WakenLLM items: half solvable (True/False or an option), half Unknown.",
    "waken.fol_checks": "FOLIO: every row of the source file read and decided by z3 from its FOL, against its gold label.",
    "waken.unknown_drafts": "ScienceQA Unknown drafts (two supporting sentences deleted) and the judge's verdict on each.",
    "waken.outcomes": "One WakenLLM reading per model x item x step x setting (direct, stages, RtG, baselines, causes).",
    "waken.metrics": "WakenLLM metrics (TCR/FCR/UCR, OCR, Conf, RPC, CGR, Deg, accuracies) in long form.",
    "ib.items": "Instruction Boundary items: judging and choice questions with tense or sparse correct labels.",
    "ib.prompts": "The prompt each model was sent per setting and item (suggestions, examples, rewrites in details).",
    "ib.responses": "One Instruction Boundary answer per model x setting x item, read and scored.",
    "ib.metrics": "Instruction Boundary metrics (Acc, SR, GR, RR, RS, OR, FR, judge share) per model x setting x form.",
    "s1.candidates": "Every S1-Bench candidate version: generated, reduced or edited by a person.",
    "s1.rounds": "Every decision of the S1-Bench construction loop, with its actor and reasons.",
    "s1.validations": "Every validator answer to an S1-Bench candidate (30 per validator), checked or judged.",
    "s1.items": "The accepted S1-Bench questions, with the candidate they descend from.",
    "s1.annotations": "Human decisions on S1-Bench candidates (written by people; they override discriminators).",
    "s1.responses": "One S1-Bench answer per model x item x mode x sample: format type, correctness, tokens.",
    "s1.metrics": "S1-Bench metrics (pass@1, acc@k, f-acc, format rates, tokens, awareness) per scope.",
    "llm.call_summary": "Calls per model x purpose x status: counts, truncated, tokens, latency, attempts.",
    "muso.table1": "MuSoBench paper table 1 (percent): CSR, ESC, NSD per task and paradigm.",
    "muso.table2": "MuSoBench paper table 2 (percent): precision, recall, ECE (r) of self-consistency strategies.",
    "waken.table3": "WakenLLM paper table 3 (percent): TCR1, TCR2, OCR, Conf_s, Conf_u, CGR, RPC.",
    "waken.table5": "WakenLLM paper table 5 (percent): TCR2 and Deg.",
    "waken.table6": ("WakenLLM paper table 6 (percent): accuracy of the direct pass, the baselines and WakenLLM "
                     "(Acc(Direct) + |TC1|/|D| + |TC2|/|D| as the table prints it; the de-duplicated form beside it)."),
    "waken.table8": "WakenLLM paper table 8 (percent): vague-perception shares V and U.",
    "waken.table9_11": "WakenLLM paper tables 9-11 (percent): TCR1 and TCR2 by sample type per misguiding rate.",
    "waken.table12": "WakenLLM paper table 12 (percent): TCR1 and TCR2 split into solvable and unsolvable samples.",
    "ib.summary": "Instruction Boundary metrics per model x setting x form in one row (fractions).",
    "ib.table3": "Instruction Boundary paper table 3 (percent): Acc_b^1, SR1, GR1, Acc_b^2, SR2, GR2, GR3.",
    "ib.figure7": "Instruction Boundary figure 7 (percent): the judging robustness score RS.",
    "ib.miscellany": ("Instruction Boundary paper table 6 (percent): disturbing-miscellany accuracy by the number of "
                      "wrong options kept beside the correct one (1..9)."),
    "ib.miscellany_items": "Instruction Boundary disturbing miscellany per option count, with the items behind it.",
    "ib.table7": "Instruction Boundary paper table 7 (percent): judge usage per setting, pooled over the forms.",
    "ib.figure6": "Instruction Boundary paper figure 6 (percent): output distribution per model and setting.",
    "report.mechanisms": "Whether each family's main mechanism was exercised per model and scope, and the counts behind it.",
    "report.headline": ("Every family's headline numbers per model (fractions; tokens; counts), with what each is "
                        "over and whether the model is still configured."),
    "report.stale": ("Replies made on items since rebuilt differently or removed, per family, model and scope: "
                     "left out of every metric until the slice is run again."),
    "s1.table3": "S1-Bench paper table 3: pass@1, acc@k, f-acc (percent) and mean response tokens.",
    "s1.table5": ("S1-Bench paper table 5: mean response tokens per language and category, with the Column Avg "
                  "of the LLMs and of the LRMs and their ratio (Improvement)."),
    "s1.table4": "S1-Bench paper table 4: pass@1 (percent) per language and category.",
    "s1.table2": "S1-Bench paper table 2: acc@n (percent) at t = 0, 0.2, 0.4 and tokens of the swept models.",
    "s1.table8": "S1-Bench paper table 8 (greedy decoding): accuracy, f-acc (percent), tokens.",
    "s1.table19": "S1-Bench paper table 19: the rate (percent) of each response format type under top-p sampling.",
    "s1.table20": "S1-Bench paper table 20: the rate (percent) of each response format type under greedy decoding.",
}

# Columns that mean the same in every table they appear in (a DDL comment overrides).
COLUMN_DOCS: dict[str, str] = {
    "model": "configured model name (see llm.models)", "dataset": "configured dataset name (the partition)",
    "partition_key": "the Dagster partition the row belongs to", "item_id": "the item's id, stable for a seed",
    "instance_id": "the instance's id, stable for a seed", "candidate_id": "the candidate version's id",
    "task": "timetabling or subsetsum", "question": "the question text as asked", "answer": "the reference answer",
    "context": "the facts or passage the question is about", "reply": "the model's reply as it produced it",
    "call_key": "key of the call in llm.calls", "error": "why the call or step failed (secrets masked)",
    "value": "the metric's value (a fraction unless the metric is a count or tokens)",
    "numerator": "the count the value's numerator is", "denominator": "the count the value is a share of",
    "gold": "the correct answer", "round": "construction round: 0 generated, n after n reductions",
    "served_model": "model id at the endpoint", "endpoint_host": "host:port of the endpoint (never credentials)",
    "sample_index": "sample number of a repeated prompt", "split": "source split (train, validation, test)",
    "source_id": "the row's id in its source", "row_number": "row position in the source file",
    "original_label": "the label as the source spells it", "choices": "answer options (JSON list)",
    "answer_index": "0-based index of the correct choice in the source", "topic": "source topic",
    "extra": "further fields (JSON)", "dataset_seed": "seed derived from the config seed for this dataset",
    "items_version": "version of the item builder", "config_seed": "the configuration's seed",
    "generator_version": "version of the generator", "solution_count": "number of solutions (complexity)",
    "solution_index": "position of the solution in its instance", "level_hi": "bin upper bound (NULL: open)",
    "n_first": "solutions in the first answer", "n_first_correct": "correct solutions in the first answer",
    "answers_second": "parsed solutions after the recheck turn", "n_second": "solutions after the recheck",
    "n_second_correct": "correct solutions after the recheck", "precision": "share of stated solutions that are right",
    "recall": "share of all solutions that were stated", "retention": "CSR: correct solutions kept by the recheck",
    "correction": "ESC: wrong solutions removed by the recheck", "discovery": "NSD: new correct solutions in the recheck",
    "paradigm": "short_cot or long_cot", "variant": "standard, exploration or a self-consistency aggregate",
    "n_instances": "instances in the group", "n_failed_calls": "conversations whose solve call failed",
    "n_parse_failures": "answered conversations with no readable solution", "n_truncated": "conversations cut at the budget",
    "n_confidence": "conversations with a usable confidence", "mean_confidence": "mean stated confidence (0-100)",
    "ece_precision": "expected calibration error against precision", "ece_recall": "expected calibration error against recall",
    "setting": "prompt setting or stage setting", "base_id": "the source question the item was built from",
    "n_options": "number of options shown", "number_scheme": "how options are numbered in prompts",
    "origin": "where the item came from (generator, hub id or file)", "form": "judging, single or multiple (IB); fact or story (WakenLLM)",
    "label_type": "tense or sparse: the kind of the correct label", "subcategory": "S1-Bench subcategory",
    "category": "the category (S1: reasoning, knowledge, instruction following, analysis)", "language": "en or zh",
    "decision": "what was decided", "validator": "the validator model", "temperature": "decoding temperature",
    "detail": "reasons, verdict explanation or similarity", "rounds_taken": "difficulty reductions before acceptance",
    "check_spec": "exact-answer check (JSON); NULL: judged", "annotator": "who decided", "note": "the annotator's note",
    "has_thinking": "a thinking part was found", "has_answer": "a final-answer part was found",
    "completion_tokens": "tokens of the reply (server's count)", "finish_reason": "stop, length (truncated), ...",
    "prompt_tokens": "tokens of the prompt (server's count)", "latency_s": "seconds the request took",
    "run_id": "the Dagster run that made the call", "created_at": "when the call was sent (UTC)",
    "finished_at": "when the call finished (UTC)", "name": "configured model name", "reachable": "the endpoint answered",
    "probe_prompt": "the probe sent", "probe_answer": "the probe's reply", "probe_latency_s": "seconds the probe took",
    "probe_cached": "the probe was answered from the ledger", "checked_at": "when the model was probed (UTC)",
    "n_failed": "replies left out because the call or its judgement failed",
    "item_digest": "items: digest of the item's content; replies: the digest of the item they were made on",
}


VIEW_COLUMN_DOCS: dict[str, str] = {
    "configured": "the model is listed under evaluate in the configuration last probed (false: rows from an earlier one)",
    "replies": "stale replies (made on an item since rebuilt differently or removed)",
    "item_gone": "stale replies whose item is no longer stored", "item_changed": "stale replies whose item now differs",
    "table": "the table the replies are in",
    "Model": "model name", "Dataset": "dataset name", "Setting": "prompt setting", "Task": "TimeTabling or SubsetSum",
    "Paradigm": "Short-CoT or Long-CoT", "Temperature": "decoding temperature", "Method": "single path or aggregation",
    "OCR": "overall converting rate: Vague Perception items converted in stage 1 or 2, percent",
    "Conf_s": "label conformity on solvable samples (M=0% minus M=100%), percent",
    "Conf_u": "label conformity on unsolvable samples (M=0% minus M=100%), percent",
    "CGR": "stage-2 true conversions with the earlier reasoning shown minus without, percent",
    "RPC": "stage-1 true conversions with the stage-1 reasoning shown minus without, percent",
    "Deg": "degradation: stage-1 false conversions answered Unknown in stage 2, percent",
    "V": "solvable samples answered Unknown, percent", "U": "Unknown samples whose explanation failed, percent",
    "M (%)": "misguiding rate: share of assigned labels that are wrong", "WakenLLM": "Acc(WakenLLM), percent",
    "Direct": "accuracy of the direct pass, percent", "Acc_b^1": "judging balanced accuracy (SR1 + GR1) / 2, percent",
    "Acc_b^2": "choice balanced accuracy (SR2 + GR2 + GR3) / 3, percent",
    "SR1": "judging accuracy on tense-label items, percent", "GR1": "judging accuracy on sparse-label items, percent",
    "SR2": "single-choice accuracy on tense-label items, percent",
    "GR2": "single-choice accuracy on sparse-label items, percent",
    "GR3": "multiple-choice accuracy on sparse-label items, percent",
    "RS": "robustness score: harmonic mean of SR and GR, percent", "pass@1": "mean correctness over k samples, percent",
    "acc@k": "share of items with all k samples correct, percent", "f-acc": "share of well formatted replies, percent",
    "Tokens": "mean response tokens (endless replies left out)", "tokens": "mean response tokens (endless replies left out)",
    "acc": "greedy accuracy, percent", "Avg": "mean response tokens over all items",
    "Precision (%)": "mean precision", "Recall (%)": "mean recall", "ECE (r)": "calibration error against recall, percent",
    "n_options": "options shown", "accuracy": "accuracy (fraction)", "items": "items behind the accuracy",
    "purpose": "what the calls were for", "status": "ok or failed", "calls": "calls", "truncated": "calls cut at the budget",
    "mean_latency_s": "mean seconds per call", "attempts": "attempts over all runs",
    "family": "benchmark family: muso, waken, ib or s1",
    "scope": "what the number covers: task / paradigm / temperature, dataset, setting, or language",
    "n": "replies, items or instances the value is computed over",
    "mechanism": "what the family does that the run should have exercised",
    "reached": "true when the rows show the mechanism at work", "detail": "the counts behind `reached`",
}


def _view_column_doc(col: str) -> str:
    if col in VIEW_COLUMN_DOCS and VIEW_COLUMN_DOCS[col]:
        return VIEW_COLUMN_DOCS[col]
    m = re.fullmatch(r"TCR(\d)(?: ([SUV]))?", col)
    if m:
        part = {"S": ", solvable samples", "V": ", solvable samples", "U": ", unsolvable samples", None: ""}[m.group(2)]
        return f"true converting rate at stage {m.group(1)}{part}, percent"
    m = re.fullmatch(r"(TimeTabling|SubsetSum) (CSR|ESC|NSD) \(%\)", col)
    if m:
        what = {"CSR": "correct solutions retained", "ESC": "wrong solutions corrected", "NSD": "new solutions discovered"}
        return f"{m.group(1)}: {what[m.group(2)]} in the recheck turn, percent"
    m = re.fullmatch(r"(EN|ZH) (Rsn|Kno|If|Ana|Avg)", col)
    if m:
        return f"mean response tokens, {m.group(1)} questions, {m.group(2)}"
    if re.fullmatch(r"[123]\d\d", col):
        return f"share of replies of response format type {col} (paper table 9), percent"
    if col in ("CoT", "Few-shot", "Tree-of-Thought", "Plan & Solve", "Self-Reflection"):
        return f"accuracy with the {col} prompt baseline, percent"
    return COLUMN_DOCS.get(col) or COLUMN_DOCS.get(col.lower(), "") or f"{col} (see the view's comment)"


def _column_docs(columns_ddl: str) -> dict[str, str]:
    """Column name -> its documentation: the DDL's own `--` comment (with continuation lines), else
    COLUMN_DOCS."""
    docs: dict[str, str] = {}
    last = None
    for line in columns_ddl.strip().splitlines():
        stripped = line.strip()
        if stripped.startswith("--") and last:
            docs[last] += " " + stripped[2:].strip()
            continue
        m = re.match(r"(\w+)\s+[A-Z]", stripped)
        if not m:
            continue
        last = m.group(1)
        comment = stripped.split("--", 1)[1].strip() if "--" in stripped else COLUMN_DOCS.get(last, "")
        docs[last] = comment
    return docs


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def comment_schema(con: duckdb.DuckDBPyConnection) -> None:
    """COMMENT ON every table, view and column, so DESCRIBE and any SQL client explain the warehouse."""
    for name, columns in TABLES.items():
        con.execute(f"COMMENT ON TABLE {name} IS {_quote(TABLE_DOCS.get(name, ''))}")
        for col, doc in _column_docs(columns).items():
            if doc:
                con.execute(f"COMMENT ON COLUMN {name}.{col} IS {_quote(doc)}")
    for name in VIEWS:
        con.execute(f"COMMENT ON VIEW {name} IS {_quote(TABLE_DOCS.get(name, ''))}")
        schema, view = name.split(".")
        for (col,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE schema_name = ? AND table_name = ? "
                                  "AND database_name = current_database()", [schema, view]).fetchall():
            quoted = '"' + col.replace('"', '""') + '"'
            con.execute(f"COMMENT ON COLUMN {name}.{quoted} IS {_quote(_view_column_doc(col))}")
