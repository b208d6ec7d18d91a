"""The reply readers' speed: this checkout's `validators/read.py` and another's, side by side in one run.

Every reply a run stores is read as it comes, and again by every rerun (`--all`): reading is the
largest part of a cached rerun's own work (design/performance.md). This reads the same replies
with both checkouts' readers, each in a fresh process, the two alternated `--rounds` times, and
prints microseconds per reply (median of the rounds) and their ratio for each reader a run uses:
`read_label` (a judging item's True / False / Unknown), `read_options` (a choice item's options,
and a judging reply that names no label) and the two steps every reading starts with (the stated
answers, the concluding sentences). Both checkouts must read every reply the same: the benchmark
stops where one reading differs.

The replies: `--replies FILE.jsonl` (each line's `reply` field, as the real kit's MMLU-Pro file has
them), `--warehouse FILE.duckdb` (the stored replies of `llm.calls`, as a paper run left them; the
stub endpoint's echo every prompt, a reader's worst case), or both.

    python benchmarks/read_speed.py [--baseline CHECKOUT] [--replies F.jsonl] [--warehouse W.duckdb] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READERS = ("explicit_answers", "concluding_tails", "read_label", "read_options")


def _texts(replies: str | None, warehouse: str | None) -> list[str]:
    out = []
    if replies:
        for n, line in enumerate(Path(replies).read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                reply = json.loads(line).get("reply")
                if not isinstance(reply, str):
                    raise SystemExit(f"{replies}:{n}: no `reply` text")
                out.append(reply)
    if warehouse:
        import duckdb

        with duckdb.connect(warehouse, read_only=True) as con:
            out += [r[0] for r in con.execute("SELECT response_text FROM llm.calls WHERE status = 'ok' "
                                              "AND response_text IS NOT NULL ORDER BY key").fetchall()]
    return out


def _side(checkout: str, texts_file: str) -> dict:
    """In a fresh process: each reader over every text, its microseconds per text and a digest of
    its readings."""
    sys.path.insert(0, checkout)
    from validators import read as R

    texts = json.loads(Path(texts_file).read_text(encoding="utf-8"))
    readers = {
        "explicit_answers": R.explicit_answers, "concluding_tails": R.concluding_tails,
        "read_label": lambda t: R.read_label(t, options=["True", "False", "Unknown"]).answer,
        "read_options": lambda t: R.read_options(t, 4).answer,
    }
    out = {}
    for name in READERS:
        read = readers[name]
        digest = hashlib.sha256()
        t0 = time.perf_counter()
        for text in texts:
            digest.update(repr(read(text)).encode())
        out[name] = {"us": (time.perf_counter() - t0) / len(texts) * 1e6, "digest": digest.hexdigest()}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", metavar="CHECKOUT", help="the other checkout (before a change); without it, this one alone")
    parser.add_argument("--replies", help="a JSON lines file of replies (`reply` field)")
    parser.add_argument("--warehouse", help="a warehouse whose stored replies are read")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--side", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(_side(*args.side)))
        return 0
    texts = _texts(args.replies, args.warehouse)
    if not texts:
        raise SystemExit("no replies: give --replies and/or --warehouse")
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8", delete=False) as f:
        json.dump(texts, f)
    sides = {"this": str(ROOT), **({"baseline": str(Path(args.baseline).resolve())} if args.baseline else {})}
    got: dict[str, list[dict]] = {side: [] for side in sides}
    for _ in range(args.rounds):
        for side, checkout in sides.items():
            done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--side", checkout, f.name],
                                  capture_output=True, text=True, cwd=checkout)
            if done.returncode != 0:
                raise SystemExit(f"{side}: {done.stderr[-2000:]}")
            got[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
    Path(f.name).unlink()
    print(f"{len(texts)} replies, {sum(map(len, texts)) / len(texts):.0f} characters on average; "
          f"medians of {args.rounds} rounds, each side a fresh process")
    print(f"{'reader':18s} {'this us':>9s}" + (f" {'baseline us':>12s} {'baseline / this':>16s}" if args.baseline else ""))
    for name in READERS:
        digests = {run[name]["digest"] for runs in got.values() for run in runs}
        if len(digests) != 1:
            raise SystemExit(f"{name}: the two checkouts read the replies differently")
        this = statistics.median(run[name]["us"] for run in got["this"])
        line = f"{name:18s} {this:9.1f}"
        if args.baseline:
            base = statistics.median(run[name]["us"] for run in got["baseline"])
            line += f" {base:12.1f} {base / this:16.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
