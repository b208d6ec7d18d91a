"""Recall and time of `report.near_duplicates` on planted pairs (issue 50's item statistics).

The view compares only MinHash candidates (16 seeded minima over each text's character 5-grams;
texts agreeing on 2 of them), then checks each candidate by edit distance. The edit check is exact;
the candidate step can miss a pair whose edits are scattered, since each edit breaks up to five
5-grams. This benchmark builds one family of N item texts of W words each (a vocabulary drawn
uniformly, a worst case where every 5-gram is moderately common, or by Zipf's law, as natural text),
plants near-duplicates of randomly chosen items at three edit rates (characters substituted at
random places, none of them a digit), and prints, for each, the share of the pairs at 0.9 or more
that the view lists, beside an all-pairs edit-distance check on the same pairs, and the time the
view took over the whole family.

    python benchmarks/near_duplicates.py                     # 1,700 and 6,000 items, both vocabularies
    python benchmarks/near_duplicates.py --items 2000 --words 30 --planted 100
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_stats import item_text_tables  # noqa: E402
from warehouse.schema import NEAR_DUPLICATE_SIMILARITY, VIEWS  # noqa: E402

RATES = (0.01, 0.04, 0.08)  # share of characters substituted in a planted copy


def _similarity(con: duckdb.DuckDBPyConnection, a: str, b: str) -> float:
    """The view's own measure, asked of DuckDB directly, for the all-pairs check of planted pairs."""
    norm = "trim(regexp_replace(lower(?), '[^\\p{L}\\p{N}]+', ' ', 'g'))"
    return con.execute(f"SELECT 1 - levenshtein({norm}, {norm}) / greatest(strlen({norm}), strlen({norm}))",
                       [a, b, a, b]).fetchone()[0]


def run(items: int, words: int, planted: int, zipf: bool, seed: int) -> dict:
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
                  for _ in range(3000)]
    weights = [1 / (rank + 1) if zipf else 1 for rank in range(len(vocabulary))]
    rows = [("d" + str(i % 6), f"b{i}", " ".join(rng.choices(vocabulary, weights, k=words)), "Which is right?")
            for i in range(items)]
    copies: dict[float, list[tuple[str, str]]] = {}
    for rate in RATES:
        for n in range(planted):
            source = rng.randrange(items)
            text = list(rows[source][2])
            for at in rng.sample(range(len(text)), max(1, round(rate * len(text)))):
                text[at] = rng.choice("abcdefghijklmnopqrstuvwxyz")
            item = f"p{rate}-{n}"
            rows.append(("planted", item, "".join(text), rows[source][3]))
            copies.setdefault(rate, []).append((rows[source][1], item))
    con = item_text_tables()
    con.executemany("INSERT INTO ib.items VALUES (?, ?, ?, ?)", rows)
    con.execute(f"CREATE VIEW report.near_duplicates AS {VIEWS['report.near_duplicates']}")
    started = time.perf_counter()
    found = {frozenset((r[0], r[1])) for r in con.execute("SELECT item_a, item_b FROM report.near_duplicates").fetchall()}
    seconds = time.perf_counter() - started
    text = {r[1]: f"{r[2]} {r[3]}" for r in rows}
    recall = {}
    for rate, pairs in copies.items():
        due = [p for p in pairs if _similarity(con, text[p[0]], text[p[1]]) >= NEAR_DUPLICATE_SIMILARITY]
        recall[rate] = (sum(frozenset(p) in found for p in due), len(due))
    return {"seconds": seconds, "recall": recall, "pairs": len(found), "texts": len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs="+", default=[1700, 6000])
    parser.add_argument("--words", type=int, default=60)
    parser.add_argument("--planted", type=int, default=100, help="planted copies per edit rate")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"{'items':>6} {'vocabulary':>10} {'texts':>6} {'view s':>7} {'listed':>7}  "
          + "  ".join(f"recall@{int(r * 100)}%edits" for r in RATES))
    for items in args.items:
        for zipf in (False, True):
            out = run(items, args.words, args.planted, zipf, args.seed)
            cells = "  ".join(f"{hit}/{due} = {hit / due:.3f}".rjust(17) if due else "no pair >= 0.9".rjust(17)
                              for hit, due in (out["recall"][r] for r in RATES))
            print(f"{items:>6} {'zipf' if zipf else 'uniform':>10} {out['texts']:>6} {out['seconds']:>7.2f} "
                  f"{out['pairs']:>7}  {cells}", flush=True)


if __name__ == "__main__":
    main()
