"""Every table of the warehouse, in one place, so analysts and code read the same definitions.

Schemas: `llm` (the model-call ledger and the model probe), `sources` (loaded
source datasets), and one per benchmark family (`muso`, `waken`, `s1`, `ib`).
Tables are created if missing; a family adds its DDL to `TABLES` below.
"""

from __future__ import annotations

import duckdb

SCHEMAS = ("llm", "sources", "muso", "waken", "s1", "ib")

# Bump when a table is added or a view changes: connections then re-run the DDL.
SCHEMA_VERSION = 1

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
        response_text     VARCHAR,
        finish_reason     VARCHAR,              -- 'stop', 'length' (truncated), ...
        prompt_tokens     INTEGER,
        completion_tokens INTEGER,
        latency_s         DOUBLE,
        attempts          INTEGER NOT NULL,     -- attempts in the run that wrote this row
        total_attempts    INTEGER NOT NULL,     -- attempts over all runs
        error             VARCHAR,
        run_id            VARCHAR,
        created_at        TIMESTAMP NOT NULL,
        finished_at       TIMESTAMP NOT NULL
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


def create_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every schema, table and view that does not exist yet (idempotent).

    Cheap when the file is current: one lookup of `llm.schema_version`.
    """
    try:
        row = con.execute("SELECT max(version) FROM llm.schema_version").fetchone()
        if row and row[0] == SCHEMA_VERSION:
            return
    except duckdb.CatalogException:
        pass
    for schema in SCHEMAS:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    for name, columns in TABLES.items():
        con.execute(f"CREATE TABLE IF NOT EXISTS {name} ({columns})")
    for name, query in VIEWS.items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {query}")
    con.execute("CREATE TABLE IF NOT EXISTS llm.schema_version (version INTEGER)")
    con.execute("DELETE FROM llm.schema_version")
    con.execute("INSERT INTO llm.schema_version VALUES (?)", [SCHEMA_VERSION])
