"""The ledger's cache lookup: two ways to ask DuckDB for a batch of keys, side by side in one run.

Every call a flow asks is first looked up in `llm.calls` by its key, a few keys at a time (the
lookups that arrived while the last one ran). Asked as `key IN (SELECT unnest(?::VARCHAR[]))`, a
list parameter, DuckDB joins the list against every key of the table; asked as `key IN ('...',
...)`, string literals, it reads the keys from the table's primary-key index. This builds a
table shaped like `llm.calls` (the columns the lookup reads, a 2,000-character reply per row) at
several sizes, in a file as the warehouse is, and times both forms for batches of 1, 4, 64 and
256 and 1,000 missing keys and of 4 stored ones (the median of 5 rounds of 100 queries each),
printing milliseconds per query, their ratio, and which form the ledger uses for that batch
(`llm_calls.records.lookup_sql`: literals up to `LITERAL_KEYS` keys).

    python benchmarks/cache_lookup.py [--sizes 20000 200000]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llm_calls.records import LITERAL_KEYS, lookup_sql  # noqa: E402


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def timed(con: duckdb.DuckDBPyConnection, ask, rounds: int = 5, n: int = 100) -> float:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            ask(con)
        out.append((time.perf_counter() - t0) / n * 1000)
    return statistics.median(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20000, 200000])
    args = parser.parse_args()
    print(f"{'rows':>8} {'batch':>14} {'parameter ms':>13} {'literals ms':>12} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            con = duckdb.connect(str(Path(tmp) / f"calls-{size}.duckdb"))
            con.execute("CREATE SCHEMA llm")  # the ledger's own query, on a table of the ledger's name
            con.execute("""CREATE TABLE llm.calls (key VARCHAR PRIMARY KEY, status VARCHAR, response_text VARCHAR,
                finish_reason VARCHAR, prompt_tokens INTEGER, completion_tokens INTEGER, latency_s DOUBLE,
                attempts INTEGER, reasoning_text VARCHAR, reasoning_tokens INTEGER)""")
            stored = [digest(f"stored {i}") for i in range(size)]
            con.execute("INSERT INTO llm.calls SELECT k, 'ok', repeat('x', 2000), 'stop', 10, 20, 0.5, 1, NULL, NULL "
                        "FROM unnest(?::VARCHAR[]) AS t(k)", [stored])
            con.execute("CHECKPOINT")
            con.execute("SET threads = 1")  # as the ledger's writer sets it
            cur = con.cursor()
            batches = [(f"{n} missing", [digest(f"new {i}") for i in range(n)]) for n in (1, 4, 64, 256, 1000)]
            batches.append(("4 stored", stored[size // 3: size // 3 + 4]))
            for name, keys in batches:
                parameter, literal = lookup_sql(keys, literals=False), lookup_sql(keys, literals=True)
                assert sorted(cur.execute(*parameter).fetchall()) == sorted(cur.execute(*literal).fetchall())
                a = timed(cur, lambda c, q=parameter: c.execute(*q).fetchall())
                b = timed(cur, lambda c, q=literal: c.execute(*q).fetchall())
                used = "literals" if len(keys) <= LITERAL_KEYS else "parameter"
                print(f"{size:>8} {name:>14} {a:>13.2f} {b:>12.2f} {a / b:>6.1f}  (the ledger: {used})")
            con.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
