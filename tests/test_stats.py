"""Intervals, paired comparisons and item statistics (reporting/stats.py, report.units / intervals /
compare / item_stats; issue 50): hand-computed cases, coverage by simulation, and a two-model run
whose every headline number is recomputed from its units."""

from __future__ import annotations

import json
import os
import random
import re
import zlib

import pytest

from reporting.stats import _ece, binary, bootstrap, compare, interval, mcnemar_exact, ratio, wilson

# -- hand-computed cases ---------------------------------------------------------------------------------


def test_wilson_interval_of_seven_of_nine_right():
    """7 of 9: p = 0.778; centre (p + z²/2n) / (1 + z²/n) = 0.6950, half-width 0.2418 (z = 1.96)."""
    lo, hi = wilson(7, 9)
    assert (round(lo, 3), round(hi, 3)) == (0.453, 0.937)
    assert wilson(0, 10)[0] == 0.0 and round(wilson(0, 10)[1], 3) == 0.278  # stays inside [0, 1]
    assert wilson(0, 0) is None


def test_mcnemar_exact_counts_only_the_discordant_items():
    """1 item right for A only, 6 for B only: 2 x P(X <= 1 | n = 7, 1/2) = 2 x 8/128 = 0.125."""
    assert mcnemar_exact(1, 6) == pytest.approx(0.125)
    assert mcnemar_exact(6, 1) == pytest.approx(0.125)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 10) == pytest.approx(2 / 1024)


def test_a_comparison_uses_the_shared_items_only_and_pairs_them():
    a = {"q1": (1, 1), "q2": (1, 1), "q3": (1, 1), "q4": (0, 1), "extra": (1, 1)}
    b = {"q1": (1, 1), "q2": (0, 1), "q3": (0, 1), "q4": (0, 1), "other": (0, 1)}
    c = compare(a, b, ("t",))
    assert c.shared == 4 and c.value_a == 0.75 and c.value_b == 0.25 and c.diff == 0.5
    assert c.test == "mcnemar_exact" and c.p_value == pytest.approx(mcnemar_exact(2, 0)) == 0.5
    assert c.lo <= 0.5 <= c.hi
    # scores that are not yes/no: a paired bootstrap test; a clear difference gets a small p
    rng = random.Random(1)
    x = {f"i{k}": (rng.random() * 0.3 + 0.6, 1.0) for k in range(40)}
    y = {k: (v - 0.2, 1.0) for k, (v, _) in x.items()}
    far = compare(x, y, ("u",))
    assert far.test == "paired_bootstrap" and far.p_value < 0.01 and far.lo > 0.15


def test_the_interval_method_fits_the_units():
    assert interval([(1, 1), (0, 1), (1, 1)], ("a",)).method == "wilson"
    pooled = [(3, 5), (5, 5), (1, 5), (4, 5)]  # five samples per item: clustered by item
    got = interval(pooled, ("b",))
    assert got.method == "bootstrap" and got.lo <= ratio(pooled) <= got.hi
    assert interval([], ()).method == "no units" and interval([(0.5, 1)], ()).method == "too few units"
    assert interval(pooled, ("b",)) == got  # the same units and identity, the same interval
    assert not binary(pooled) and binary([(0, 1), (1, 1)])


# -- coverage --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p,n", [(0.1, 20), (0.5, 20), (0.85, 40), (0.97, 60)])
def test_the_wilson_interval_covers_the_true_accuracy_about_95_times_in_100(p, n):
    rng = random.Random(f"{p}-{n}")
    trials = 4000
    hits = 0
    for _ in range(trials):
        k = sum(rng.random() < p for _ in range(n))
        lo, hi = wilson(k, n)
        hits += lo <= p <= hi
    assert 0.92 <= hits / trials <= 0.985, hits / trials


@pytest.mark.slow
def test_the_clustered_bootstrap_covers_a_pooled_accuracy_near_95_times_in_100():
    """Items of varying difficulty, five samples each (as pass@1 pools them): the bootstrap over items
    covers the true pooled accuracy near 95 % (the percentile bootstrap runs a little under at n = 40)."""
    rng = random.Random(7)
    difficulties = [rng.betavariate(2, 2) for _ in range(5000)]
    truth = sum(difficulties) / len(difficulties)
    trials, hits = 200, 0
    for t in range(trials):
        items = [rng.choice(difficulties) for _ in range(40)]
        units = [(sum(rng.random() < d for _ in range(5)), 5) for d in items]
        lo, hi = bootstrap(units, ratio, ("coverage", t), resamples=400)
        hits += lo <= truth <= hi
    assert 0.88 <= hits / trials <= 0.99, hits / trials


# -- a two-model run ---------------------------------------------------------------------------------------


def _replies(name: str, unknown_every: int, one_every: int, confidence: int):
    def reply(body):
        text = body["messages"][-1]["content"]
        tag = f"({name} {zlib.crc32(json.dumps(body['messages']).encode())})"
        if "confiden" in text.lower():
            return f"Confidence: {confidence}%"
        h = zlib.crc32(text.encode())
        if "True, False, or Unknown" in text:
            return tag + (" Final answer: Unknown" if h % unknown_every == 0 else " Final answer: True")
        return tag + (" Answer: 1" if h % one_every else " Answer: 2")
    return reply


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    """Every family with two models that answer differently (S1-Bench from the release fixture)."""
    from llm_calls.stub_server import StubServer
    from runner.command import main
    from tests.conftest import stub_config
    from tests.test_plan import SMALL

    tmp = tmp_path_factory.mktemp("two-models")
    mp = pytest.MonkeyPatch()
    try:
        with StubServer(responder=_replies("a", 1, 3, 80)) as a, StubServer(responder=_replies("b", 2, 2, 30)) as b:
            models = {m: {"base_url": s.base_url, "model": "stub-model", "concurrency": 4,
                          "sampling": {"temperature": 0.0, "max_tokens": 64}} for m, s in (("alpha", a), ("beta", b))}
            release = os.path.join(os.path.dirname(__file__), "fixtures", "sources", "s1bench_release", "S1-Bench.json")
            small = {**SMALL, "s1": {**SMALL["s1"], "release": release, "build": False}}
            cfg = stub_config(a, tmp, **small, models=models, evaluate=["alpha", "beta"], judge="alpha")
            mp.setenv("BENCHSMITH_CONFIG", cfg.source)
            mp.setenv("DAGSTER_HOME", str(tmp))
            assert main([]) == 0
            yield cfg, {"alpha": a, "beta": b}
    finally:
        mp.undo()


@pytest.mark.slow
def test_every_headline_number_is_recomputed_from_its_units(two_models):
    """The units a number rests on give the number back, for every family and metric: the interval is
    about the number shown, not another one."""
    from reporting.stats import _grouped
    from warehouse import Warehouse

    wh = Warehouse(two_models[0].warehouse_path())
    units = _grouped(wh)
    checked = set()
    for h in wh.rows("SELECT * FROM report.headline WHERE model <> '-'"):
        got = units.get((h["family"], h["model"], h["scope"], h["metric"]))
        if h["value"] is None:
            continue
        assert got, f"no units for {h}"
        values = list(got.values())
        again = _ece(values) if len(values[0]) == 3 else ratio(values)
        assert again == pytest.approx(h["value"], abs=1e-9), h
        checked.add((h["family"], h["metric"]))
        if h["interval"] == "wilson":
            assert h["lo"] <= h["value"] <= h["hi"]
    assert {"ib", "muso", "waken", "s1"} <= {f for f, _ in checked}
    assert {("muso", "ece_recall"), ("s1", "pass@1"), ("waken", "acc_direct"), ("ib", "Acc")} <= checked


@pytest.mark.slow
def test_the_models_are_compared_on_shared_items_and_a_row_on_different_items_is_flagged(two_models, tmp_path):
    from assets.definitions import build_definitions
    from tests.conftest import materialize
    from warehouse import Warehouse

    cfg, _ = two_models
    wh = Warehouse(cfg.warehouse_path())
    row = wh.rows("SELECT * FROM report.compare WHERE family = 'ib' AND scope = 'vanilla'")[0]
    assert (row["model_a"], row["model_b"], row["only_a"], row["only_b"], row["test"]) == ("alpha", "beta", 0, 0,
                                                                                           "mcnemar_exact")
    index = (cfg.warehouse_path().parent / "reports" / "index.html").read_text()
    assert re.search(r"Acc</th><td><a [^>]*>[0-9.]+ <span class=\"ci\">\[[0-9.]+, [0-9.]+\]</span>", index)
    assert "class=\"differs\"" not in index
    # beta's vanilla replies on one item removed: its number rests on other items than alpha's
    gone = wh.rows("SELECT dataset, item_id FROM ib.responses WHERE model = 'beta' AND setting = 'vanilla' "
                   "AND correct IS NOT NULL ORDER BY ALL LIMIT 1")[0]
    with wh.connect() as con:
        con.execute("DELETE FROM ib.responses WHERE model = 'beta' AND setting = 'vanilla' AND dataset = ? AND "
                    "item_id = ?", [gone["dataset"], gone["item_id"]])
    assert materialize(build_definitions(cfg.source), ["ib_metrics", "model_report"]).success
    row = wh.rows("SELECT * FROM report.compare WHERE family = 'ib' AND scope = 'vanilla'")[0]
    assert (row["only_a"], row["only_b"]) == (1, 0)
    assert row["shared"] == wh.scalar("SELECT n FROM report.headline WHERE family = 'ib' AND model = 'beta' "
                                      "AND scope = 'vanilla'")
    sets = wh.rows("SELECT DISTINCT unit_set FROM report.headline WHERE family = 'ib' AND scope = 'vanilla'")
    assert len(sets) == 2
    index = (cfg.warehouse_path().parent / "reports" / "index.html").read_text()
    assert index.count("class=\"differs\"") == 1 and "(left out: 1 + 0)" in index
    assert "commit:" in index and "configuration sha256:" in index


@pytest.mark.slow
def test_item_statistics_name_difficulty_and_suspect_items(two_models):
    from warehouse import Warehouse

    cfg, _ = two_models
    wh = Warehouse(cfg.warehouse_path())
    rows = wh.rows("SELECT * FROM report.item_stats WHERE family = 'ib' AND scope = 'vanilla'")
    assert rows and all(r["models"] == 2 and 0 <= r["difficulty"] <= 1 for r in rows)
    for r in rows:  # difficulty is the mean over the two models of the item's score
        scores = wh.rows("SELECT num / den AS s FROM report.units WHERE family = 'ib' AND scope = 'vanilla' "
                         "AND metric = 'Acc' AND unit = ?", [r["item"]])
        assert r["difficulty"] == pytest.approx(sum(s["s"] for s in scores) / len(scores))
        assert (r["suspect"] in ("every model scored 0", f"every model answered {r['majority_answer']}, scored wrong "
                                 f"against the gold {r['gold']}")) == (r["difficulty"] == 0)
    page = (cfg.warehouse_path().parent / "reports" / "items.html").read_text()
    assert "every model scored 0" in page or all(r["difficulty"] > 0 for r in rows)
    pairs = wh.rows("SELECT * FROM report.near_duplicates")
    assert f"{len(pairs)} pairs of items" in page and all(p["item_b"] in page for p in pairs)
    assert not wh.rows("SELECT * FROM report.item_stats WHERE metric = 'mean_tokens'")  # not a right-or-wrong score


def test_items_whose_models_agree_on_an_answer_scored_wrong_are_flagged_as_possible_label_errors():
    """Hand-made units and answers of three models on four items: one answer from every model, scored
    wrong (a label to check); two of three agreeing on a wrong answer; every model wrong, each its own
    way (no label suspected: just hard); every model right."""
    import duckdb

    from warehouse.schema import VIEWS

    con = duckdb.connect()
    con.execute("CREATE SCHEMA report")
    con.execute("CREATE TABLE report.units (family VARCHAR, model VARCHAR, scope VARCHAR, metric VARCHAR, "
                "unit VARCHAR, num DOUBLE, den DOUBLE, conf DOUBLE)")
    con.execute("CREATE TABLE report.item_answers (family VARCHAR, model VARCHAR, scope VARCHAR, metric VARCHAR, "
                "unit VARCHAR, answer VARCHAR, gold VARCHAR, correct BOOLEAN)")
    answers = {"same": (["[2]", "[2]", "[2]"], "[1]"), "most": (["False", "False", "True"], "True"),
               "hard": (["[2]", "[3]", "[4]"], "[1]"), "easy": (["[1]", "[1]", "[1]"], "[1]")}
    for unit, (given, gold) in answers.items():
        for model, answer in zip(("m1", "m2", "m3"), given, strict=True):
            right = answer == gold
            con.execute("INSERT INTO report.units VALUES ('ib', ?, 'vanilla', 'Acc', ?, ?, 1, NULL)",
                        [model, unit, float(right)])
            con.execute("INSERT INTO report.item_answers VALUES ('ib', ?, 'vanilla', 'Acc', ?, ?, ?, ?)",
                        [model, unit, answer, gold, right])
    con.execute(f"CREATE VIEW report.item_stats AS {VIEWS['report.item_stats']}")
    got = {r[0]: r[1:] for r in con.execute(
        "SELECT item, majority_answer, gold, suspect FROM report.item_stats").fetchall()}
    assert got["same"] == ("[2]", "[1]", "every model answered [2], scored wrong against the gold [1]")
    assert got["most"] == ("False", "True", "2 of 3 models answered False, scored wrong against the gold True")
    assert got["hard"] == (None, "[1]", "every model scored 0")
    assert got["easy"] == ("[1]", "[1]", None)


@pytest.mark.skipif(__import__("shutil").which("chromium") is None and not os.environ.get("BENCHSMITH_REQUIRE_BROWSER"),
                    reason="no Chromium on this machine (CI installs it and requires this test: .ci/run)")
@pytest.mark.slow
def test_in_a_browser_the_leaderboard_shows_intervals_comparisons_and_the_item_statistics(two_models):
    from playwright.sync_api import sync_playwright

    from tests.test_report import _chromium
    from warehouse import Warehouse

    cfg, _ = two_models
    wh = Warehouse(cfg.warehouse_path())
    folder = (cfg.warehouse_path().parent / "reports").resolve()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = browser.new_page()
        page.goto((folder / "index.html").as_uri())
        ib = page.locator("#leaderboard tr", has_text="vanilla").filter(has_text="Acc").first
        shown = ib.locator(".ci").first.inner_text()
        lo, hi = (float(x) for x in re.findall(r"[0-9.]+", shown))
        assert 0 <= lo <= hi <= 1, shown
        row = page.locator("#compare tr", has_text="vanilla").filter(has_text="mcnemar_exact").first
        cells = row.locator("td").all_inner_texts()
        assert cells[3:5] == ["alpha", "beta"] and cells[7] == "mcnemar_exact", cells
        page.click("text=Item statistics")
        assert page.locator("h1").inner_text() == "Item statistics (report.item_stats)"
        assert page.locator("#items tbody tr").count() > 0
        assert page.locator("h2").inner_text() == "Near-duplicate items (report.near_duplicates)"
        assert page.locator("#near-duplicates tbody tr").count() == wh.scalar("SELECT count(*) FROM report.near_duplicates")
        browser.close()


@pytest.mark.skipif(__import__("shutil").which("chromium") is None and not os.environ.get("BENCHSMITH_REQUIRE_BROWSER"),
                    reason="no Chromium on this machine (CI installs it and requires this test: .ci/run)")
@pytest.mark.slow
def test_in_a_browser_a_wakenllm_number_opens_its_full_multi_turn_transcripts_with_the_facts(two_models):
    """Issue 50: TCR1 linked to the direct replies, and questions showed without their facts. The link
    of TCR1 opens the scope's page filtered to stage 1; a reply opens to the facts and every turn."""
    from playwright.sync_api import sync_playwright

    from tests.test_report import _chromium
    from warehouse import Warehouse

    cfg, _ = two_models
    folder = (cfg.warehouse_path().parent / "reports").resolve()
    index = (folder / "index.html").read_text()
    assert 'href="alpha/waken-fld.html#step=stage1"' in index  # TCR1 of alpha rests on its stage-1 replies
    stage1 = Warehouse(cfg.warehouse_path()).scalar(
        "SELECT count(*) FROM waken.outcomes WHERE model = 'alpha' AND step = 'stage1' AND setting = 'vanilla'")
    assert stage1 > 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = browser.new_page()
        page.goto((folder / "alpha" / "waken-fld.html").as_uri() + "#step=stage1")
        visible = page.locator("#replies tbody tr.reply:not([hidden])")
        assert visible.count() == stage1
        assert set(visible.evaluate_all("rows => rows.map(r => r.dataset.step)")) == {"stage1"}
        first = visible.first
        first.locator("summary").click()
        assert "sent1:" in first.locator(".context").inner_text()  # the facts
        turns = first.locator(".turn")
        assert turns.count() >= 2 and "assistant" in turns.last.inner_text()
        page.select_option('select[data-key="step"]', "")  # every step again
        assert page.locator("#replies tbody tr.reply:not([hidden])").count() > stage1
        browser.close()


def test_the_resampled_numbers_are_the_statistics_themselves():
    """The bootstrap computes every resample at once (NumPy); each equals the statistic of that
    resample computed plainly: the ratio of sums, and MuSoBench's ECE (evaluations.scoring.ece)."""
    import numpy as np

    from reporting.stats import _draws, _eces, _ratios

    rng = random.Random(3)
    units = [(rng.random(), 1.0, rng.choice([0.05, 0.3, 0.55, 0.8, 0.95, 1.0])) for _ in range(60)]
    idx = _draws(len(units), 20, ("check",))
    arr = np.asarray(units)
    for row, got in zip(idx, _eces(arr, idx)):
        assert got == pytest.approx(_ece([units[i] for i in row]))
    pooled = [(rng.randint(0, 5), 5) for _ in range(30)]
    idx = _draws(len(pooled), 20, ("check",))
    for row, got in zip(idx, _ratios(np.asarray(pooled, dtype=float), idx)):
        assert got == pytest.approx(ratio([pooled[i] for i in row]))


def item_text_tables():
    """An in-memory DuckDB holding only the item columns `report.near_duplicates` reads (also used by
    `benchmarks/near_duplicates.py`)."""
    import duckdb

    con = duckdb.connect()
    for schema in ("report", "ib", "waken", "s1"):
        con.execute(f"CREATE SCHEMA {schema}")
    con.execute("CREATE TABLE ib.items (dataset VARCHAR, base_id VARCHAR, context VARCHAR, question VARCHAR)")
    con.execute("CREATE TABLE waken.items (dataset VARCHAR, item_id VARCHAR, context VARCHAR, question VARCHAR)")
    con.execute("CREATE TABLE s1.items (language VARCHAR, item_id VARCHAR, question VARCHAR)")
    return con


def test_near_duplicate_items_are_paired_within_and_across_splits_in_any_script():
    """Hand-made items: one question asked in two IB datasets with other case and punctuation
    (similarity 1, across splits); IB variants of one base question (one text: no pair); two
    Chinese S1 questions one character apart; arithmetic questions that differ only in a number
    (two questions, not duplicates); unrelated texts; a template shared by 60 items; one question
    copied into 55 items (its 5-grams too common to be evidence) and a variant of it elsewhere."""
    from warehouse.schema import VIEWS

    con = item_text_tables()
    long = "Every sparrow is a bird and every bird has feathers. Pip is a sparrow. Does Pip have feathers?"
    ib = [("fld", "b1", None, long), ("fld", "b1", None, long), ("folio", "b9", None, long.upper().replace(".", " ;")),
          ("fld", "b2", None, "What is 12 plus 3 when counted on the fingers of both hands together?"),
          ("fld", "b3", None, "What is 12 plus 4 when counted on the fingers of both hands together?"),
          ("fld", "b4", "A cat sleeps.", "Is the moon made of cheese?")]
    ib += [("tmpl", f"t{i}", None, f"Name the {i}th smallest prime number in the standard list of primes please")
           for i in range(60)]
    copied = "Which planet is known as the red planet of our solar system?"
    ib += [("copies", f"c{i:02}", None, copied) for i in range(55)]  # every 5-gram in 55 items
    ib += [("mmlu", "v1", None, copied.replace(" of ", " in "))]
    con.executemany("INSERT INTO ib.items VALUES (?, ?, ?, ?)", ib)
    con.executemany("INSERT INTO s1.items VALUES (?, ?, ?)", [
        ("zh", "q1", "一个星期有几天？请直接回答这个非常简单的问题，不要解释。"),
        ("zh", "q2", "一个星期有几天？请直接回答这个非常简单的问题，不用解释。"),
        ("en", "q3", "How many legs does a spider have?")])
    con.execute(f"CREATE VIEW report.near_duplicates AS {VIEWS['report.near_duplicates']}")
    got = {(r[0], r[1], r[2], r[3], r[4]): (r[5], r[6]) for r in con.execute(
        "SELECT family, split_a, item_a, split_b, item_b, across_splits, similarity FROM report.near_duplicates"
    ).fetchall()}
    assert got.pop(("ib", "fld", "b1", "folio", "b9")) == (True, 1.0)
    across, similarity = got.pop(("s1", "zh", "q1", "zh", "q2"))
    assert not across and 0.9 <= similarity < 1
    copies = {key: value for key, value in got.items() if key[1] == "copies" and key[3] == "copies"}
    assert len(copies) == 55 * 54 // 2 and set(copies.values()) == {(False, 1.0)}
    variants = {key: got.pop(key) for key in list(got) if key[3] == "mmlu"}
    assert len(variants) == 55 and all(across and 0.9 <= sim < 1 for across, sim in variants.values())
    for key in copies:
        got.pop(key)
    assert not got, got  # no number-changed question, no unrelated text, no template-only pair
