"""Source datasets for the logic and QA families: FLD, FOLIO and ScienceQA, normalised.

Each source is read either from the Hugging Face hub (or a local dataset
directory) through `datasets.load_dataset`, or from local files or a folder of
them, and normalised to `SourceRecord`s: labels to True / False / Unknown with
the upstream spelling kept in `original_label`. A file's format is decided by
its content: a JSON list of objects (pretty-printed or not), a JSON object
keyed by id (ScienceQA's `problems.json`; the key becomes `id`), JSON Lines,
CSV with a header row, or Parquet. In a folder, JSON files that hold no rows
(ScienceQA's `pid_splits.json`, `captions.json`) are passed over; a single file
that is none of these says which layouts were expected.

Reading is all-or-nothing: every malformed row is reported with its file (or
hub id) and row number and the field at fault, and nothing is returned, so no
partial source reaches the warehouse.

Upstream layouts handled (REFERENCE-FACTS, "Source datasets"), for WakenLLM and
Instruction Boundary; the choice datasets keep `choices` and `answer_index`
(MultiRC: `extra.answer_indices`):
- MMLU (`cais/mmlu`, config `all`): `question`, `subject`, `choices`, `answer`;
  or the original release's headerless CSVs (`data/test/<subject>_test.csv`:
  question, four options, answer letter);
- MMLU-Pro (`TIGER-Lab/MMLU-Pro`): `options` (up to 10), gold from
  `answer_index` (the letter in `answer` must agree);
- CommonsenseQA (`tau/commonsense_qa`): `choices {label, text}`, `answerKey`;
  or the original release's JSON Lines (`dev_rand_split.jsonl`: `question
  {stem, choices: [{label, text}]}`, `answerKey`);
- TruthfulQA (`truthfulqa/truthful_qa`, `multiple_choice`): `mc1_targets`; or
  the original release's `TruthfulQA.csv` (Best Answer against the "; "
  separated Incorrect Answers; a row without any is skipped and counted);
- MultiRC (`super_glue` `multirc`): one row per candidate answer, grouped
  back by `idx.paragraph` / `idx.question` into one question; or the
  SuperGLUE release's JSON Lines, one row per passage with its questions and
  their answers;
- FLD (`hitachi-nlp/FLD.v2`, configs `default` and `star`): `context`
  ("sent1: ... sent2: ..."), `hypothesis`, `world_assump_label` (PROVED /
  DISPROVED / UNKNOWN; `proof_label` when that is absent), depth and
  distractor counts;
- FOLIO (`yale-nlp/FOLIO`): `premises`, `premises-FOL`, `conclusion`,
  `conclusion-FOL`, `label` True / False / Uncertain, `story_id`,
  `example_id`; and the v0.0 jsonl files, whose train split has `premises` as
  a list, no `conclusion-FOL` and the label Unknown, and whose validation split
  has no ids (ids are then made from file and row);
- ScienceQA (`derek-thomas/ScienceQA`): `question`, `choices`, `answer`
  (index), `hint` (the context), `topic`; only the configured topics, and only
  rows without an image (the benchmarks are text-only); physics and biology
  form "science", writing-strategies and figurative-language form "arts".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from validators.read import normalise_gold_label

SCIENCEQA_FORMS = {"physics": "science", "biology": "science",
                   "writing-strategies": "arts", "figurative-language": "arts"}


class SourceError(ValueError):
    """A source could not be read; the message lists file, row and field of each problem."""


@dataclass(frozen=True)
class SourceSpec:
    """Where a source comes from: a hub id or local dataset directory (`hub`), or files (`path`)."""

    dataset: str  # 'fld', 'folio' or 'scienceqa'
    hub: str | None = None
    config: str | None = None
    split: str = "train"
    path: str | None = None
    topics: tuple[str, ...] = tuple(SCIENCEQA_FORMS)

    def __post_init__(self) -> None:
        if self.dataset not in _NORMALISERS:
            raise SourceError(f"unknown source dataset {self.dataset!r}; expected one of {sorted(_NORMALISERS)}")
        if (self.hub is None) == (self.path is None):
            raise SourceError(f"source {self.dataset}: give exactly one of `hub` or `path`")


@dataclass(frozen=True)
class SourceRecord:
    dataset: str
    subset: str  # FLD config, 'folio', or ScienceQA form ('science' / 'arts')
    split: str
    source_id: str
    origin: str  # hub id[/config] or file path
    row_number: int  # 0-based row in its file or split
    context: str
    question: str  # FLD hypothesis, FOLIO conclusion, ScienceQA question
    label: str | None  # True / False / Unknown (None for ScienceQA: it has choices)
    original_label: str | None
    choices: list[str] | None = None
    answer_index: int | None = None
    topic: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        out = asdict(self)
        out["choices"] = json.dumps(self.choices) if self.choices is not None else None
        out["extra"] = json.dumps(self.extra, default=str)
        return out


class _RowError(Exception):
    def __init__(self, field_name: str, message: str):
        super().__init__(f"field {field_name!r}: {message}")


class _Unusable(Exception):
    """A well-formed row that cannot serve its use (one option only, no correct answer): it is
    skipped and counted in the source's report, never fatal and never silently dropped."""


DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
LAYOUTS = "a JSON list of objects, a JSON object keyed by id, JSON Lines, CSV with a header row, or Parquet"


class _NotRows(Exception):
    """A JSON file that holds no rows (ScienceQA's pid_splits.json or captions.json beside its data)."""


def _raw_rows(spec: SourceSpec) -> Iterator[tuple[str, int, dict[str, Any]]]:
    if spec.hub is not None:
        import datasets  # heavy: imported only when a hub source is read

        origin = spec.hub + (f"/{spec.config}" if spec.config else "")
        try:
            ds = datasets.load_dataset(spec.hub, spec.config, split=_hub_split(spec.split))
        except Exception as exc:  # DatasetGenerationError and friends name no file
            raise SourceError(f"{origin} (split {spec.split}): the datasets library could not read it: "
                              f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
        for i, row in enumerate(ds):
            yield origin, i, dict(row)
        return
    path = Path(spec.path or "")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in DATA_SUFFIXES)
        if not files:
            raise SourceError(f"{path}: no {' / '.join(DATA_SUFFIXES)} files in it")
        for f in files:
            try:
                rows = list(_file_rows(f, spec.dataset))
            except _NotRows:
                continue  # a side file of the release, not data
            yield from rows
        return
    if not path.exists():
        raise SourceError(f"{path}: no such file")
    try:
        yield from _file_rows(path, spec.dataset)
    except _NotRows as exc:
        raise SourceError(f"{path}: {exc}; expected {LAYOUTS}") from None


MMLU_CSV_COLUMNS = ["question", "A", "B", "C", "D", "answer"]


def _file_rows(f: Path, dataset: str = "") -> Iterator[tuple[str, int, dict[str, Any]]]:
    """The rows of one file, its format decided by content (the suffix only tells Parquet and CSV).
    MMLU's original release (`data/test/<subject>_test.csv`) has no header row: question, four
    options, answer letter."""
    if f.suffix == ".parquet":
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(f).to_pylist()):
            yield str(f), i, row
        return
    try:
        text = f.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{f}: not UTF-8 text (byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r}); "
                          "save the file as UTF-8") from None
    if f.suffix == ".csv":
        import csv
        import io

        headerless = dataset == "mmlu" and "question" not in text.split("\n", 1)[0].lower().split(",")
        reader = csv.DictReader(io.StringIO(text), fieldnames=MMLU_CSV_COLUMNS if headerless else None)
        if not headerless and not reader.fieldnames:
            raise SourceError(f"{f}: an empty CSV file; expected a header row")
        for i, row in enumerate(reader):
            yield str(f), i, dict(row)
        return
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, list):
        for i, row in enumerate(whole):
            if not isinstance(row, dict):
                raise SourceError(f"{f}: row {i}: expected an object, got {type(row).__name__} (a JSON list of objects)")
            yield str(f), i, row
        return
    if isinstance(whole, dict):
        values = list(whole.values())
        keyed = bool(values) and all(isinstance(v, dict) for v in values) and (
            len(values) > 1 or any(not isinstance(x, str) for x in values[0].values()))
        if keyed:
            for i, (key, row) in enumerate(whole.items()):
                yield str(f), i, {"id": key, **row} if "id" not in row else row
            return
        if sum(1 for line in text.splitlines() if line.strip()) > 1:
            raise _NotRows("a JSON object that is not a collection of rows keyed by id")
        # one line: a JSON Lines file of one row
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SourceError(f"{f}: row {i} (line {i + 1}): not valid JSON ({exc.msg}); expected {LAYOUTS}") from None
        if not isinstance(row, dict):
            raise SourceError(f"{f}: row {i} (line {i + 1}): expected an object, got {type(row).__name__} "
                              f"(JSON Lines)")
        yield str(f), i, row


def _text(row: dict[str, Any], name: str, required: bool = True) -> str:
    value = row.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise _RowError(name, "missing or empty")
        return ""
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise _RowError(name, "expected text or a list of texts")
        return "\n".join(value)
    if not isinstance(value, str):
        raise _RowError(name, f"expected text, got {type(value).__name__}")
    return value


def _label(row: dict[str, Any], *names: str) -> tuple[str, str]:
    for name in names:
        if row.get(name) is not None:
            try:
                return normalise_gold_label(row[name]), str(row[name])
            except ValueError as exc:
                raise _RowError(name, str(exc)) from None
    raise _RowError(names[0], "missing")


def _fld(spec: SourceSpec, origin: str, i: int, row: dict[str, Any]) -> SourceRecord:
    label, original = _label(row, "world_assump_label", "proof_label")
    extra = {k: row[k] for k in ("depth", "num_formula_distractors", "num_translation_distractors",
                                 "num_all_distractors", "proof_label", "proofs") if k in row}
    return SourceRecord(
        dataset="fld", subset=spec.config or "default", split=spec.split,
        source_id=str(row.get("id") if row.get("id") is not None else f"{Path(origin).stem}-{i}"),
        origin=origin, row_number=i, context=_text(row, "context"), question=_text(row, "hypothesis"),
        label=label, original_label=original, extra=extra,
    )


def _folio(spec: SourceSpec, origin: str, i: int, row: dict[str, Any]) -> SourceRecord:
    label, original = _label(row, "label")
    premises_fol = row.get("premises-FOL")
    if isinstance(premises_fol, str):
        premises_fol = [p for p in premises_fol.splitlines() if p.strip()]
    ident = row.get("example_id", row.get("id"))
    return SourceRecord(
        dataset="folio", subset="folio", split=spec.split,
        source_id=str(ident) if ident is not None else f"{Path(origin).stem}-{i}",
        origin=origin, row_number=i, context=_text(row, "premises"), question=_text(row, "conclusion"),
        label=label, original_label=original,
        extra={"story_id": row.get("story_id"), "premises_fol": premises_fol,
               "conclusion_fol": row.get("conclusion-FOL")},
    )


_SPLIT_ALIASES = {"val": "validation", "dev": "validation"}


def split_names(split: str) -> set[str]:
    """The splits a `split` value names: one ("train"), several joined by "+" ("train+validation",
    as the datasets library reads them), or "all" (train, validation and test: ScienceQA's 21,208
    questions, which paper 000's appendix C counts, are all three)."""
    if split == "all":
        return {"train", "validation", "test"}
    return {_SPLIT_ALIASES.get(s.strip(), s.strip()) for s in split.split("+") if s.strip()}


def _hub_split(split: str) -> str:
    return "+".join(sorted(split_names(split))) if split == "all" else split


def _scienceqa(spec: SourceSpec, origin: str, i: int, row: dict[str, Any]) -> SourceRecord | None:
    topic = row.get("topic")
    if topic not in spec.topics or row.get("image") is not None:
        return None  # another topic, or needs its picture
    if row.get("split") is not None and not isinstance(row["split"], str):
        raise _RowError("split", f"expected a split name, got {row['split']!r}")
    if row.get("split") is not None and _SPLIT_ALIASES.get(row["split"], row["split"]) not in split_names(spec.split):
        return None  # the original release (problems.json) holds every split in one file
    choices = row.get("choices")
    if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
        raise _RowError("choices", "expected a list of at least two texts")
    answer = row.get("answer")
    if not isinstance(answer, int) or not 0 <= answer < len(choices):
        raise _RowError("answer", f"expected an index into the {len(choices)} choices, got {answer!r}")
    return SourceRecord(
        dataset="scienceqa", subset=SCIENCEQA_FORMS.get(str(topic), str(topic)), split=spec.split,
        source_id=str(row.get("id") if row.get("id") is not None else f"{spec.split}-{i}"),
        origin=origin, row_number=i, context=_text(row, "hint", required=False), question=_text(row, "question"),
        label=None, original_label=None, choices=choices, answer_index=answer, topic=str(topic),
        extra={k: row.get(k) for k in ("grade", "subject", "category", "skill", "lecture", "solution")},
    )


def _choices(row: dict[str, Any], name: str, minimum: int = 2) -> list[str]:
    value = row.get(name)
    if not isinstance(value, list) or len(value) < minimum or not all(isinstance(c, str) for c in value):
        raise _RowError(name, f"expected a list of at least {minimum} texts")
    return value


def _index(value: Any, n: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n:
        raise _RowError(name, f"expected an index into the {n} options, got {value!r}")
    return value


def _mmlu(spec: SourceSpec, origin: str, i: int, row: dict[str, Any]) -> SourceRecord:
    """Hub layout (`question`, `subject`, `choices`, `answer` index), or the original release's
    headerless CSV row (question, A, B, C, D, answer letter), its subject from the file name."""
    if "choices" not in row and "A" in row:
        choices = [_text(row, k) for k in "ABCD"]
        letter = str(row.get("answer") or "").strip().upper()
        if letter not in ("A", "B", "C", "D"):
            raise _RowError("answer", f"expected a letter A-D (the original CSV's last column), got {row.get('answer')!r}")
        subject = Path(origin).stem.rsplit("_", 1)[0]
        return SourceRecord("mmlu", subject, spec.split, f"{Path(origin).stem}-{i}", origin, i, "",
                            _text(row, "question"), None, None, choices, "ABCD".index(letter), subject)
    choices = _choices(row, "choices")
    return SourceRecord("mmlu", str(row.get("subject") or "all"), spec.split, f"{spec.split}-{i}", origin, i, "",
                        _text(row, "question"), None, None, choices, _index(row.get("answer"), len(choices), "answer"),
                        row.get("subject"))


def _mmlu_pro(spec: SourceSpec, origin: str, i: int, row: dict[str, Any]) -> SourceRecord:
    if isinstance(row.get("options"), list) and len(row["options"]) < 2:
        raise _Unusable("fewer than 2 options")  # 5 of MMLU-Pro's 12,032 test rows
    options = _choices(row, "options")
    # the gold is `answer_index`; `answer` is a letter (reading it as an index was a pitfall upstream)
    idx = _index(row.get("answer_index"), len(options), "answer_index")
    letter = row.get("answer")
    if isinstance(letter, str) and letter.strip() and ord(letter.strip().upper()[0]) - ord("A") != idx:
        raise _RowError("answer", f"letter {letter!r} disagrees with answer_index {idx}")
    return SourceRecord("mmlu_pro", str(row.get("category") or "all"), spec.split,
                        str(row.get("question_id", f"{spec.split}-{i}")), origin, i, "", _text(row, "question"),
                        None, None, options, idx, row.get("category"), {"src": row.get("src")})


def _commonsenseqa(spec: SourceSpec, origin: str, i: int, row: dict[str, Any]) -> SourceRecord:
    """Hub layout (`question` text, `choices {label: [...], text: [...]}`, `answerKey`), or the
    original release's JSON Lines (`train_rand_split.jsonl`, ...): `question {question_concept,
    choices: [{label, text}], stem}`, `answerKey`."""
    q = row.get("question")
    if isinstance(q, dict):  # the original release
        listed = q.get("choices")
        if not isinstance(listed, list) or len(listed) < 2 or not all(
                isinstance(c, dict) and isinstance(c.get("label"), str) and isinstance(c.get("text"), str)
                for c in listed):
            raise _RowError("question.choices", "expected a list of {label, text} (the original release)")
        ch = {"label": [c["label"] for c in listed], "text": [c["text"] for c in listed]}
        question, concept = _text(q, "stem"), q.get("question_concept")
    else:
        ch = row.get("choices")
        if not isinstance(ch, dict) or not isinstance(ch.get("label"), list) or not isinstance(ch.get("text"), list) \
                or len(ch["label"]) != len(ch["text"]) or len(ch["text"]) < 2:
            raise _RowError("choices", "expected {label: [...], text: [...]} of equal length (the hub's layout), or "
                                       "question {stem, choices: [{label, text}]} (the original release)")
        question, concept = _text(row, "question"), row.get("question_concept")
    key = row.get("answerKey")
    if key not in ch["label"]:
        raise _RowError("answerKey", f"{key!r} is not one of the labels {ch['label']}")
    return SourceRecord("commonsenseqa", "commonsenseqa", spec.split, str(row.get("id", f"{spec.split}-{i}")), origin,
                        i, "", question, None, None, list(ch["text"]), ch["label"].index(key), concept)


def _truthfulqa(spec: SourceSpec, origin: str, i: int, row: dict[str, Any]) -> SourceRecord:
    """Hub layout (`mc1_targets`: choices with exactly one label 1) or the original release's CSV
    (Type, Category, Question, Best Answer, Correct Answers, Incorrect Answers, Source; answers
    separated by "; "): there the best answer is the one correct option, the incorrect ones the rest."""
    if "mc1_targets" not in row and "Best Answer" in row:
        best = _text(row, "Best Answer").strip()
        wrong = [a.strip() for a in _text(row, "Incorrect Answers", required=False).split(";") if a.strip()]
        if not wrong:
            raise _Unusable("no incorrect answer")
        return SourceRecord("truthfulqa", "csv", spec.split, f"csv-{i}", origin, i, "", _text(row, "Question"),
                            None, None, [best, *wrong], 0, row.get("Category") or None,
                            {"type": row.get("Type"), "source": row.get("Source")})
    mc1 = row.get("mc1_targets")
    if not isinstance(mc1, dict) or not isinstance(mc1.get("choices"), list) or not isinstance(mc1.get("labels"), list) \
            or len(mc1["choices"]) != len(mc1["labels"]) or mc1["labels"].count(1) != 1:
        raise _RowError("mc1_targets", "expected {choices, labels} with exactly one label 1 (the hub's "
                                       "multiple_choice layout), or the original CSV's Best Answer / Incorrect Answers")
    return SourceRecord("truthfulqa", "mc1", spec.split, f"{spec.split}-{i}", origin, i, "", _text(row, "question"),
                        None, None, list(mc1["choices"]), mc1["labels"].index(1), None)


_NORMALISERS = {"fld": _fld, "folio": _folio, "scienceqa": _scienceqa, "mmlu": _mmlu, "mmlu_pro": _mmlu_pro,
                "commonsenseqa": _commonsenseqa, "truthfulqa": _truthfulqa, "multirc": None}


def _multirc(spec: SourceSpec, rows: list[tuple[str, int, dict[str, Any]]], errors: list[str]) -> list[SourceRecord]:
    """MultiRC has one row per (question, candidate answer): group them back into one question
    with several options, the true ones (label 1) forming the gold set."""
    groups: dict[tuple[Any, Any], list[tuple[str, int, dict[str, Any]]]] = {}
    out: list[SourceRecord] = []
    for origin, i, row in rows:
        if isinstance(row.get("passage"), dict):  # the SuperGLUE release: one row per passage
            out += _multirc_passage(spec, origin, i, row, errors)
            continue
        idx = row.get("idx")
        if not isinstance(idx, dict) or "paragraph" not in idx or "question" not in idx or "answer" not in idx:
            errors.append(f"{origin}: row {i}: field 'idx': expected {{paragraph, question, answer}} (the hub's "
                          "row per answer), or a 'passage' with its questions (the SuperGLUE release)")
            continue
        if row.get("label") not in (0, 1):
            errors.append(f"{origin}: row {i}: field 'label': expected 0 or 1, got {row.get('label')!r}")
            continue
        if not all(_whole_number(idx[k]) for k in ("paragraph", "question", "answer")):
            errors.append(f"{origin}: row {i}: field 'idx': expected whole numbers, got {idx!r}")
            continue
        groups.setdefault((idx["paragraph"], idx["question"]), []).append((origin, i, row))
    for (p, q), members in groups.items():
        members.sort(key=lambda m: m[2]["idx"]["answer"])
        origin, first, row0 = members[0]
        try:
            answers = [_text(m[2], "answer") for m in members]
            context, question = _text(row0, "paragraph"), _text(row0, "question")
        except _RowError as exc:
            errors.append(f"{origin}: row {first}: {exc}")
            continue
        true = [k for k, m in enumerate(members) if m[2]["label"] == 1]
        out.append(SourceRecord("multirc", "multirc", spec.split, f"p{p}-q{q}", origin, first, context, question,
                                None, None, answers, None, None, {"answer_indices": true}))
    return out


def _whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _multirc_passage(spec: SourceSpec, origin: str, i: int, row: dict[str, Any], errors: list[str]) -> list[SourceRecord]:
    """One SuperGLUE MultiRC row: {idx, version, passage: {text, questions: [{question, idx,
    answers: [{text, idx, label}]}]}}; each question becomes a record, the answers its options."""
    passage = row["passage"]
    text, questions = passage.get("text"), passage.get("questions")
    if not isinstance(text, str) or not text.strip() or not isinstance(questions, list):
        errors.append(f"{origin}: row {i}: field 'passage': expected {{text, questions: [...]}}")
        return []
    out = []
    for qi, q in enumerate(questions):
        answers = q.get("answers") if isinstance(q, dict) else None
        if not isinstance(answers, list) or not answers or not isinstance(q.get("question"), str) or any(
                not isinstance(a, dict) or not isinstance(a.get("text"), str) or a.get("label") not in (0, 1)
                or not _whole_number(a.get("idx", 0)) for a in answers):
            errors.append(f"{origin}: row {i}: passage question {qi}: expected {{question, idx, answers: "
                          "[{text, idx, label 0/1}]}")
            continue
        answers = sorted(answers, key=lambda a: a.get("idx", 0))
        out.append(SourceRecord("multirc", "multirc", spec.split, f"p{row.get('idx', i)}-q{q.get('idx', qi)}", origin, i,
                                text, q["question"], None, None, [a["text"] for a in answers], None, None,
                                {"answer_indices": [k for k, a in enumerate(answers) if a["label"] == 1]}))
    return out


def load_source(spec: SourceSpec, max_errors: int = 20, report: dict[str, Any] | None = None) -> list[SourceRecord]:
    """Every record of a source, normalised; SourceError listing each malformed row otherwise (the
    same problem on many rows is said once, with their count). Rows that cannot serve their use are
    skipped and counted in `report["skipped"]` ({reason: rows})."""
    records: list[SourceRecord] = []
    errors: list[tuple[str, int, str]] = []
    skipped: dict[str, int] = {}
    normalise = _NORMALISERS[spec.dataset]
    if normalise is None:  # MultiRC: rows are grouped into questions
        plain: list[str] = []
        records = _multirc(spec, list(_raw_rows(spec)), plain)
        errors += [(e, -1, "") for e in plain]
        normalise = lambda *_: None  # noqa: E731
    for origin, i, row in ([] if spec.dataset == "multirc" else _raw_rows(spec)):
        try:
            rec = normalise(spec, origin, i, row)
        except _Unusable as why:
            skipped[str(why)] = skipped.get(str(why), 0) + 1
            continue
        except (_RowError, TypeError, ValueError, KeyError, AttributeError) as exc:
            # a _RowError names the field; anything else is a value no normaliser expected there
            why = str(exc) if isinstance(exc, _RowError) else f"a value of an unexpected type ({type(exc).__name__}: {exc})"
            errors.append((origin, i, why))
            if len(errors) >= max_errors:
                break
            continue
        if rec is not None:
            records.append(rec)
    if report is not None:
        report["skipped"] = skipped
    if errors:
        more = " (stopped after the first errors)" if len(errors) >= max_errors else ""
        raise SourceError(f"{spec.dataset}: {len(errors)} malformed rows{more}, nothing loaded:\n  "
                          + "\n  ".join(_said_once(spec, errors)))
    ids = [r.source_id for r in records]
    if len(ids) != len(set(ids)):
        first: dict[str, SourceRecord] = {}
        for r in records:
            if r.source_id in first:
                raise SourceError(f"{r.origin}: row {r.row_number}: source id {r.source_id!r} appears twice (first on "
                                  f"row {first[r.source_id].row_number}); nothing loaded")
            first[r.source_id] = r
    return records


def load_configured(kind: str, source: Any, topics: Iterable[str] | None = None,
                    report: dict[str, Any] | None = None) -> list[SourceRecord]:
    """The one loader path of configured sources, for WakenLLM and Instruction Boundary alike:
    `source` is a configuration's `source` (hub id or local dataset directory, or files; relative
    paths were resolved against the configuration file when it loaded), `kind` the dataset layout
    family, `topics` ScienceQA's topics (all four when not given)."""
    extra = {"topics": tuple(topics)} if topics else {}
    return load_source(SourceSpec(kind, hub=source.hub, config=source.config, split=source.split, path=source.path,
                                  **extra), report=report)


def _said_once(spec: SourceSpec, errors: list[tuple[str, int, str]]) -> list[str]:
    """One line per (file, problem), with the rows it concerns."""
    grouped: dict[tuple[str, str], list[int]] = {}
    for origin, i, message in errors:
        grouped.setdefault((origin, message), []).append(i)
    lines = []
    for (origin, message), rows in grouped.items():
        if rows == [-1]:  # already a whole line (MultiRC grouping)
            lines.append(origin)
            continue
        where = f"row {rows[0]}" if len(rows) == 1 else f"rows {', '.join(map(str, rows[:5]))}" + (
            f" and {len(rows) - 5} more" if len(rows) > 5 else "")
        hint = ""
        if spec.dataset == "fld" and "world_assump_label" in message and "missing" in message:
            hint = (" (a file from FLD's generator before FLD.v2 has no world_assump_label or proof_label; "
                    "use hitachi-nlp/FLD.v2 or a release of it)")
        lines.append(f"{origin}: {where}: {message}{hint}")
    return lines


def by_label(records: Iterable[SourceRecord]) -> dict[str | None, int]:
    counts: dict[str | None, int] = {}
    for r in records:
        counts[r.label] = counts.get(r.label, 0) + 1
    return counts
