"""The warehouse's schema: the shared tables, every family's, and the views across families.

Schemas: `llm` (the model-call ledger and the model probe), `sources` (loaded source datasets),
`runs` (what each step of the run command last ran with), one per benchmark family (each
family's tables, views and their docs in `warehouse/<key>.py`, the families listed once in
`configuration/families.py`), and `report` (views over every family, composed from the
families' `HEADLINE` and `MECHANISMS` parts). Tables are created if missing, and an existing
file gains new columns (`create_schema`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

import duckdb

from configuration.families import FAMILIES
from warehouse import parts
from warehouse.sql import current_rows, literal, made_on_join

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
        reasoning_tokens  INTEGER,              -- usage.completion_tokens_details.reasoning_tokens; with reasoning_text
                                                -- NULL: reasoning hidden by the API
        cached_prompt_tokens INTEGER            -- usage.prompt_tokens_details.cached_tokens: prompt tokens the provider
                                                -- served from its prompt cache (priced as cached input)
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
    # Batch mode (llm_calls/batch.py): one row per batch file made of one ledger batch's pending requests.
    "llm.batches": """
        batch_id          VARCHAR PRIMARY KEY,  -- <model>.<purpose>.<digest of its keys>: the same requests, the same id
        model             VARCHAR NOT NULL,     -- configured model name
        model_identity    VARCHAR NOT NULL,     -- what its requests' keys hash (llm.calls.model_identity)
        purpose           VARCHAR,              -- the step its requests are for, e.g. 'muso.standard.solve'
        mode              VARCHAR NOT NULL,     -- 'api' (the provider's Batch API) or 'files' (exported, imported by hand)
        n_requests        INTEGER NOT NULL,     -- lines of its input file
        input_file        VARCHAR,              -- files: the path written; api: the provider's file id
        provider_batch_id VARCHAR,              -- api: the provider's batch id (a resumed run polls it, never creates twice)
        status            VARCHAR NOT NULL,     -- files: exported, imported; api: creating, submitted, read, failed
        output_file       VARCHAR,              -- the provider's output file id, or the imported file's path
        error_file        VARCHAR,              -- the provider's error file id
        n_ok              INTEGER,              -- requests answered once the results were read
        n_failed          INTEGER,              -- requests stored as failures (error lines, expired, missing)
        error             VARCHAR,              -- why the batch itself failed, if it did
        created_at        TIMESTAMP NOT NULL,
        finished_at       TIMESTAMP             -- when its results were read into llm.calls
    """,
    "llm.batch_requests": """
        batch_id          VARCHAR NOT NULL,     -- see llm.batches
        line              INTEGER NOT NULL,     -- 1-based line of the batch input file
        key               VARCHAR NOT NULL,     -- the ledger key, the line's custom_id
        model             VARCHAR NOT NULL,     -- configured model name
        model_identity    VARCHAR NOT NULL,     -- an import takes the line only for a model of this identity
        purpose           VARCHAR,              -- as in llm.calls
        sample_index      INTEGER NOT NULL,     -- as in llm.calls
        request           JSON NOT NULL,        -- messages and the parameters sent, as llm.calls.request
        PRIMARY KEY (batch_id, key)
    """,
    # The command's steps (runner/up_to_date.py): what each ran with when it last ran, so a rerun skips
    # the steps whose inputs have not changed.
    "runs.steps": """
        step        VARCHAR PRIMARY KEY,  -- the step as the command names it: its assets [partition]
        job         VARCHAR NOT NULL,     -- the Dagster job it runs (build_waken, evaluate_waken, ...)
        family      VARCHAR NOT NULL,     -- the family key ('' for the models probe and the summary)
        stage       VARCHAR,              -- 'items', 'responses' or 'metrics' (NULL: the probe, the summary)
        partition   VARCHAR,              -- its Dagster partition key
        base        VARCHAR,              -- the dataset or level of its partition
        inputs      VARCHAR NOT NULL,     -- digest of the code, package versions, configuration and named files
        ok          BOOLEAN NOT NULL,     -- succeeded, no failed call or ERROR check, not a batch export
        run_id      VARCHAR NOT NULL,     -- its Dagster run
        started_at  TIMESTAMP NOT NULL,   -- when its run started (UTC): what it reads had ended before, or it is stale
        finished_at TIMESTAMP             -- when its run ended (UTC); NULL: started and not recorded as ended
                                          -- (running, killed, or run outside the command: never up to date)
    """,
    # One row per run of the command that ran a step: its time, its CPU and its calls, so that the
    # plan can say what the client's own work costs on this machine (reporting/plan.py client_cpu).
    "runs.commands": """
        command_id  VARCHAR PRIMARY KEY,  -- a fresh id per command run
        started_at  TIMESTAMP NOT NULL,   -- when the command's module was loaded (UTC)
        finished_at TIMESTAMP NOT NULL,   -- when its last step ended (UTC)
        wall_s      DOUBLE NOT NULL,      -- seconds between the two
        cpu_s       DOUBLE NOT NULL,      -- the process's CPU seconds (user + system) by then, its imports included
        steps       INTEGER NOT NULL,     -- steps run (those up to date not counted)
        calls       INTEGER NOT NULL,     -- calls its steps asked for: cached, answered and failed
        new_calls   INTEGER NOT NULL,     -- of those, sent to a model (answered or failed)
        calls_s     DOUBLE,               -- seconds from the first call counted to the last (NULL: no call)
        calls_cpu_s DOUBLE,               -- CPU seconds of the call loop, the thread that sends the calls and reads the replies
        cores       INTEGER NOT NULL,     -- cores the process could use
        load_avg    DOUBLE                -- the machine's 1-minute load average as the command started (NULL: unknown)
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
    # The 95 % interval of each headline number (reporting/stats.py), from its units (`report.units`);
    # written by the `model_report` step after every family's metrics. `report.headline` shows it beside
    # the number it was computed for (an interval of an older value is not shown).
    "report.intervals": """
        family    VARCHAR NOT NULL,     -- benchmark family (as report.headline names it)
        model     VARCHAR NOT NULL,     -- configured model name
        scope     VARCHAR NOT NULL,     -- what the number covers (as report.headline names it)
        metric    VARCHAR NOT NULL,     -- the headline metric
        value     DOUBLE,               -- the headline number the interval is for
        lo        DOUBLE,               -- lower end of the 95 % interval
        hi        DOUBLE,               -- upper end
        method    VARCHAR NOT NULL,     -- wilson, bootstrap (over units, clustered by item), or why none
        units     INTEGER NOT NULL,     -- items (or instances) the number rests on
        unit_set  VARCHAR NOT NULL,     -- digest of those units: equal digests, same items
        PRIMARY KEY (family, model, scope, metric)
    """,
    # Every pair of models on every headline number, on the units both were scored on (reporting/stats.py).
    "report.compare": """
        family    VARCHAR NOT NULL,     -- benchmark family (as report.headline names it)
        scope     VARCHAR NOT NULL,     -- what the number covers (as report.headline names it)
        metric    VARCHAR NOT NULL,     -- the headline metric
        model_a   VARCHAR NOT NULL,     -- model A (the first by name)
        model_b   VARCHAR NOT NULL,     -- model B
        shared    INTEGER NOT NULL,     -- units both models were scored on (the comparison is over these only)
        only_a    INTEGER NOT NULL,     -- units only model_a was scored on (left out)
        only_b    INTEGER NOT NULL,     -- units only model_b was scored on (left out)
        value_a   DOUBLE,               -- model_a's number on the shared units
        value_b   DOUBLE,               -- model_b's number on the shared units
        diff      DOUBLE,               -- value_a - value_b
        lo        DOUBLE,               -- paired bootstrap 95 % interval of diff: lower end
        hi        DOUBLE,               -- upper end
        test      VARCHAR NOT NULL,     -- mcnemar_exact (yes/no units), paired_bootstrap, or why none
        p_value   DOUBLE,               -- two-sided
        PRIMARY KEY (family, scope, metric, model_a, model_b)
    """,
}


# -- the families' parts (configuration/families.py lists them; warehouse/<key>.py holds each) ---------
FAMILY_PARTS: dict[str, parts.WarehouseParts] = {f.key: parts.of(f) for f in FAMILIES}
SCHEMAS = ("llm", "sources", "runs", *FAMILY_PARTS, "report")
for _parts in FAMILY_PARTS.values():
    TABLES.update(_parts.tables)

# -- which items a response was made on (issue 25) ------------------------------------------------
# Each family's items table and the columns that name one item; the tables of replies to those
# items share the columns. Every row of both carries `item_digest`: the warehouse writer stamps an
# item with the digest of its content and a reply with the digest of its item as stored when the
# reply is written. A reply whose item is gone, or now holds another question (another seed or
# configuration rebuilt the items), is stale: the metrics leave it out and `report.stale` lists it.
ITEM_KEYS: dict[str, tuple[str, ...]] = {k: v for p in FAMILY_PARTS.values() for k, v in p.item_keys.items()}
MADE_ON: dict[str, str] = {k: v for p in FAMILY_PARTS.values() for k, v in p.made_on.items()}


def current(table: str, alias: str = "") -> str:
    """A subquery of the rows of a reply table made on the items stored now (same digest), for the
    metrics: `SELECT * FROM {current('ib.responses')} ORDER BY ...`."""
    return current_rows(table, MADE_ON[table], ITEM_KEYS[MADE_ON[table]], alias)


def _stale_branch(table: str) -> str:
    """`report.stale`'s rows for one reply table: its replies whose item is gone or differs."""
    keys = ITEM_KEYS[MADE_ON[table]]
    scope = f"r.{keys[0]}" if len(keys) > 1 else "'all'"  # the partition column, if the family has one
    item = f"i.{keys[-1]}"  # NULL when no stored item matched
    return f"""
    SELECT '{table.split(".")[0]}' AS family, r.model, {scope} AS scope, '{table}' AS "table", count(*) AS replies,
           count(*) FILTER ({item} IS NULL) AS item_gone, count(*) FILTER ({item} IS NOT NULL) AS item_changed
    FROM {table} r LEFT JOIN {made_on_join(MADE_ON[table], keys)}
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


for _parts in FAMILY_PARTS.values():
    VIEWS.update(_parts.views)


def _union(sqls: Iterable[str]) -> str:
    return "\n    UNION ALL".join(sqls)


# Every family's headline numbers in one long table (fractions, tokens or counts; `n` is what the
# value is computed over), read by the end-of-run summary, the per-model reports and the README.
# `configured`: false for a model no longer under `evaluate` (its rows stay, from an earlier
# configuration); true when no configuration has been probed yet (`llm.models` empty).
VIEWS["report.headline"] = f"""
    SELECT h.*, h.model = '-' OR NOT EXISTS (SELECT 1 FROM llm.models)
           OR h.model IN (SELECT name FROM llm.models WHERE coalesce(evaluated, true)) AS configured,
           i.lo, i.hi, i.method AS interval, i.unit_set
    FROM ({_union(p.headline for p in FAMILY_PARTS.values())}
    ) h
    LEFT JOIN report.intervals i ON i.family = h.family AND i.model = h.model AND i.scope = h.scope
         AND i.metric = h.metric AND i.value IS NOT DISTINCT FROM h.value
    ORDER BY h.family, h.model, h.scope, h.metric
"""

# The units each headline number rests on (one row per item or instance: `value = sum(num) / sum(den)`,
# or for an ECE the calibration error of its units' (conf, num) pairs), from which `report.intervals`,
# `report.compare` and `report.item_stats` are made.
_NO_UNITS = ("SELECT NULL::VARCHAR AS family, NULL::VARCHAR AS model, NULL::VARCHAR AS scope, NULL::VARCHAR AS metric, "
             "NULL::VARCHAR AS unit, NULL::DOUBLE AS num, NULL::DOUBLE AS den, NULL::DOUBLE AS conf WHERE false")
VIEWS["report.units"] = "\n    UNION ALL".join(
    "\n    SELECT * FROM (" + (p.headline_units or _NO_UNITS) + ")" for p in FAMILY_PARTS.values())

# Each model's answer per unit where a family's answers are labels (`WarehouseParts.item_answers`: IB's options,
# WakenLLM's True/False/Unknown), with the gold and whether it was scored right.
_NO_ANSWERS = ("SELECT NULL::VARCHAR AS family, NULL::VARCHAR AS model, NULL::VARCHAR AS scope, NULL::VARCHAR AS metric, "
               "NULL::VARCHAR AS unit, NULL::VARCHAR AS answer, NULL::VARCHAR AS gold, NULL::BOOLEAN AS correct "
               "WHERE false")
VIEWS["report.item_answers"] = "\n    UNION ALL".join(
    "\n    SELECT * FROM (" + (p.item_answers or _NO_ANSWERS) + ")" for p in FAMILY_PARTS.values())

# Item statistics for benchmark builders: per item (unit) of each headline number scored by two or
# more models, its difficulty (the mean score over models), its discrimination (the correlation across
# models of the item's score with the model's score on the other items: near 0 or below, the item
# does not separate stronger models from weaker ones), the answer most models gave where answers are
# labels (`report.item_answers`), and a suspect flag: possible label errors first (every model gave
# the same answer and it is scored wrong; a majority agrees on an answer scored wrong), then items no
# model gets right, then items stronger models get wrong more often.
VIEWS["report.item_stats"] = """
    WITH scored AS (SELECT family, scope, metric, unit, model, num / den AS score, num, den
                    FROM report.units WHERE conf IS NULL AND den > 0 AND model <> '-'),
    -- scores of right and wrong only (a share per item): not tokens, not a sum of several conversions
    u AS (SELECT * FROM scored WHERE (family, scope, metric) IN (
              SELECT family, scope, metric FROM scored GROUP BY ALL HAVING min(score) >= 0 AND max(score) <= 1)),
    totals AS (SELECT family, scope, metric, model, sum(num) AS num, sum(den) AS den FROM u GROUP BY ALL),
    rest AS (SELECT u.*, (t.num - u.num) / nullif(t.den - u.den, 0) AS rest_score
             FROM u JOIN totals t USING (family, scope, metric, model)),
    stats AS (SELECT family, scope, metric, unit, count(*) AS models, avg(score) AS difficulty,
                     CASE WHEN count(*) >= 3 AND NOT isnan(corr(score, rest_score)) THEN corr(score, rest_score) END
                         AS discrimination
              FROM rest GROUP BY family, scope, metric, unit HAVING count(*) >= 2),
    -- the answers given per unit, most frequent first (ties in answer order: the same on every run)
    given AS (SELECT family, scope, metric, unit, answer, any_value(gold) AS gold, bool_and(correct) AS correct,
                     count(DISTINCT model) AS n, sum(count(DISTINCT model)) OVER w AS answered,
                     row_number() OVER (w ORDER BY count(DISTINCT model) DESC, answer) AS rank
              FROM report.item_answers GROUP BY family, scope, metric, unit, answer
              WINDOW w AS (PARTITION BY family, scope, metric, unit)),
    top AS (SELECT * FROM given WHERE rank = 1)
    SELECT s.family, s.scope, s.metric, s.unit AS item, s.models, s.difficulty, s.discrimination,
           CASE WHEN 2 * t.n > t.answered THEN t.answer END AS majority_answer, t.gold,
           CASE WHEN t.answered >= 2 AND t.n = t.answered AND NOT t.correct
                    THEN 'every model answered ' || t.answer || ', scored wrong against the gold ' || t.gold
                WHEN t.answered >= 3 AND 2 * t.n > t.answered AND NOT t.correct
                    THEN t.n || ' of ' || t.answered || ' models answered ' || t.answer || ', scored wrong against the gold '
                         || t.gold
                WHEN s.models >= 2 AND s.difficulty = 0 THEN 'every model scored 0'
                WHEN s.discrimination < 0 THEN 'stronger models score lower'
           END AS suspect
    FROM stats s LEFT JOIN top t ON t.family = s.family AND t.scope = s.scope AND t.metric = s.metric
         AND t.unit = s.unit
    ORDER BY s.family, s.scope, s.metric, s.difficulty, item
"""

# Near-duplicate items of a family, in one split (dataset, level, language) or across two: the items'
# texts (`WarehouseParts.item_texts`) lower-cased with every run of characters that are no letter or digit made one
# space, then compared by edit distance: similarity = 1 - Levenshtein distance / the longer length,
# both in UTF-8 bytes as DuckDB's `levenshtein` counts them (so any script compares, Chinese too).
# Pairs at 0.9 or more that state the same numbers in the same order are listed ("12 plus 3" and
# "12 plus 4" are one edit apart yet two questions); texts equal once normalised always are.
# Comparing every pair is quadratic (a paper-scale family took minutes), so the pairs compared are
# MinHash candidates, as corpus deduplication does (datatrove, text-dedup): per distinct text, the
# least of 16 seeded hashes over its character 5-grams, leaving out 5-grams that more than 50 texts
# share (a template's common words are no evidence); texts that agree on 2 of the 16 are compared.
# A pair at the 0.9 edge whose edits are scattered can share few 5-grams and be missed:
# `benchmarks/near_duplicates.py` measures that recall, and the time, on planted pairs.
_NO_TEXTS = ("SELECT NULL::VARCHAR AS family, NULL::VARCHAR AS split, NULL::VARCHAR AS item, NULL::VARCHAR AS text "
             "WHERE false")
NEAR_DUPLICATE_SIMILARITY = 0.9
VIEWS["report.near_duplicates"] = """
    WITH t AS (SELECT family, split, item, text,
                      trim(regexp_replace(lower(text), '[^\\p{L}\\p{N}]+', ' ', 'g')) AS norm
               FROM (""" + "\n    UNION ALL ".join(
    "SELECT * FROM (" + (p.item_texts or _NO_TEXTS) + ")" for p in FAMILY_PARTS.values()) + """)),
    g AS (SELECT DISTINCT family, norm,
                 unnest(CASE WHEN length(norm) <= 5 THEN [norm]
                             ELSE list_transform(range(1, length(norm) - 3), i -> substr(norm, i, 5)) END) AS gram
          FROM t),
    rare AS (SELECT * FROM g QUALIFY count(*) OVER (PARTITION BY family, gram) <= 50),
    minhash AS (SELECT family, norm, seed, min(hash(gram, seed)) AS h
                FROM rare, range(16) AS seeds(seed) GROUP BY ALL),
    candidates AS (SELECT a.family, a.norm AS norm_a, b.norm AS norm_b
                   FROM minhash a JOIN minhash b ON b.family = a.family AND b.seed = a.seed AND b.h = a.h
                                               AND a.norm < b.norm
                   GROUP BY ALL HAVING count(*) >= 2),
    scored AS (SELECT family, norm_a, norm_b,
                       1 - levenshtein(norm_a, norm_b) / greatest(strlen(norm_a), strlen(norm_b)) AS similarity
                FROM candidates
                WHERE abs(strlen(norm_a) - strlen(norm_b))
                      <= (1 - """ + str(NEAR_DUPLICATE_SIMILARITY) + """) * greatest(strlen(norm_a), strlen(norm_b))
                  AND regexp_extract_all(norm_a, '[0-9]+') = regexp_extract_all(norm_b, '[0-9]+')
                UNION ALL SELECT DISTINCT family, norm, norm, 1.0 FROM t),
    matched AS (SELECT s.family, s.similarity, a.split AS sa, a.item AS ia, a.text AS ta,
                       b.split AS sb, b.item AS ib, b.text AS tb, (a.split, a.item) < (b.split, b.item) AS ordered
                FROM scored s
                JOIN t a ON a.family = s.family AND a.norm = s.norm_a
                JOIN t b ON b.family = s.family AND b.norm = s.norm_b
                          AND (s.norm_a < s.norm_b OR (a.split, a.item) < (b.split, b.item))
                WHERE s.similarity >= """ + str(NEAR_DUPLICATE_SIMILARITY) + """)
    SELECT family, if(ordered, sa, sb) AS split_a, if(ordered, ia, ib) AS item_a,
           if(ordered, sb, sa) AS split_b, if(ordered, ib, ia) AS item_b, sa <> sb AS across_splits, similarity,
           if(ordered, ta, tb) AS text_a, if(ordered, tb, ta) AS text_b
    FROM matched
    ORDER BY family, similarity DESC, split_a, item_a, split_b, item_b
"""

# Replies made on items that have since been rebuilt differently or removed: left out of every
# metric until the slice is run again (`--model <model>` rebuilds it).
_LISTED = [t for p in FAMILY_PARTS.values() for t in p.stale_tables]
VIEWS["report.stale"] = " UNION ALL ".join(_stale_branch(t) for t in _LISTED) + "\n    ORDER BY family, model, scope"

# Whether each family's main mechanism was exercised, and why not: the demo's honest summary.
VIEWS["report.mechanisms"] = f"""{_union(p.mechanisms for p in FAMILY_PARTS.values())}
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
        "SELECT column_name, is_nullable FROM information_schema.columns WHERE table_catalog = current_database() "
        "AND table_schema = ? AND table_name = ?", [schema, table]).fetchall()}
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


def on_lake(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether `con`'s current database is a DuckLake (warehouse/lake.py), not a DuckDB file."""
    rows = con.execute("SELECT type FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    return bool(rows) and rows[0][0] == "ducklake"


def lake_columns(columns: str) -> str:
    """A table's DDL as a DuckLake takes it: DuckLake enforces no key, so `PRIMARY KEY` becomes
    NOT NULL and a table-level key line goes (the writers keep keys unique: `OnConflict.merge`)."""
    lines = columns.strip("\n").splitlines()
    out: list[str] = []
    for line in lines:
        code, dashes, comment = line.partition("--")
        if re.fullmatch(r"\s*PRIMARY KEY\s*\([^)]*\)\s*,?\s*", code):
            for k in range(len(out) - 1, -1, -1):  # the column before loses its separating comma
                before, d, c = out[k].partition("--")
                if before.strip():
                    out[k] = re.sub(r",(\s*)$", r"\1", before) + d + c
                    break
            continue
        if "PRIMARY KEY" in code:
            code = code.replace("PRIMARY KEY", "" if "NOT NULL" in code else "NOT NULL")
        out.append(code + dashes + comment)
    return "\n".join(out)


def create_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every schema, table and view that does not exist yet, and add new columns to
    tables an older version created (idempotent). On a DuckLake, without keys (`lake_columns`).

    Cheap when the file is current: one lookup of `llm.schema_version`.
    """
    version = _schema_version()
    try:
        rows = con.execute("SELECT max(version) FROM llm.schema_version").fetchall()  # consumed whole
        if rows and rows[0][0] == version:
            return
    except duckdb.Error:
        pass
    lake = on_lake(con)
    # one transaction for every statement: on a DuckLake each would be a catalog commit of its own
    # (~40 ms), on a file a WAL commit of its own (a fresh file's schema took 1.5 s, now 0.5 s)
    con.execute("BEGIN TRANSACTION")
    try:
        _create(con, version, lake)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _create(con: duckdb.DuckDBPyConnection, version: str, lake: bool) -> None:
    for schema in SCHEMAS:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    existing = {f"{s}.{t}" for s, t in con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()}
    for name, columns in TABLES.items():
        columns = lake_columns(columns) if lake else columns
        if name in existing:  # an older file's table: what this version adds to it
            _add_missing_columns(con, name, columns)
        else:
            con.execute(f"CREATE TABLE {name} ({columns})")
    for name, query in VIEWS.items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {query}")
    comment_schema(con, view_columns=not lake)
    con.execute("DROP TABLE IF EXISTS llm.schema_version")
    con.execute("CREATE TABLE llm.schema_version (version VARCHAR)")
    con.execute("COMMENT ON TABLE llm.schema_version IS 'the schema this file was last brought up to'")
    con.execute("COMMENT ON COLUMN llm.schema_version.version IS 'digest of every table, view and comment'")
    con.execute("INSERT INTO llm.schema_version VALUES (?)", [version])


# -- documentation inside the warehouse: COMMENT ON every table, view and column ----------------

TABLE_DOCS: dict[str, str] = {
    "llm.calls": "One row per distinct model call (the ledger and cache): request, response, tokens, status, error.",
    "llm.models": "One row per configured model: whether its endpoint answered a probe, and why not.",
    "llm.batches": "One row per batch file (batch mode): its model, mode, status and how many of its requests were answered.",
    "llm.batch_requests": "The requests of each batch file, by ledger key (the custom_id of its line).",
    "runs.steps": ("One row per step of the run command: the inputs it last ran with and how it ended (a "
                   "rerun skips the steps up to date)."),
    "runs.commands": ("One row per run of the command that ran a step: wall, CPU and calls, what the plan's "
                      "client time is measured from."),
    "sources.records": "Rows loaded from source datasets (hub or local files) for WakenLLM and Instruction Boundary.",
    "llm.call_summary": "Calls per model x purpose x status: counts, truncated, tokens, latency, attempts.",
    **{k: v for p in FAMILY_PARTS.values() for k, v in p.table_docs.items()},
    "report.mechanisms": "Whether each family's main mechanism was exercised per model and scope, and the counts behind it.",
    "report.headline": ("Every family's headline numbers per model (fractions; tokens; counts), with what each is "
                        "over and whether the model is still configured."),
    "report.intervals": "The 95 % interval of each headline number (Wilson or bootstrap over its units), per model.",
    "report.compare": ("Every pair of models on every headline number, over the units both were scored on: the "
                       "difference, its paired bootstrap interval and a paired test."),
    "report.units": "The items (or instances) each headline number rests on, with each one's share of the number.",
    "report.item_stats": ("Per item of each headline number scored by two or more models: difficulty, "
                          "discrimination, the majority answer and a suspect flag, for pruning and fixing items."),
    "report.near_duplicates": ("Pairs of near-duplicate items of a family, in one split or across two: 1 - "
                                "edit distance / length of their normalised texts, 0.9 or more, same numbers."),
    "report.item_answers": ("Each model's answer and the gold per item, where a family's answers are labels "
                            "(IB, WakenLLM): what report.item_stats' label checks read."),
    "report.stale": ("Replies made on items since rebuilt differently or removed, per family, model and scope: "
                     "left out of every metric until the slice is run again."),
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
    "item_gone": "stale replies whose item is no longer stored",
    "item_changed": "stale replies whose item now differs",
    "table": "the table the replies are in",
    "n_options": "options shown",
    "purpose": "what the calls were for",
    "status": "ok or failed",
    "calls": "calls",
    "truncated": "calls cut at the budget",
    "mean_latency_s": "mean seconds per call",
    "attempts": "attempts over all runs",
    "family": "benchmark family: " + ", ".join(f.key for f in FAMILIES),
    "scope": "what the number covers: task / paradigm / temperature, dataset, setting, or language",
    "n": "replies, items or instances the value is computed over",
    "mechanism": "what the family does that the run should have exercised",
    "reached": "true when the rows show the mechanism at work",
    "detail": "the counts behind `reached`",
    "lo": "lower end of the 95 % interval", "hi": "upper end of the 95 % interval",
    "interval": "how the interval was computed: wilson, bootstrap (over units, clustered by item), or why none",
    "unit_set": "digest of the items the number rests on: rows with different digests were scored on different items",
    "unit": "the item (or instance) of the unit", "num": "the unit's share of the number's numerator",
    "den": "the unit's share of the number's denominator", "conf": "the unit's stated confidence (0-1), for an ECE",
    "item": "the item (or instance)", "models": "models scored on the item",
    "difficulty": "the mean score over models (0: every model wrong)",
    "discrimination": "correlation across models of the item's score with their score on the other items",
    "suspect": ("why the item may be broken (every model, or a majority of three or more, gave one answer scored "
                "wrong: a possible label error; every model scored 0; stronger models score lower), else NULL"),
    "split_a": "the first item's dataset, level or language", "item_a": "the first item",
    "split_b": "the second item's dataset, level or language", "item_b": "the second item",
    "across_splits": "true when the two items lie in different datasets, levels or languages",
    "similarity": "1 - Levenshtein distance / the longer length of the two normalised texts, in bytes (1: the same text)",
    "text_a": "the first item's text as compared", "text_b": "the second item's text as compared",
    "majority_answer": "the answer more than half the models gave, where the family's answers are labels",
    "answer": "the model's answer as read from its reply (IB: option numbers; WakenLLM: True/False/Unknown)",
    "correct": "whether the answer was scored right",
}


VIEW_COLUMN_DOCS.update({k: v for p in FAMILY_PARTS.values() for k, v in p.view_column_docs.items()})


def _view_column_doc(col: str) -> str:
    """A view column's documentation: named above or by its family, read from its name by the
    family (`view_column_doc`: TCR1 U, EN Rsn, ...), else the table column of that name."""
    if VIEW_COLUMN_DOCS.get(col):
        return VIEW_COLUMN_DOCS[col]
    for p in FAMILY_PARTS.values():
        doc = p.view_column_doc(col) if p.view_column_doc else None
        if doc:
            return doc
    return COLUMN_DOCS.get(col) or COLUMN_DOCS.get(col.lower(), "") or f"{col} (see the view's comment)"


def column_docs(columns_ddl: str) -> dict[str, str]:
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


def comment_schema(con: duckdb.DuckDBPyConnection, view_columns: bool = True) -> None:
    """COMMENT ON every table, view and column, so DESCRIBE and any SQL client explain the warehouse
    (a DuckLake has no comments on view columns: `view_columns` False). The statements go to DuckDB
    as one script: one at a time, their round trips were 0.23 s of a fresh file's 0.3 s schema."""
    statements = []
    for name, columns in TABLES.items():
        statements.append(f"COMMENT ON TABLE {name} IS {literal(TABLE_DOCS.get(name, ''))}")
        statements += [f"COMMENT ON COLUMN {name}.{col} IS {literal(doc)}"
                       for col, doc in column_docs(columns).items() if doc]
    statements += [f"COMMENT ON VIEW {name} IS {literal(TABLE_DOCS.get(name, ''))}" for name in VIEWS]
    if view_columns:
        listed = con.execute("SELECT schema_name || '.' || table_name, column_name FROM duckdb_columns() "
                             "WHERE database_name = current_database() ORDER BY ALL").fetchall()
        for name, col in listed:
            if name in VIEWS:
                quoted = '"' + col.replace('"', '""') + '"'
                statements.append(f"COMMENT ON COLUMN {name}.{quoted} IS {literal(_view_column_doc(col))}")
    con.execute(";\n".join(statements))
