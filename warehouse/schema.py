"""Every table of the warehouse, in one place, so analysts and code read the same definitions.

Schemas: `llm` (the model-call ledger and the model probe), `sources` (loaded
source datasets), and one per benchmark family (`muso`, `waken`, `s1`, `ib`).
Tables are created if missing; a family adds its DDL to `TABLES` below.
"""

from __future__ import annotations

import hashlib

import duckdb

SCHEMAS = ("llm", "sources", "muso", "waken", "s1", "ib")

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
        reasoning_text    VARCHAR,              -- reasoning the server returned in a separate field
        reasoning_tokens  INTEGER               -- usage.completion_tokens_details.reasoning_tokens
    """,
    "llm.models": """
        name            VARCHAR PRIMARY KEY,
        kind            VARCHAR NOT NULL,       -- 'embedded' or 'remote'
        served_model    VARCHAR,
        endpoint_host   VARCHAR,
        reachable       BOOLEAN NOT NULL,
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
        generator_version VARCHAR NOT NULL
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
        temperature       DOUBLE                -- decoding temperature (a sweep is a dimension, section 4.3)
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
        items_version   VARCHAR NOT NULL
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
        error        VARCHAR
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
        items_version  VARCHAR NOT NULL
    """,
    "ib.prompts": """
        dataset  VARCHAR NOT NULL,
        setting  VARCHAR NOT NULL,
        item_id  VARCHAR NOT NULL,
        model    VARCHAR NOT NULL,            -- the model asked (polished prompts differ per polisher run)
        prompt   VARCHAR NOT NULL,            -- the last user message sent
        details  JSON NOT NULL                -- suggested label, example label type, polished_by and original, turn
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
        error           VARCHAR
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
        origin         VARCHAR NOT NULL
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
        mode              VARCHAR NOT NULL,   -- sample (top-p) or greedy
        sample_index      INTEGER NOT NULL,
        format_type       INTEGER,            -- table 9: 100/101, 200-207, 300/301
        has_thinking      BOOLEAN NOT NULL,
        has_answer        BOOLEAN NOT NULL,
        judged_part       VARCHAR,            -- answer when the reply was scored, else NULL
        correct           BOOLEAN,            -- a reasoning model's malformed reply is not correct (not judged)
        method            VARCHAR NOT NULL,   -- exact, judge, judge_unreadable, malformed (not scored), empty,
                                              -- call_failed, judge_failed
        detail            VARCHAR,
        completion_tokens INTEGER,
        finish_reason     VARCHAR,
        difficulty_class  INTEGER,            -- table 23: 1 easy, 2 difficult, 3 neutral, 4 no comment
        redundancy        JSON,               -- max similarity of segments 2..k to earlier ones (C.4)
        reply             VARCHAR,
        call_key          VARCHAR NOT NULL,
        well_formatted    BOOLEAN             -- format 100 / 101; NULL for a model that does not think first
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


def _s1_tokens(prefix: str = "") -> str:
    cells = []
    for lang in ("en", "zh"):
        for short, cat in (("Rsn", "reasoning"), ("Kno", "knowledge"), ("If", "instruction following"),
                           ("Ana", "analysis")):
            cells.append(f"round(max(value) FILTER (metric = '{prefix}mean_tokens' AND level = 'language_category' "
                         f"AND scope = '{lang}:{cat}'), 1) AS \"{lang.upper()} {short}\"")
        cells.append(f"round(max(value) FILTER (metric = '{prefix}mean_tokens' AND level = 'language' "
                     f"AND scope = '{lang}'), 1) AS \"{lang.upper()} Avg\"")
    cells.append(f"round(max(value) FILTER (metric = '{prefix}mean_tokens' AND level = 'all'), 1) AS \"Avg\"")
    return ",\n               ".join(cells)


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
    # Table 5: mean response tokens (top-p) per language and category, endless replies left out.
    "s1.table5": f"""
        SELECT model AS "Model", {_s1_tokens()}
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
               {_pct(_waken('acc_wakenllm'))} AS "WakenLLM"
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
    # Paper table 6 layout: disturbing-miscellany accuracy by number of options.
    "ib.miscellany": """
        SELECT model, CAST(category AS INTEGER) AS n_options, value AS accuracy, denominator AS items
        FROM ib.metrics WHERE metric = 'Acc_by_options' ORDER BY model, n_options
    """,
})


def _schema_version() -> str:
    """A digest of every DDL statement: any new table, column or view changes it, so an existing
    warehouse is brought up to date without anyone bumping a number."""
    text = repr(sorted(TABLES.items())) + repr(sorted(VIEWS.items()))
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
    con.execute("DROP TABLE IF EXISTS llm.schema_version")
    con.execute("CREATE TABLE llm.schema_version (version VARCHAR)")
    con.execute("INSERT INTO llm.schema_version VALUES (?)", [version])
