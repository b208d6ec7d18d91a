"""A digest of every table and view a fixed run writes, to show a refactoring changed no result.

    python -m tests.tables_digest REPO OUT.tsv

runs `python -m assets.materialize_all` in REPO (a checkout: before and after a change) on the
default `benchsmith.yaml` (every family, demo scale) against a stub endpoint on a fixed port that
picks each reply from a dozen answer shapes by a digest of the messages, then writes one line per
table and view: its row count and a sha256 of its rows in `ORDER BY ALL` order, volatile columns
(times, latencies, run ids, attempts) and the command's bookkeeping (`runs.steps`) left out. Two runs of one checkout give the same file;
`diff` two checkouts' files to see what a change altered. `llm.schema_version` is the DDL's digest
and differs whenever any DDL text does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import yaml

from llm_calls.stub_server import StubServer

REPLIES = ["Answer: True", "Answer: Unknown", "Answer: False", "Answer: A", "Answer: B, C", "The answer is 7.",
           "Solutions: [[1, 2], [3]]\nConfidence: 80", "Confidence: 55%", "I am not sure.", "Yes", "No", "Answer: 1"]
VOLATILE = re.compile(r"(_at$|latency|^run_id$|^attempts$|seconds|wall|_s$|created|finished|checked|^id$)")
PORT = 18765  # call keys hash the endpoint's host:port, so it is fixed


def reply(body: dict) -> str:
    digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()
    return REPLIES[int(digest[:6], 16) % len(REPLIES)]


def digests(db: Path) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    out = []
    for schema, name, kind in con.execute("SELECT table_schema, table_name, table_type FROM information_schema.tables "
                                          "WHERE table_catalog = ? AND table_schema <> 'runs' ORDER BY 1, 2",
                                          [db.stem]).fetchall():  # runs.steps: the command's bookkeeping
        cols = [c for (c,) in con.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = ? "
                                          "AND table_name = ? ORDER BY ordinal_position", [schema, name]).fetchall()]
        keep = [c for c in cols if not VOLATILE.search(c)]
        if keep:
            rows = con.execute(f'SELECT {", ".join(chr(34) + c + chr(34) for c in keep)} FROM "{schema}"."{name}" '
                               "ORDER BY ALL").fetchall()
            out.append(f"{schema}.{name}\t{kind}\t{len(rows)}\t{hashlib.sha256(repr(rows).encode()).hexdigest()[:16]}"
                       f"\t{','.join(keep)}")
    con.close()
    return out


def main(repo: str, out: str) -> int:
    root = Path(repo).resolve()
    with StubServer(responder=reply, port=PORT) as stub, tempfile.TemporaryDirectory() as tmp:
        cfg = yaml.safe_load((root / "benchsmith.yaml").read_text())
        cfg["warehouse"] = {"path": f"{tmp}/wh.duckdb"}
        cfg["models"] = {"smollm2": {"base_url": stub.base_url, "model": "stub-model", "concurrency": 4,
                                     "sampling": {"temperature": 0.0, "max_tokens": 64}}}
        cfg["ledger"] = {"timeout_s": 5, "max_attempts": 2, "backoff_base_s": 0.01, "backoff_max_s": 0.05}
        (Path(tmp) / "cfg.yaml").write_text(yaml.safe_dump(cfg))
        env = {**os.environ, "BENCHSMITH_CONFIG": f"{tmp}/cfg.yaml", "DAGSTER_HOME": tmp, "PYTHONPATH": str(root)}
        run = subprocess.run([sys.executable, "-m", "assets.materialize_all"], cwd=root, env=env,
                             capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout[-3000:], run.stderr[-3000:], file=sys.stderr)
            return run.returncode
        lines = digests(Path(tmp) / "wh.duckdb")
    Path(out).write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} tables and views -> {out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
