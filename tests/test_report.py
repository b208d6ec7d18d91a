"""The per-model HTML report: four panels with plots and the papers' tables, "no data" with the
reason where a plot has nothing to draw, links in the asset's metadata; and, in a real browser,
the report and the Dagster UI's asset page."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from assets.definitions import build_definitions
from configuration import CONFIG_ENV_VAR
from configuration.families import FAMILIES
from llm_calls.stub_server import StubServer
from reporting.panels import Writer
from reporting.panels.muso import panel as muso_panel
from reporting.panels.s1 import panel as s1_panel
from reporting.panels.waken import panel as waken_panel
from tests.conftest import materialize, stub_config
from warehouse import Warehouse

ROOT = Path(__file__).resolve().parent.parent
IB = {"datasets": {"fld": {"form": "judging", "generator": "fld", "count": {"demo": 2, "paper": 2}},
                   "arithmetic": {"form": "single", "generator": "arithmetic", "count": {"demo": 2, "paper": 2}}},
      "settings": ["vanilla", "few_shot"]}


def build_ib_report(tmp_path):
    with StubServer(responder=lambda body: "Answer: 1") as stub:
        cfg = stub_config(stub, tmp_path, ib=IB)
        defs = build_definitions(cfg.source)
        for pk in ("fld", "arithmetic", "miscellany"):
            assert materialize(defs, ["ib_items", "ib_responses"], pk).success
        assert materialize(defs, ["models", "ib_metrics"]).success
        result = materialize(defs, ["model_report"])
    assert result.success
    return cfg, result


def panel_of(page: str, family: str) -> str:
    """The HTML of one family's panel on a model's page (panels follow the registry's order)."""
    start = page.index(f'id="{family}"')
    end = page.find("<section", start)
    return page[start:] if end < 0 else page[start:end]


@pytest.mark.slow
def test_the_report_shows_what_was_evaluated_and_says_why_the_rest_is_empty(tmp_path):
    cfg, result = build_ib_report(tmp_path)
    folder = cfg.warehouse_path().parent / "reports"
    page = (folder / "stub.html").read_text()
    for section in ('id="waken"', 'id="muso"', 'id="s1"', 'id="ib"'):
        assert section in page
    # Instruction Boundary was evaluated: its plots are PNG files, its paper table has the model's rows
    images = sorted(p.name for p in (folder / "stub").glob("*.png"))
    assert images == ["ib_accuracy.png", "ib_outputs.png"]
    assert all((folder / "stub" / n).read_bytes().startswith(b"\x89PNG") for n in images)
    ib = panel_of(page, "ib")
    assert '<img src="stub/ib_accuracy.png"' in ib and '<h4>ib.table3</h4><div class="scroll"><table>' in ib
    # each panel first shows its headline numbers with the count each rests on
    assert ib.index("<h4>report.headline</h4>") < ib.index("<h4>ib.table3</h4>") and "<th>n</th>" in ib
    # the other three say "no data" and why, with the command that fills them
    waken = panel_of(page, "waken")
    assert waken.count("<strong>no data</strong>") == 2
    assert "WakenLLM has not been evaluated for this model: no rows in waken.metrics" in waken
    assert "--select waken" in waken
    s1 = panel_of(page, "s1")
    assert "S1-Bench has not been evaluated for this model: no rows in s1.responses" in s1
    # linked from the asset's metadata and from the index
    [mat] = [e for e in result.all_events if e.event_type_value == "ASSET_MATERIALIZATION"]
    metadata = mat.event_specific_data.materialization.metadata
    assert metadata["report_stub"].value == "http://127.0.0.1:3001/stub.html"  # served: one click from the UI
    assert metadata["leaderboard"].value == "http://127.0.0.1:3001/index.html"
    index = (folder / "index.html").read_text()
    assert 'href="stub.html"' in index
    # the leaderboard: each headline number with its n, linked to the replies it rests on
    assert '<table id="leaderboard">' in index and "<th>stub</th>" in index
    assert '<a href="stub/ib-vanilla.html">' in index and "n=" in index
    samples = (folder / "stub" / "samples.html").read_text()
    vanilla = samples[samples.index('id="ib-vanilla"'):]
    vanilla = vanilla[:vanilla.find("</section>")]
    # 4 items of two datasets under the vanilla setting (miscellany is its own setting), each reply with how it was read
    assert "(4 replies)" in vanilla and vanilla.count("<tr>") == 5 and "Answer: 1" in vanilla
    # a rebuild with the same rows writes the same page (no timestamps in it)
    with StubServer(responder=lambda body: "Answer: 1") as stub2:
        cfg2 = stub_config(stub2, tmp_path, ib=IB)  # same warehouse, same config apart from the port
        assert materialize(build_definitions(cfg2.source), ["model_report"]).success
    assert (folder / "stub.html").read_text() == page


def _muso_replies(wh, n, confidence, truncated):
    """`n` SubsetSum instances of level 1-50 and model m's replies to them, each of recall 0."""
    wh.replace_partition("muso.instances", [
        {"partition_key": "subsetsum_1-50", "instance_id": f"i{k}", "task": "subsetsum", "level": 1, "level_lo": 1,
         "level_hi": 50, "solution_count": 2, "question": f"q{k}", "reference_answer": "a", "parameters": "{}",
         "config_seed": 1, "level_seed": 2, "candidate_index": k, "generator_version": "g"} for k in range(n)],
        {"partition_key": "subsetsum_1-50"})
    wh.replace_partition("muso.responses", [
        {"partition_key": "subsetsum_1-50", "model": "m", "paradigm": "short_cot", "variant": "standard", "path": 0,
         "instance_id": f"i{k}", "task": "subsetsum", "level": 1, "status": "ok", "confidence": confidence,
         "recall": 0.0, "precision": 0.0, "truncated": truncated, "call_keys": "[]", "level_lo": 1, "level_hi": 50,
         "temperature": 0.2} for k in range(n)], {"partition_key": "subsetsum_1-50", "model": "m"})


def test_empty_plots_name_what_in_the_rows_left_them_empty(tmp_path):
    wh = Warehouse(tmp_path / "wh.duckdb")
    # WakenLLM ran, but the model answered no solvable item Unknown: the stages had nothing to stimulate
    wh.upsert("waken.metrics", [
        {"model": "m", "dataset": "fld", "metric": "d_vp", "sample_type": "all", "stage": s, "setting": "vanilla",
         "value": 0.0, "numerator": None, "denominator": None} for s in ("1", "2")] + [
        {"model": "m", "dataset": "fld", "metric": "TCR", "sample_type": "all", "stage": "1", "setting": "vanilla",
         "value": None, "numerator": 0, "denominator": 0},
        {"model": "m", "dataset": "fld", "metric": "vague_perception_share", "sample_type": "s", "stage": "-",
         "setting": "vanilla", "value": 0.0, "numerator": 0, "denominator": 5}])
    # MuSoBench ran, every reply cut before a confidence was stated
    _muso_replies(wh, 3, confidence=None, truncated=True)
    w = Writer(tmp_path / "out")
    waken = waken_panel(wh, "m", w)
    [conv, vague] = waken.plots
    assert conv.file is None and "stage 1 never ran" in conv.reason and "'fld s1': 0" in conv.reason
    assert vague.file is not None  # the shares exist (0 of 5): that is a plot, not "no data"
    muso = muso_panel(wh, "m", w)
    assert muso.plots[0].file is None
    assert muso.plots[0].reason == "no reply stated a confidence: 3 of 3 conversations answered, 3 cut at the token budget"
    assert muso.plots[1].file is not None
    # the instances rebuilt with other questions: those replies are stale, and the panel says so
    wh.replace_partition("muso.instances", [], {"partition_key": "subsetsum_1-50"})
    gone = muso_panel(wh, "m", w).plots[0].reason
    assert gone.startswith("MuSoBench has no current replies for this model: its 3 replies were made on items")
    assert "--select muso --model m" in gone
    # S1-Bench: candidates were made, the validators accepted none
    wh.upsert("s1.candidates", [
        {"candidate_id": f"c{k}", "parent_id": None, "round": 0, "subcategory": "counting", "category": "reasoning",
         "language": "en", "question": "How many?", "answer": "2", "check_spec": None, "origin": "llm:m"}
        for k in range(4)])
    [formats, _] = s1_panel(wh, "m", w).plots
    assert formats.file is None and formats.reason.startswith(
        "no S1-Bench question was accepted: of 4 candidate versions, the validator models answered none")


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(_chromium() is None and not os.environ.get("BENCHSMITH_REQUIRE_BROWSER"),
                    reason="no Chromium on this machine (CI installs it and requires this test: .ci/run)")
@pytest.mark.slow
def test_in_a_browser_the_report_shows_its_plots_and_the_ui_links_it(tmp_path):
    from playwright.sync_api import sync_playwright

    home = tmp_path / "home"
    home.mkdir()
    # the instance's run coordinator, as the project's dagster.yaml sets it
    (home / "dagster.yaml").write_text("run_coordinator:\n  module: runner.ui_runs\n  class: TaggedRunCoordinator\n"
                                       "  config:\n    max_concurrent_runs: 4\n")
    served = _free_port()

    def confident_and_wrong(body):  # MuSoBench: no solution read (recall 0), and 85 % sure of it
        return "[[CONFIDENCE: \\boxed{85}]]" if "[[CONFIDENCE:" in body["messages"][-1]["content"] else "Answer: 1"

    with StubServer(responder=confident_and_wrong) as stub:
        cfg = stub_config(stub, tmp_path, ib=IB, muso={"timetabling": {"bins": [[1, 50]]},
                                                       "subsetsum": {"bins": [[1, 50]]}, "quota": {"demo": 1, "paper": 1}})
        env = {**os.environ, CONFIG_ENV_VAR: cfg.source, "DAGSTER_HOME": str(home),
               "BENCHSMITH_REPORTS_URL": f"http://127.0.0.1:{served}"}
        for family in ("ib", "muso"):
            run = subprocess.run([sys.executable, "-m", "assets.materialize_all", "--select", family], cwd=ROOT,
                                 env=env, capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, run.stderr[-2000:]
    port = _free_port()
    ui = subprocess.Popen([str(Path(sys.executable).parent / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port)],
                          cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # what `make ui` starts beside the UI: the reports over HTTP, so the UI's links open them
    reports = subprocess.Popen([sys.executable, "-m", "assets.report", "--serve"], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_ui(port)
        report = (cfg.warehouse_path().parent / "reports" / "stub.html").resolve()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
            page = browser.new_page()
            # the UI's first-visit dialog (join the community) is dismissed whenever it shows up
            page.add_locator_handler(page.get_by_text("Join the Dagster community"),
                                     lambda _: page.get_by_role("button", name="Skip").click())
            page.goto(report.as_uri())
            assert page.locator("section").count() == len(FAMILIES)
            loaded = page.eval_on_selector_all("#ib img", "imgs => imgs.map(i => i.complete && i.naturalWidth)")
            assert len(loaded) == 2 and all(w and w > 100 for w in loaded)  # decoded images, not broken links
            # the reliability diagram is drawn, with its bin at recall 0 (confidence 85, nothing right)
            muso = page.eval_on_selector_all("#muso img", "imgs => imgs.map(i => i.complete && i.naturalWidth)")
            assert len(muso) == 2 and all(w and w > 100 for w in muso)
            note = page.locator("#muso .note").first.inner_text()
            assert "confidence 0.8-0.9: n=2, mean recall 0.00" in note, note
            assert page.locator("#waken .nodata").count() == 2
            assert "has not been evaluated" in page.locator("#waken .nodata").first.inner_text()
            # the asset page in the Dagster UI shows the materialisation's link to the report
            page.set_viewport_size({"width": 1400, "height": 2400})  # the metadata table in view
            page.goto(f"http://127.0.0.1:{port}/assets/model_report")
            link = page.locator(f'a[href="http://127.0.0.1:{served}/stub.html"]')
            link.first.wait_for(timeout=60_000)
            # one click on it opens the report (in a new tab, as the UI opens metadata links)
            with page.context.expect_page(timeout=30_000) as opened:
                link.first.click()
            shown = opened.value
            shown.wait_for_load_state()
            assert shown.url == f"http://127.0.0.1:{served}/stub.html" and shown.locator("section").count() == len(FAMILIES)
            # and from it, the leaderboard and the replies behind each number
            shown.goto(f"http://127.0.0.1:{served}/index.html")
            shown.locator('#leaderboard a[href="stub/ib-vanilla.html"]').first.click()
            shown.locator("#replies").wait_for(timeout=30_000)
            assert shown.locator("#replies tbody tr.reply").count() == 4
            # the page fits a 1,400 px window: nothing wider than the viewport
            shown.set_viewport_size({"width": 1400, "height": 900})
            shown.goto(f"http://127.0.0.1:{served}/stub.html")
            assert shown.evaluate("document.documentElement.scrollWidth") <= 1400
            # a partitioned asset's checks: the verdict of the slice, with its partition
            page.goto(f"http://127.0.0.1:{port}/assets/ib_responses?view=checks")
            page.get_by_text("failed_calls").first.wait_for(timeout=60_000)
            page.get_by_text("Partition", exact=True).first.wait_for(timeout=60_000)
            assert page.get_by_text("|stub", exact=False).count() >= 1  # the verdict names its slice
            # the runs page lists the named jobs with their tags
            page.goto(f"http://127.0.0.1:{port}/runs")
            page.get_by_text("evaluate_ib").first.wait_for(timeout=60_000)
            # a run launched with the UI's Materialize button carries the command's tags
            page.goto(f"http://127.0.0.1:{port}/assets/ib_metrics")
            page.locator("button", has_text="Materialize").first.click()
            launched = _wait_for_run(home, "benchsmith/launched")
            # launched from the job's page, the run is the named job's, with the same tags
            page.goto(f"http://127.0.0.1:{port}/locations/benchsmith/jobs/score_ib")
            page.locator("button", has_text="Materialize").first.click()
            from_job = _wait_for_run(home, "benchsmith/launched", job="score_ib")
            browser.close()
        assert from_job.tags["benchsmith/family"] == "ib" and from_job.tags["benchsmith/config"] == cfg.source
        assert launched.tags["benchsmith/family"] == "ib" and launched.tags["benchsmith/job"] == "score_ib"
        assert launched.tags["benchsmith/config"] == cfg.source and launched.tags["benchsmith/models"] == "stub"
        assert launched.tags["benchsmith/launched"] == "ui" and launched.job_name == "__ASSET_JOB"
    finally:
        _stop(ui, reports)


def _stop(*procs: subprocess.Popen) -> None:
    """Each process asked to stop (SIGTERM), then killed if it has not within 30 s: a machine
    under load may be slow to let go, and the test is about what they served, not their exit."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _wait_for_run(home: Path, tag: str, job: str | None = None):
    import dagster as dg

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            runs = [r for r in instance.get_runs() if tag in r.tags and (job is None or r.job_name == job)]
        if runs:
            return runs[0]
        time.sleep(0.5)
    raise AssertionError(f"no run tagged {tag} within 60 s")


def _wait_for_ui(port: int) -> None:
    query = json.dumps({"query": "{ version }"}).encode()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=query,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=5):
                return
        except OSError:
            time.sleep(1)
    raise AssertionError("the Dagster UI did not start in 120 s")


def test_the_mechanisms_view_says_what_was_not_exercised_and_why(tmp_path):
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.upsert("waken.metrics", [
        {"model": "m", "dataset": "fld", "metric": "d_vp", "sample_type": "all", "stage": "1", "setting": "vanilla",
         "value": 0.0, "numerator": None, "denominator": None},
        {"model": "m", "dataset": "fld", "metric": "vague_perception_share", "sample_type": "s", "stage": "-",
         "setting": "vanilla", "value": 0.0, "numerator": 0, "denominator": 20},
        {"model": "m", "dataset": "fld", "metric": "vague_perception_share", "sample_type": "u", "stage": "-",
         "setting": "vanilla", "value": 0.0, "numerator": 0, "denominator": 20}])
    wh.upsert("s1.candidates", [
        {"candidate_id": f"{lang}{k}", "parent_id": None, "round": 0, "subcategory": "counting",
         "category": "reasoning", "language": lang, "question": "q", "answer": "1", "check_spec": None,
         "origin": "programmatic:x"} for lang in ("en", "zh") for k in range(3)])
    wh.upsert("s1.items", [{"item_id": f"en{k}", "root_candidate": f"en{k}", "rounds_taken": 0, "subcategory": "counting",
                            "category": "reasoning", "language": "en", "question": "q", "answer": "1",
                            "check_spec": None, "origin": "programmatic:x"} for k in range(2)])
    wh.replace_partition("ib.items", [
        {"dataset": "fld", "item_id": f"i{k}", "base_id": f"b{k}", "form": "judging", "label_type": "tense",
         "variant": "complete", "options": "[]", "gold": "[1]", "n_options": 3, "number_scheme": "arabic",
         "context": None, "question": "q", "removed_option": None, "origin": "x", "extra": "{}", "dataset_seed": 1,
         "items_version": "v"} for k in range(2)], {"dataset": "fld"})
    wh.replace_partition("ib.responses", [  # replies to the stored items (a stale reply counts in no view)
        {"dataset": "fld", "model": "m", "setting": setting, "item_id": f"i{k}", "form": "judging",
         "label_type": "tense", "variant": "complete", "n_options": 3, "selected": None, "correct": None,
         "method": "judge", "output_category": category, "reply": "?", "call_key": None, "error": None}
        for setting, category in (("vanilla", "True"), ("vagueness", "undecided")) for k in range(2)],
        {"dataset": "fld", "model": "m"})
    got = {(r["family"], r["scope"], r["mechanism"]): (r["reached"], r["detail"])
           for r in wh.rows("SELECT * FROM report.mechanisms")}
    assert got[("waken", "fld", "stage 1 stimulation (vague-perception set)")] == (
        False, "0 items entered stage 1; direct answers Unknown on solvable items: 0 of 20, "
               "Unknown items whose explanation failed: 0 of 20")
    assert got[("s1", "en", "several questions accepted by every validator answer")] == (
        True, "2 accepted of 3 candidate versions")
    assert got[("s1", "zh", "several questions accepted by every validator answer")][0] is False
    assert got[("ib", "vanilla", "decided replies")] == (True, "2 of 2 replies decided")
    assert got[("ib", "vagueness", "decided replies")] == (False, "0 of 2 replies decided")


def test_the_reliability_diagram_marks_confident_replies_at_recall_zero():
    """Confidence 85 with recall 0 is MuSoBench's headline case (paper figure 3a): the bin has no bar
    height to see, so it is drawn as a marker at recall 0, sized by its replies and labelled n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reporting.figures import draw_reliability

    fig, ax = plt.subplots()
    draw_reliability(ax, {"short_cot": ([0.85, 0.85, 0.85, 0.3], [0.0, 0.0, 0.0, 0.5])})
    [points] = [c for c in ax.collections if len(c.get_offsets())]
    offsets = [tuple(map(float, o)) for o in points.get_offsets()]
    sizes = list(points.get_sizes())
    at_zero = [k for k, (x, y) in enumerate(offsets) if y == 0.0]
    assert len(at_zero) == 1 and 0.8 <= offsets[at_zero[0]][0] < 0.9
    assert sizes[at_zero[0]] == max(sizes)  # three replies: the largest marker
    assert ax.get_ylim()[0] < 0  # not clipped at the axis
    assert "n=3" in [t.get_text() for t in ax.texts]
    plt.close(fig)


def test_level_ticks_name_the_bin_as_the_paper_does():
    from reporting.panels.muso import level_label  # the one MuSoBench bin name (evaluations.muso)

    assert level_label(51, 100) == "51-100" and level_label(1, 1) == "1-1" and level_label(501, None) == "501+"


@pytest.mark.slow
def test_the_leaderboard_marks_a_model_no_longer_configured(tmp_path):
    cfg, _ = build_ib_report(tmp_path)
    wh = Warehouse(cfg.warehouse_path())
    wh.upsert("ib.metrics", [{"model": "retired", "setting": "vanilla", "form": "judging", "metric": "Acc",
                              "category": "-", "value": 0.5, "numerator": 1, "denominator": 2, "n_failed": 0}])
    configured = {r["model"]: r["configured"] for r in wh.rows(
        "SELECT DISTINCT model, configured FROM report.headline WHERE family = 'ib'")}
    assert configured == {"stub": True, "retired": False}
    with StubServer(responder=lambda body: "Answer: 1") as stub:
        assert materialize(build_definitions(stub_config(stub, tmp_path, ib=IB).source), ["model_report"]).success
    index = (cfg.warehouse_path().parent / "reports" / "index.html").read_text()
    assert "<th>retired<br><small>(no longer configured)</small></th>" in index
    assert "Models no longer configured: retired." in index
    # its number is shown, with its n, but links to no page: none is built for it
    assert "0.5 <small>n=2</small>" in index and "retired/samples.html" not in index


@pytest.mark.slow
def test_metrics_assets_record_headline_numbers_as_numbers_and_tables_whole(tmp_path):
    """Dagster plots numeric metadata over materialisations: each headline number is a float entry;
    the summary table is a typed table with every row (not Markdown cut at 50)."""
    import dagster as dg

    cfg, _ = build_ib_report(tmp_path)
    with StubServer(responder=lambda body: "Answer: 1") as stub:
        result = materialize(build_definitions(stub_config(stub, tmp_path, ib=IB).source), ["ib_metrics"])
    [mat] = [e for e in result.all_events if e.event_type_value == "ASSET_MATERIALIZATION"]
    metadata = mat.event_specific_data.materialization.metadata
    wh = Warehouse(cfg.warehouse_path())
    expected = {f"stub {r['scope']} {r['metric']}": round(r["value"], 4) for r in wh.rows(
        "SELECT scope, metric, value FROM report.headline WHERE family = 'ib' AND value IS NOT NULL")}
    assert expected and {k: metadata[k].value for k in expected} == expected  # rounded as the UI shows them
    assert all(isinstance(metadata[k], dg.FloatMetadataValue) for k in expected)
    summary = metadata["summary"]
    assert isinstance(summary, dg.TableMetadataValue)
    assert len(summary.records) == wh.scalar("SELECT count(*) FROM ib.summary")
    assert {c.name: c.type for c in summary.schema.columns}["model"] == "string"


def test_the_reports_server_serves_only_its_folder_to_requests_addressed_to_it(tmp_path):
    """D12's smaller attacks on `python -m assets.report --serve`: a symbolic link out of the folder, a
    directory listing, a request whose Host names another site (DNS rebinding) are refused; a page is
    served. It binds loopback, whatever BENCHSMITH_REPORTS_URL names."""
    import http.client
    import threading

    from reporting import pages

    folder = tmp_path / "reports"
    (folder / "stub").mkdir(parents=True)
    (folder / "index.html").write_text("<h1>leaderboard</h1>")
    (folder / "stub" / "samples.html").write_text("<p>replies</p>")
    secret = tmp_path / "secret.txt"
    secret.write_text("the lake's password")
    (folder / "leak.txt").symlink_to(secret)
    port = _free_port()
    server = __import__("http.server").server.ThreadingHTTPServer(("127.0.0.1", port),
                                                                   pages._handler(folder, "127.0.0.1", port))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        def get(path, host=f"127.0.0.1:{port}"):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", path, headers={"Host": host})
            r = conn.getresponse()
            return r.status, r.read().decode(errors="replace")

        assert get("/index.html") == (200, "<h1>leaderboard</h1>")
        assert get("/stub/samples.html", host=f"localhost:{port}")[0] == 200
        assert get("/leak.txt")[0] == 404 and "password" not in get("/leak.txt")[1]
        assert get("/stub/")[0] == 404  # no listing
        assert get("/../secret.txt")[0] == 404
        assert get("/index.html", host=f"attacker.example:{port}")[0] == 421
        assert get("/index.html", host="127.0.0.1:1")[0] == 421
    finally:
        server.shutdown()
        server.server_close()


def test_the_reports_server_binds_loopback_whatever_the_url_names(monkeypatch):
    from reporting import pages

    seen = {}
    monkeypatch.setattr(pages, "serve", lambda folder, host, port: seen.update(host=host, port=port))
    monkeypatch.setattr("configuration.load_config", lambda: type("C", (), {"warehouse_path": lambda self: Path("/tmp/x/wh.duckdb")})())
    monkeypatch.setenv("BENCHSMITH_REPORTS_URL", "https://reports.example.org:8443")
    assert pages.main(["--serve"]) == 0 and seen == {"host": "127.0.0.1", "port": 3001}
    monkeypatch.setenv("BENCHSMITH_REPORTS_URL", "http://0.0.0.0:3005")
    assert pages.main(["--serve"]) == 0 and seen == {"host": "127.0.0.1", "port": 3001}
    monkeypatch.setenv("BENCHSMITH_REPORTS_URL", "http://127.0.0.1:3005")
    assert pages.main(["--serve"]) == 0 and seen == {"host": "127.0.0.1", "port": 3005}


def test_the_level_plot_names_each_task_whole_and_shows_a_zero_mean_as_a_visible_bar(tmp_path, monkeypatch):
    """Issue 50: the ticks read "subse" / "timet", and a recall of 0 drew a bar of no height."""
    import matplotlib

    matplotlib.use("Agg")
    wh = Warehouse(tmp_path / "wh.duckdb")
    _muso_replies(wh, 2, confidence=90.0, truncated=False)
    drawn = {}

    def keep(self, name, title, reason, draw, note=""):
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots()
        draw(ax)
        drawn[name] = ax
        from reporting.panels import Plot
        return Plot(title, None, reason)

    monkeypatch.setattr(Writer, "plot", keep)
    muso_panel(wh, "m", Writer(tmp_path / "out"))
    ax = drawn["muso_levels"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["SubsetSum\n1-50"]
    heights = [p.get_height() for p in ax.patches]
    assert len(heights) == 2 and all(h > 0 for h in heights)  # recall and precision, both 0, both visible
    assert any(t.get_text().startswith("0.00\nn=2") for t in ax.texts)


def test_a_page_written_by_several_writers_while_read_is_always_one_writer_s_whole_page(tmp_path):
    """`write_whole` (every page of the reports): runs sharing a reports folder write the leaderboard
    at once while the reports server reads it; each read finds one writer's page, whole, and the
    page left is readable by others (not the temporary file's private mode), with no temporary left."""
    import threading

    from configuration.files import write_whole

    page = tmp_path / "index.html"
    texts = [f"<html>{w}" + "x" * (200_000 + 7919 * w) + f"{w}</html>" for w in range(4)]
    write_whole(page, texts[0])
    done = threading.Event()
    seen: list[str] = []

    def read() -> None:
        while not done.is_set():
            seen.append(page.read_text(encoding="utf-8"))

    def write(w: int) -> None:
        for _ in range(30):
            write_whole(page, texts[w])

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    reader.join()
    assert seen and all(s in texts for s in seen)
    assert page.read_text(encoding="utf-8") in texts
    assert page.stat().st_mode & 0o044 == 0o044 & ~_umask()
    assert [p.name for p in tmp_path.iterdir()] == ["index.html"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
