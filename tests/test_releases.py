"""Benchmark releases (releases/): Parquet per configuration, a dataset card `datasets` reads, Croissant
metadata, licences from the sources, byte-identical rebuilds, and a release read back as a source."""

from __future__ import annotations

import json
import os
import re
import stat

import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import releases
from assets.materialize_all import main as materialize_all
from configuration import load_config
from llm_calls.stub_server import StubServer
from tests.conftest import stub_config
from tests.test_plan import SMALL, _answer
from warehouse import Warehouse

FAMILIES = ["muso", "waken", "ib"]  # S1-Bench accepts no item on the stub's replies (tested apart)
SELECT = [a for f in FAMILIES for a in ("--select", f)]


def _build(stub, home, monkeypatch, **extra):
    home.mkdir(exist_ok=True)
    cfg = stub_config(stub, home, **{**SMALL, "ib": {**SMALL["ib"], "settings": ["vanilla"]}, **extra})
    monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert materialize_all(SELECT) == 0
    return cfg


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Two warehouses built from the same configuration and seed, and each family's release of the first."""
    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("releases")
    try:
        with StubServer(responder=_answer) as stub:
            first = _build(stub, root / "a", mp)
            second = _build(stub, root / "b", mp)
            out = {k: releases.write(first, Warehouse(first.warehouse_path()), k, root / "out") for k in FAMILIES}
            yield {"root": root, "first": first, "second": second, "out": out, "stub_url": stub.base_url, "stub": stub}
    finally:
        mp.undo()


@pytest.mark.slow
def test_a_release_is_parquet_per_configuration_with_a_card_and_croissant(built):
    for key, w in built["out"].items():
        assert w.folder == built["root"] / "out" / f"{key}-{releases.version(built['first'], key)}"
        header = yaml.safe_load(w.folder.joinpath("README.md").read_text().split("---\n")[1])
        assert [c["config_name"] for c in header["configs"]] == list(w.parts)
        assert header["license"] == "cc-by-4.0" and header["task_categories"] and header["size_categories"] == ["n<1K"]
        wh = Warehouse(built["first"].warehouse_path())
        table = {"muso": "muso.instances", "waken": "waken.items", "ib": "ib.items"}[key]
        column = {"muso": "partition_key", "waken": "dataset", "ib": "dataset"}[key]
        for info in header["dataset_info"]:
            stored = wh.scalar(f"SELECT count(*) FROM {table} WHERE {column} = ?", [info["config_name"]])
            assert info["splits"][0]["num_examples"] == stored > 0
            path = w.folder / info["config_name"] / "test.parquet"
            assert pq.read_table(path).num_rows == stored
        umask = os.umask(0)
        os.umask(umask)
        assert stat.S_IMODE(w.folder.stat().st_mode) == 0o777 & ~umask  # readable by others, as any folder
        body = w.folder.joinpath("README.md").read_text()
        assert f"seed `{built['first'].seed}`" in body and "```bibtex" in body and "## Known limits" in body


@pytest.mark.slow
def test_the_same_configuration_and_seed_give_byte_identical_parquet(built):
    second = built["second"]
    for key, w in built["out"].items():
        again = releases.write(second, Warehouse(second.warehouse_path()), key, built["root"] / "again")
        assert again.folder.name == w.folder.name  # the same configuration names the same version
        for name in w.parts:
            assert (w.folder / name / "test.parquet").read_bytes() == (again.folder / name / "test.parquet").read_bytes()


@pytest.mark.slow
def test_datasets_loads_every_configuration_offline_with_the_documented_features_and_counts(built, monkeypatch):
    from datasets import Features, load_dataset

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for w in built["out"].values():
        header = yaml.safe_load(w.folder.joinpath("README.md").read_text().split("---\n")[1])
        for info in header["dataset_info"]:
            ds = load_dataset(str(w.folder), info["config_name"], split="test",
                              cache_dir=str(built["root"] / "hf-cache"))
            assert ds.num_rows == info["splits"][0]["num_examples"]
            assert ds.features == Features._from_yaml_list(info["features"])


@pytest.mark.slow
def test_the_card_cites_each_paper_in_full_and_the_croissant_has_its_date(built):
    import datetime

    for key, w in built["out"].items():
        card = (w.folder / "README.md").read_text()
        bib = card.split("```bibtex\n", 1)[1].split("```", 1)[0]
        assert "author={" in bib and "year={" in bib and "arxiv.org/abs/" in bib, (key, bib)
        meta = json.loads((w.folder / "croissant.json").read_text())
        assert meta["datePublished"].startswith(datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")), meta.get(
            "datePublished")


@pytest.mark.slow
def test_the_croissant_metadata_validates_and_reads_every_record(built):
    import mlcroissant as mlc

    for w in built["out"].values():
        ds = mlc.Dataset(jsonld=str(w.folder / "croissant.json"))
        assert not ds.metadata.issues.errors
        for name in w.parts:
            n = pq.read_table(w.folder / name / "test.parquet").num_rows
            assert sum(1 for _ in ds.records(record_set=name)) == n


@pytest.mark.slow
def test_a_release_loads_back_as_the_source_of_another_configuration(built, tmp_path, monkeypatch):
    """Another seed, the three releases named under `release.load`: the items are the release's,
    not built again, and the evaluation runs on them."""
    folders = {k: str(w.folder) for k, w in built["out"].items()}
    with StubServer(responder=_answer) as stub:
        cfg = _build(stub, tmp_path / "c", monkeypatch, seed=7, release={"load": folders})
    a, c = Warehouse(built["first"].warehouse_path()), Warehouse(cfg.warehouse_path())
    for table in ("muso.instances", "muso.solutions", "waken.items", "ib.items"):
        left, right = a.rows(f"SELECT * FROM {table} ORDER BY ALL"), c.rows(f"SELECT * FROM {table} ORDER BY ALL")
        assert left == right and left, table
    assert c.scalar("SELECT count(*) FROM ib.responses") > 0 and c.scalar("SELECT count(*) FROM muso.responses") > 0


@pytest.mark.slow
def test_a_release_lacking_a_configured_partition_or_changed_after_writing_is_refused(built, tmp_path):
    w = built["out"]["waken"]
    with pytest.raises(releases.ReleaseError, match="has no configuration 'folio'"):
        releases.read_part(w.folder, "waken", "folio")
    with pytest.raises(releases.ReleaseError, match="a release of 'waken', not of 'ib'"):
        releases.read_part(w.folder, "ib", "fld")
    changed = tmp_path / "changed"
    import shutil

    shutil.copytree(w.folder, changed)
    path = changed / "fld" / "test.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[0]["question"] += " (edited)"
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), path)
    releases._VERIFIED.clear()
    with pytest.raises(releases.ReleaseError, match="does not match the sha256 and size release.json records"):
        releases.read_part(changed, "waken", "fld")
    _forge_hashes(changed)  # the file's hashes forged to match: the row's own digest still tells
    with pytest.raises(releases.ReleaseError, match="row 1: its content does not match its item_digest"):
        releases.read_part(changed, "waken", "fld")


def test_licences_combine_into_the_one_every_source_allows_or_the_release_is_refused(tmp_path):
    by, sa, ncsa = "cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-sa-4.0"

    def parts(*licences):
        import pyarrow as pa

        return [releases.Part(f"d{i}", pa.table({"x": [1]}), (f"source {i}",), x) for i, x in enumerate(licences)]

    assert releases.combined_license(parts(by, by)) == by
    assert releases.combined_license(parts(by, sa)) == sa  # attribution-only data goes into a share-alike release
    assert releases.combined_license(parts(by, ncsa)) == ncsa
    assert releases.combined_license(parts(sa, ncsa)) is None  # two share-alike licences: no one licence
    assert releases.combined_license(parts(by, None)) is None  # an unknown source
    with StubServer() as stub:
        cfg = stub_config(stub, tmp_path)
    with pytest.raises(releases.ReleaseError, match=r"d0: cc-by-sa-4.0 \(source 0\); d1: cc-by-nc-sa-4.0"):
        releases._license(cfg, "waken", parts(sa, ncsa))
    mixed = cfg.model_copy(update={"release": cfg.release.model_copy(update={"allow_mixed_licenses": True})})
    assert releases._license(mixed, "waken", parts(sa, ncsa)) == "other"


def test_a_waken_release_names_the_licence_of_each_source_it_read(tmp_path):
    """FOLIO and ScienceQA sources: CC BY-SA 4.0 and CC BY-NC-SA 4.0, as their cards state; the
    generated FLD items the project's own."""
    cfg = load_config(_config_with_sources(tmp_path))
    empty = Warehouse(tmp_path / "empty.duckdb")
    with empty.connect():  # the schema, no items
        pass
    by_name = {p.name: p for p in releases.spec("waken").parts(cfg, empty)}
    assert by_name["folio"].license == "cc-by-sa-4.0" and by_name["sqa"].license == "cc-by-nc-sa-4.0"
    assert by_name["fld"].license == cfg.release.generated_license
    # the published card names a local source by its path beside the configuration, never this machine's folders
    assert by_name["folio"].sources[0].startswith("folio: folio.jsonl (a local copy)")
    assert not any(str(tmp_path) in s for p in by_name.values() for s in p.sources)
    with pytest.raises(releases.ReleaseError, match="no items stored"):
        releases.write(cfg, empty, "waken", tmp_path / "out")
    with pytest.raises(releases.ReleaseError, match="no warehouse at"):
        releases.write(cfg, Warehouse(tmp_path / "none.duckdb"), "waken", tmp_path / "out")


def _config_with_sources(tmp_path):
    from tests.conftest import write_config

    data = {"models": {"m": {"base_url": "http://127.0.0.1:9/v1", "model": "x"}}, "evaluate": ["m"], "judge": "m",
            "waken": {"datasets": {
                "fld": {"kind": "fld", "generator": {}, "count": {"demo": 2, "paper": 2}},
                "folio": {"kind": "folio", "source": {"path": str(tmp_path / "folio.jsonl")}, "count": {"demo": 2, "paper": 2}},
                "sqa": {"kind": "scienceqa", "topics": ["physics"], "source": {"path": str(tmp_path / "sqa")},
                        "count": {"demo": 2, "paper": 2}}}}}
    return write_config(tmp_path, data)


@pytest.mark.slow
def test_the_release_command_writes_each_family_and_names_what_it_cannot(built, monkeypatch, capsys):
    monkeypatch.setenv("BENCHSMITH_CONFIG", built["first"].source)
    status = releases.main(["--out", str(built["root"] / "cmd")])
    out, err = capsys.readouterr()
    assert out.count(f"-> {built['root'] / 'cmd'}") == len(FAMILIES) and "Instruction Boundary:" in out
    assert status == 1 and "S1-Bench: not released: " in err and "no items stored" in err  # none accepted here
    manifest = json.loads((built["out"]["ib"].folder / "release.json").read_text())
    assert manifest["family"] == "ib" and manifest["configs"] == list(built["out"]["ib"].parts)


@pytest.mark.slow
def test_an_s1_release_is_written_per_language_and_read_back_as_released_items(tmp_path, monkeypatch):
    """S1-Bench's accepted items (written here directly: the stub's replies accept none) released
    per language, then named under `release.load.s1` by another configuration: its items are the
    release's, marked `release:`, and the evaluation asks them."""
    rows = [{"item_id": f"c{i}", "root_candidate": f"c{i}", "rounds_taken": 0, "subcategory": "scientific notation",
             "category": "math", "language": lang, "question": f"Write {i}00 in scientific notation.",
             "answer": f"{i} x 10^2", "check_spec": json.dumps(None),
             "origin": "programmatic"} for i, lang in ((1, "en"), (2, "en"), (3, "zh"))]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with StubServer(responder=_answer) as stub:
        cfg = stub_config(stub, tmp_path / "a", **{**SMALL, "s1": {**SMALL["s1"], "languages": ["en", "zh"]}})
        wh = Warehouse(cfg.warehouse_path())
        wh.replace_partitions({"s1.items": rows})
        w = releases.write(cfg, wh, "s1", tmp_path / "out")
        assert w.parts == ("en", "zh") and w.rows == 3
        header = yaml.safe_load(w.folder.joinpath("README.md").read_text().split("---\n")[1])
        assert header["language"] == ["en", "zh"]
        only_en = releases.write(cfg.model_copy(update={"seed": 1}), _only(wh, "en", tmp_path), "s1", tmp_path / "en")
        assert yaml.safe_load(only_en.folder.joinpath("README.md").read_text().split("---\n")[1])["language"] == ["en"]
        other = stub_config(stub, tmp_path / "b", **{**SMALL, "s1": {**SMALL["s1"], "languages": ["en", "zh"]}},
                            release={"load": {"s1": str(w.folder)}})
        monkeypatch.setenv("BENCHSMITH_CONFIG", other.source)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "b"))
        assert materialize_all(["--select", "s1"]) == 0
    back = Warehouse(other.warehouse_path())
    got = back.rows("SELECT item_id, question, answer, check_spec, origin FROM s1.items ORDER BY item_id")
    assert [(r["item_id"], r["question"], r["answer"]) for r in got] == [(r["item_id"], r["question"], r["answer"])
                                                                         for r in rows]
    assert all(r["origin"] == f"release:{w.folder.name}/programmatic" for r in got)
    assert back.scalar("SELECT count(DISTINCT item_id) FROM s1.responses") == 3
    assert back.scalar("SELECT count(*) FROM s1.candidates") == 0  # nothing was built


def _only(wh, language, tmp_path):
    """A copy of a warehouse holding only its S1-Bench items of one language."""
    copy = Warehouse(tmp_path / f"only-{language}.duckdb")
    copy.replace_partitions({"s1.items": [
        {k: v for k, v in r.items() if k != "item_digest"}
        for r in wh.rows("SELECT * FROM s1.items WHERE language = ?", [language])]})
    return copy


# -- D11: a release is loaded only whole, as written ---------------------------------------------------

def _copy(folder, tmp_path, name):
    import shutil

    out = tmp_path / name
    shutil.copytree(folder, out)
    releases._VERIFIED.clear()
    return out


def _rewrite(path, edit):
    table = pq.read_table(path)
    rows = edit(table.to_pylist())
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), path, compression="zstd")


def _forge_hashes(folder):
    """What a careful forger does after editing a Parquet file: the manifest's and Croissant's hashes
    and counts made to match the new file."""
    import hashlib

    manifest = json.loads((folder / "release.json").read_text())
    for rel in manifest["files"]:
        if rel.endswith(".parquet"):
            data = (folder / rel).read_bytes()
            manifest["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
            manifest["rows"][rel.split("/")[0]] = pq.read_metadata(folder / rel).num_rows
    meta = json.loads((folder / "croissant.json").read_text())
    for d in meta["distribution"]:
        if d.get("contentUrl") in manifest["files"]:
            d["sha256"] = manifest["files"][d["contentUrl"]]["sha256"]
    (folder / "croissant.json").write_text(json.dumps(meta))
    data = (folder / "croissant.json").read_bytes()
    manifest["files"]["croissant.json"] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (folder / "release.json").write_text(json.dumps(manifest))


@pytest.mark.slow
def test_a_tampered_release_is_refused_naming_the_file(built, tmp_path):
    """Issue D11's five tamperings, each refused with the file named: a row deleted, a row repeated,
    a gold label changed with its row digest recomputed, the Croissant's sha256 changed, the card
    edited. The untouched release loads."""
    from warehouse.connection import item_digest

    w = built["out"]["ib"]
    assert releases.read_part(w.folder, "ib", "fld")["ib.items"]

    def regold(rows):
        rows[0]["gold"] = json.dumps([2] if json.loads(rows[0]["gold"]) != [2] else [1])
        rows[0]["item_digest"] = item_digest(rows[0])
        return rows

    cases = {
        "deleted": (lambda f: _rewrite(f / "fld" / "test.parquet", lambda rows: rows[1:]), "fld/test.parquet"),
        "repeated": (lambda f: _rewrite(f / "fld" / "test.parquet", lambda rows: rows + rows[:1]), "fld/test.parquet"),
        "regold": (lambda f: _rewrite(f / "fld" / "test.parquet", regold), "fld/test.parquet"),
        "croissant": (lambda f: (f / "croissant.json").write_text(
            (f / "croissant.json").read_text().replace('"sha256": "', '"sha256": "0', 1)), "croissant.json"),
        "card": (lambda f: (f / "README.md").write_text((f / "README.md").read_text() + "\nEdited.\n"), "README.md"),
    }
    for name, (tamper, file) in cases.items():
        folder = _copy(w.folder, tmp_path, name)
        tamper(folder)
        with pytest.raises(releases.ReleaseError, match=re.escape(str(folder / file))):
            releases.read_part(folder, "ib", "fld")


@pytest.mark.slow
def test_a_forged_release_is_still_refused_for_a_repeated_item_or_a_gold_of_the_wrong_type(built, tmp_path):
    """Hashes and counts forged to match the edited file: a repeated item is refused by its id, a gold
    that is no option number by its field, each with the row named, never a traceback."""
    w = built["out"]["ib"]
    folder = _copy(w.folder, tmp_path, "repeated")
    _rewrite(folder / "fld" / "test.parquet", lambda rows: rows + rows[:1])
    _forge_hashes(folder)
    with pytest.raises(releases.ReleaseError, match=r"row \d+: item .* appears twice \(first on row 1\)"):
        releases.read_part(folder, "ib", "fld")
    from warehouse.connection import item_digest

    def badly_typed(rows):
        rows[0]["gold"] = json.dumps({"answer": 1})
        rows[0]["item_digest"] = item_digest(rows[0])
        return rows

    folder = _copy(w.folder, tmp_path, "typed")
    _rewrite(folder / "fld" / "test.parquet", badly_typed)
    _forge_hashes(folder)
    with pytest.raises(releases.ReleaseError, match=r"row 1: field 'gold' is \{'answer': 1\}"):
        releases.read_part(folder, "ib", "fld")


@pytest.mark.slow
def test_a_full_run_writes_each_family_s_release_with_its_metrics(built):
    """After `materialize_all`, no release asset is left unmaterialised (issue 50): each family's
    score step wrote its release beside its metrics, and the folder it names loads."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(built["root"] / "a")) as instance:
        for key in FAMILIES:
            event = instance.get_latest_materialization_event(dg.AssetKey(f"{key}_release"))
            assert event is not None, key
            meta = event.asset_materialization.metadata
            folder = meta["path"].value
            assert folder.endswith(f"{key}-{releases.version(built['first'], key)}")
            first = meta["configs"].value[0]
            assert releases.read_part(__import__("pathlib").Path(folder), key, first)
            runs = instance.get_runs(dg.RunsFilter(run_ids=[event.run_id]))
            assert runs[0].job_name == f"score_{key}"  # written with the metrics, by their step


def test_writers_replacing_one_release_at_once_all_succeed_and_leave_one_whole_folder(tmp_path):
    """Runs that share `release.dir` write one family's release at once (four machines each scoring
    their model, the lake test's setup): every move into place succeeds, and the folder left is one
    writer's whole (its two files from the same write), with nothing set aside left over. Removing
    the old folder in place failed here: one writer deleted the files another had moved in, or found
    the folder full again when it renamed its own."""
    import threading

    folder = tmp_path / "ib-0123"
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def writer(w: int) -> None:
        start.wait()
        for i in range(25):
            tmp = tmp_path / f".ib-0123.{w}.{i}"
            tmp.mkdir()
            for name in ("a.txt", "b.txt"):
                (tmp / name).write_text(f"{w}.{i}")
            try:
                releases.move_into_place(tmp, folder)
            except BaseException as exc:  # noqa: BLE001 - collected and failed on below
                errors.append(exc)
                return

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(p.name for p in folder.iterdir()) == ["a.txt", "b.txt"]
    assert (folder / "a.txt").read_text() == (folder / "b.txt").read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["ib-0123"]


@pytest.mark.slow
def test_a_release_written_by_four_writers_at_once_loads(built, tmp_path):
    """Four writers of the same release into one folder at once each return it, and it loads whole."""
    from concurrent.futures import ThreadPoolExecutor

    cfg = built["first"]
    with ThreadPoolExecutor(4) as pool:
        written = list(pool.map(lambda _: releases.write(cfg, Warehouse(cfg.warehouse_path()), "ib", tmp_path),
                                range(4)))
    assert len({w.folder for w in written}) == 1
    folder = written[0].folder
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]
    assert releases.read_part(folder, "ib", written[0].parts[0])


def test_a_release_the_project_refuses_to_write_fails_no_run_and_says_why(tmp_path):
    """No items stored: the release step logs the refusal and materialises nothing, and the run
    (the metrics' run in the command) still succeeds."""
    import dagster as dg

    from assets.definitions import build_definitions
    from tests.conftest import materialize

    with StubServer() as stub:
        cfg = stub_config(stub, tmp_path)
        with dg.instance_for_test() as instance:
            result = materialize(build_definitions(cfg.source), ["ib_release"], instance=instance)
            assert result.success
            assert instance.get_latest_materialization_event(dg.AssetKey("ib_release")) is None
            said = [e.user_message for e in instance.all_logs(result.results[0].run_id)]
    assert any("no release written" in m and "no items stored" in m for m in said), said
    out = cfg.beside(cfg.release.dir)
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.slow
def test_a_manifest_pointing_outside_its_folder_or_naming_an_odd_file_is_refused_on_one_line(built, tmp_path):
    """A forged manifest may point a configuration at a Parquet file elsewhere on the machine, with
    that file's true hash; it is refused by name. A recorded file name holding a line break is
    named quoted, so the error stays one line."""
    import shutil

    w = built["out"]["ib"]
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(w.folder, elsewhere)
    for name, rel in (("up", "../elsewhere/fld/test.parquet"), ("abs", str(elsewhere / "fld" / "test.parquet"))):
        folder = _copy(w.folder, tmp_path, name)
        manifest = json.loads((folder / "release.json").read_text())
        manifest["files"][rel] = manifest["files"]["fld/test.parquet"]
        (folder / "release.json").write_text(json.dumps(manifest))
        with pytest.raises(releases.ReleaseError, match="outside the release folder"):
            releases.read_part(folder, "ib", "fld")
    folder = _copy(w.folder, tmp_path, "dots")
    manifest = json.loads((folder / "release.json").read_text())
    manifest["configs"].append("..")
    (folder / "release.json").write_text(json.dumps(manifest))
    with pytest.raises(releases.ReleaseError, match="configuration '..' is not a folder name"):
        releases.read_part(folder, "ib", "fld")
    folder = _copy(w.folder, tmp_path, "odd")
    manifest = json.loads((folder / "release.json").read_text())
    manifest["files"]["\r"] = None
    (folder / "release.json").write_text(json.dumps(manifest))
    with pytest.raises(releases.ReleaseError) as caught:
        releases.read_part(folder, "ib", "fld")
    assert len(str(caught.value).splitlines()) == 1 and "\\r" in str(caught.value), caught.value


@pytest.mark.slow
def test_a_release_without_recorded_hashes_is_refused(built, tmp_path):
    folder = _copy(built["out"]["ib"].folder, tmp_path, "old")
    manifest = json.loads((folder / "release.json").read_text())
    del manifest["files"]
    (folder / "release.json").write_text(json.dumps(manifest))
    with pytest.raises(releases.ReleaseError, match="records no file hashes"):
        releases.read_part(folder, "ib", "fld")


# -- fuzzing: any change to a release folder is refused, naming the file (issue 52) -----------------------

RELEASE_CASES = 100
RELEASE_FUZZ = settings(max_examples=RELEASE_CASES, deadline=None, derandomize=True,
                        suppress_health_check=[HealthCheck.too_slow])


def _fuzz_release(built, edit):
    """Apply `edit(folder, manifest files)` to a copy of the IB release and read a configuration back:
    a changed file is refused with a ReleaseError naming a path in the folder, never loaded and never
    another exception; an edit to the manifest that changes nothing it vouches for loads the same rows."""
    import shutil
    import tempfile
    from pathlib import Path

    w = built["out"]["ib"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "release"
        shutil.copytree(w.folder, folder)
        releases._VERIFIED.clear()
        vouched = edit(folder, sorted(json.loads((folder / "release.json").read_text())["files"]))
        try:
            got = releases.read_part(folder, "ib", "fld")
        except releases.ReleaseError as exc:
            assert str(folder) in str(exc) and len(str(exc).splitlines()) == 1, exc
            return
        assert not vouched, "a changed file was loaded"
        assert got == releases.read_part(w.folder, "ib", "fld")


@pytest.mark.slow
def test_a_release_with_any_file_changed_is_refused_naming_the_file(built):
    @RELEASE_FUZZ
    @given(st.data())
    def check(data):
        def edit(folder, files):
            rel = data.draw(st.sampled_from(files))
            path = folder / rel
            raw = bytearray(path.read_bytes())
            how = data.draw(st.sampled_from(["flip", "cut", "append", "delete", "swap"]))
            if how == "flip":
                at = data.draw(st.integers(0, len(raw) - 1))
                raw[at] ^= data.draw(st.integers(1, 255))
                path.write_bytes(bytes(raw))
            elif how == "cut":
                path.write_bytes(bytes(raw[:data.draw(st.integers(0, len(raw) - 1))]))
            elif how == "append":
                path.write_bytes(bytes(raw) + data.draw(st.binary(min_size=1, max_size=16)))
            elif how == "delete":
                path.unlink()
            else:  # another file of the release in its place
                other = data.draw(st.sampled_from([f for f in files if f != rel]))
                if (folder / other).read_bytes() == bytes(raw):
                    return False
                path.write_bytes((folder / other).read_bytes())
            return True

        _fuzz_release(built, edit)

    check()


@pytest.mark.slow
def test_a_release_manifest_with_any_value_changed_loads_as_written_or_is_refused(built):
    from tests.test_fuzz_inputs import mutated

    @RELEASE_FUZZ
    @given(st.data())
    def check(data):
        def edit(folder, files):
            path = folder / "release.json"
            path.write_text(json.dumps(data.draw(mutated(json.loads(path.read_text())))))
            return False  # the manifest vouches for the files; an edit that keeps them whole may load

        _fuzz_release(built, edit)

    check()


def test_the_paper_datasets_of_instruction_boundary_have_their_licences_and_multirc_is_named_only_when_used():
    """Issue 50: IB releases from the paper's own datasets were refused for an unknown licence, and every
    IB card carried a MultiRC line."""
    from configuration import parse_config
    from releases import ib as ib_release
    from releases import source_license

    cfg = parse_config({})
    assert {k: source_license(cfg, k) for k in ("mmlu", "mmlu_pro", "commonsenseqa", "truthfulqa")} == {
        "mmlu": "mit", "mmlu_pro": "mit", "commonsenseqa": "mit", "truthfulqa": "apache-2.0"}
    assert source_license(cfg, "multirc") is None
    assert not any("MultiRC" in line for line in ib_release.limits(cfg))
    with_multirc = parse_config({"ib": {"datasets": {"multirc": {"form": "multiple", "count": {"demo": 2, "paper": 2},
                                                                 "source": {"kind": "multirc", "path": "x.jsonl"}}}}})
    assert any("MultiRC" in line for line in ib_release.limits(with_multirc))


def test_a_family_without_a_release_part_is_said_to_have_none(monkeypatch, capsys, tmp_path):
    """A release is an optional part: a family whose registry entry names none is said to have none by
    `spec` and by `python -m releases`, which goes on with the others; no traceback."""
    import dataclasses

    import releases
    from configuration import families
    from releases import ReleaseError
    from releases import spec as release_spec

    s1 = families.BY_KEY["s1"]
    without = dataclasses.replace(s1, parts=dataclasses.replace(s1.parts, release=None))
    monkeypatch.setitem(families.BY_KEY, "s1", without)
    monkeypatch.setattr(releases, "FAMILIES", tuple(without if f.key == "s1" else f for f in families.FAMILIES))
    assert without.release is None and s1.release == "s1_release"
    with pytest.raises(ReleaseError, match="no release is defined for this family"):
        release_spec("s1")
    monkeypatch.setattr(releases, "write", lambda cfg, wh, key, out: (_ for _ in ()).throw(ReleaseError("no items")))
    import configuration
    monkeypatch.setattr(configuration, "load_config", lambda: None)
    monkeypatch.setattr(releases, "open_warehouse", lambda cfg: None)
    assert releases.main([]) == 1  # the others were tried (and had no items here)
    out = capsys.readouterr()
    assert "S1-Bench: no release is defined for this family" in out.out and "S1-Bench" not in out.err


@pytest.mark.slow
def test_the_card_shows_the_prompts_as_the_run_asked_them(built):
    for key, w in built["out"].items():
        card = (w.folder / "README.md").read_text()
        prompts = card.split("## Prompts", 1)[1].split("## Known limits", 1)[0]
        assert "````text\n[user]\n" in prompts and "(asked of stub)" in prompts, (key, prompts[:300])
