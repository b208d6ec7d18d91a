"""Fuzzing of the input surfaces a user hands the project (issue: "no input ends in a traceback"):
the configuration file, each source dataset layout, the S1-Bench release file, and batch output
files. Hypothesis mutates a valid file (a key dropped, a value of another type, bytes flipped, a
line cut, non-UTF-8 bytes, Unicode line breaks inside strings) and each property holds for every
mutation:

- the reader returns what it reads, or raises the surface's own error (`ConfigError`,
  `SourceError`, `ValueError` of the release loader, `BatchImportError`) naming the file: never
  another exception, never a traceback;
- nothing is half-written: a refused batch import leaves `llm.calls` as it was;
- nothing is invented: a stored batch answer is the reply text its line holds, and a line that
  holds no reply is stored as a failure or left pending.

Release folders are fuzzed beside the release tests (`tests/test_releases.py`), where a release is
built once; the reply readers in `tests/test_reader_properties.py`. Each property runs
`CASES` examples (the closing note of issue 52 counts them per surface).
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from configuration import ConfigError, load_config
from generators.s1 import load_release
from generators.sources import SourceError, SourceSpec, load_source
from llm_calls.batch import BatchImportError, import_file, parse_line, read_lines

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).parent / "fixtures" / "sources"
CASES = 150
FUZZ = settings(max_examples=CASES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# -- values and mutations ------------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=30), st.sampled_from(["", "  ", "\u2028", "\x85", "null", "-1", "1e999"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=8)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside nested dicts and lists."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _parent(node: Any, path: tuple) -> Any:
    for step in path[:-1]:
        node = node[step]
    return node


@st.composite
def mutated(draw, doc: Any) -> Any:
    """`doc` with one to three edits: a value replaced by any other, a key dropped, a key added."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, last = _parent(doc, path), path[-1]
        edit = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        if edit == "replace":
            parent[last] = draw(values)
        elif edit == "drop":
            del parent[last]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = draw(values)
    return doc


@st.composite
def byte_edits(draw, data: bytes) -> bytes:
    """`data` with bytes flipped, inserted (non-UTF-8, NUL, Unicode line breaks) or a tail cut."""
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        edit = draw(st.sampled_from(["flip", "insert", "cut"]))
        if edit == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif edit == "insert":
            data[at:at] = draw(st.sampled_from([b"\xff", b"\xe9", b"\x00", "\u2028".encode(), "\x85".encode(),
                                                b"\n", b"{", b'"', b"\r\n", b"- ", b": ", b"*a"]))
        else:
            del data[at:]
    return bytes(data)


def _names(error: BaseException, path: Path) -> bool:
    return str(path) in str(error) or path.name in str(error)


# -- the configuration file -----------------------------------------------------------------------------

CONFIG_TEXT = (ROOT / "benchsmith.yaml").read_bytes()
CONFIG = yaml.safe_load(CONFIG_TEXT)


def _load_config(tmp: Path, data: bytes) -> None:
    path = tmp / "benchsmith.yaml"
    path.write_bytes(data)
    try:
        load_config(path)
    except ConfigError as exc:
        assert str(exc).startswith(str(path)), exc  # every line of the error names the file
        assert all(line.startswith(str(path)) or line.startswith("...") for line in str(exc).splitlines()), exc


@pytest.mark.slow
@FUZZ
@given(mutated(CONFIG))
def test_a_configuration_with_any_value_changed_loads_or_names_the_file_and_key(doc):
    with tempfile.TemporaryDirectory() as tmp:
        _load_config(Path(tmp), yaml.safe_dump(doc, allow_unicode=True).encode())


@FUZZ
@given(byte_edits(CONFIG_TEXT))
def test_a_configuration_file_with_bytes_changed_loads_or_names_the_file(data):
    with tempfile.TemporaryDirectory() as tmp:
        _load_config(Path(tmp), data)


# -- source layouts -------------------------------------------------------------------------------------

# (dataset, fixture file): one per layout the loaders read (JSON Lines of each upstream, a JSON object
# keyed by id, a pretty-printed JSON list, CSV)
SOURCES = [("fld", FIX / "fld_hub" / "default" / "train.jsonl"), ("folio", FIX / "folio_v0_train.jsonl"),
           ("folio", FIX / "folio_hub.jsonl"), ("scienceqa", FIX / "scienceqa_release" / "problems.json"),
           ("mmlu", FIX / "mmlu_pretty.json"), ("mmlu_pro", FIX / "mmlu_pro.jsonl"),
           ("commonsenseqa", FIX / "commonsenseqa_dev_rand_split.jsonl"), ("truthfulqa", FIX / "TruthfulQA.csv"),
           ("multirc", FIX / "multirc_superglue_val.jsonl")]


def _rows_of(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def _dump(path: Path, doc: Any) -> bytes:
    if path.suffix == ".jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in doc).encode()
    return json.dumps(doc, ensure_ascii=False, indent=1).encode()


def _load_source(dataset: str, name: str, data: bytes, split: str = "train") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        try:
            records = load_source(SourceSpec(dataset, path=str(path), split=split))
        except SourceError as exc:
            assert _names(exc, path), exc
            return
        for r in records:  # what is read is whole: text fields are text, labels from the vocabulary
            assert isinstance(r.question, str) and isinstance(r.context, str), r
            assert r.label in (None, "True", "False", "Unknown"), r
            assert r.choices is None or (all(isinstance(c, str) for c in r.choices)
                                         and 0 <= (r.answer_index or 0) < len(r.choices)), r


@pytest.mark.slow
@pytest.mark.parametrize("dataset,path", SOURCES, ids=[f"{d}-{p.name}" for d, p in SOURCES])
def test_each_source_layout_with_rows_changed_loads_whole_or_names_the_file(dataset, path):
    if path.suffix == ".csv":
        pytest.skip("CSV rows have no types to change; its bytes are fuzzed below")
    doc = _rows_of(path)

    @FUZZ
    @given(mutated(doc))
    def check(changed):
        _load_source(dataset, path.name, _dump(path, changed), split="all")

    check()


@pytest.mark.slow
@pytest.mark.parametrize("dataset,path", SOURCES, ids=[f"{d}-{p.name}" for d, p in SOURCES])
def test_each_source_file_with_bytes_changed_loads_whole_or_names_the_file(dataset, path):
    @FUZZ
    @given(byte_edits(path.read_bytes()))
    def check(data):
        _load_source(dataset, path.name, data, split="all")

    check()


S1_RELEASE = FIX / "s1bench_release" / "S1-Bench.json"


def _load_s1(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "S1-Bench.json"
        path.write_bytes(data)
        try:
            rows = load_release(path)
        except ValueError as exc:
            assert str(exc).startswith(str(path)), exc
            return
        assert all(isinstance(r["question"], str) and r["category"] and r["subcategory"] for r in rows), rows


@pytest.mark.slow
@FUZZ
@given(mutated(json.loads(S1_RELEASE.read_text(encoding="utf-8"))))
def test_an_s1_release_with_items_changed_loads_labelled_or_names_the_file_and_item(doc):
    _load_s1(json.dumps(doc, ensure_ascii=False).encode())


@FUZZ
@given(byte_edits(S1_RELEASE.read_bytes()))
def test_an_s1_release_with_bytes_changed_loads_labelled_or_names_the_file(data):
    _load_s1(data)


# -- batch files ----------------------------------------------------------------------------------------

@FUZZ
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200),
                 values.map(lambda v: json.dumps(v, ensure_ascii=False))))
def test_any_batch_line_is_an_object_with_a_custom_id_or_says_why_not(raw):
    obj, why = parse_line(raw)
    assert (obj is None) or (isinstance(obj, dict) and isinstance(obj["custom_id"], str))
    assert obj is None or why is None
    got, bad = read_lines(raw if isinstance(raw, str) else raw.decode("utf-8", "replace"), "f.jsonl")
    assert all(b.startswith("f.jsonl: line ") for b in bad)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A warehouse with three requests exported to a batch file, their output file from the stub's
    `run_batch`, and a copy of the warehouse as it was before any import."""
    from llm_calls import CallRequest, Ledger, ModelRegistry
    from llm_calls.batch import BatchPending
    from llm_calls.stub_server import StubServer, run_batch
    from tests.conftest import stub_config, user
    from warehouse import Warehouse

    tmp = tmp_path_factory.mktemp("fuzz-batch")
    with StubServer() as stub:
        models = {"stub": {"base_url": stub.base_url, "model": "stub-model", "concurrency": 2,
                           "sampling": {"temperature": 0.0, "max_tokens": 32},
                           "batch": {"mode": "files", "dir": str(tmp / "batches")}}}
        cfg = stub_config(stub, tmp, warehouse={"path": str(tmp / "pristine.duckdb")}, models=models)
        ledger = Ledger(Warehouse(cfg.warehouse_path(), lock_timeout_s=30), ModelRegistry(cfg))
        asks = [CallRequest(user(q)) for q in ("What is 2 + 2?", "Name a prime.", "Say a long thing. [[stub: length]]")]
        with pytest.raises(BatchPending) as caught:
            ledger.complete("stub", asks, purpose="fuzz.ask")
        out = tmp / "output.jsonl"
        run_batch(str(caught.value.path), str(out), StubServer())
    return {"cfg": cfg, "db": tmp / "pristine.duckdb", "output": out.read_bytes()}


def _content(line: dict[str, Any]) -> Any:
    try:
        return line["response"]["body"]["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None


def _import(exported, data: bytes) -> None:
    from llm_calls import ModelRegistry
    from warehouse import Warehouse

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "wh.duckdb"
        shutil.copy(exported["db"], db)
        out = Path(tmp) / "output.jsonl"
        out.write_bytes(data)
        wh = Warehouse(db, lock_timeout_s=30)
        before = wh.rows("SELECT key FROM llm.calls")
        try:
            report = import_file(wh, ModelRegistry(exported["cfg"]), out)
        except BatchImportError as exc:
            assert str(exc).startswith(str(out)), exc
            assert wh.rows("SELECT key FROM llm.calls") == before  # refused whole: nothing written
            return
        stored = {r["key"]: r for r in wh.rows("SELECT key, status, response_text FROM llm.calls")}
        lines = {}
        for raw in data.split(b"\n"):
            obj, _ = parse_line(raw)
            if obj is not None:
                lines[obj["custom_id"]] = obj
        assert set(stored) == set(lines)  # every readable line stored, nothing else
        for key, row in stored.items():
            if row["status"] == "ok":  # an answer is exactly the reply text its line holds
                assert row["response_text"] == _content(lines[key]), (row, lines[key])
        assert report.answered + report.failed == len(stored)
        assert all(u.startswith(f"{out}: line ") for u in report.unreadable)


@pytest.mark.slow
@FUZZ
@given(st.data())
def test_a_batch_output_with_lines_changed_stores_exactly_what_its_readable_lines_hold(exported, data):
    lines = [json.loads(x) for x in exported["output"].decode().splitlines()]
    changed = data.draw(mutated(lines))
    if not isinstance(changed, list):
        changed = [changed]
    text = "\n".join(json.dumps(x, ensure_ascii=False) for x in changed) + "\n"
    _import(exported, text.encode())


@pytest.mark.slow
@FUZZ
@given(st.data())
def test_a_batch_output_with_bytes_changed_stores_its_readable_lines_or_names_the_file(exported, data):
    _import(exported, data.draw(byte_edits(exported["output"])))
