"""Instruction Boundary items (paper 003, section 2.2 and appendix A.3), seeded.

Three forms, each half tense and half sparse labels:
- judging (FLD, FOLIO): options True / False / Unknown; Unknown is the sparse label;
- single choice (ScienceQA, MMLU, CommonsenseQA, TruthfulQA): for half the
  questions the correct option is replaced by "All other options are false"
  (the sparse label);
- multiple choice (MultiRC): every question multi-select (2 true of 4), and its
  items are table 3's GR3 items, the multi-answer being this form's sparse label:
  GR3 is accuracy over all 150 of them (its printed values, 0.67, 2.00, 3.33,
  4.67, are multiples of 1/150, impossible over 75), as in the authors' released
  items and evaluator. With `combined_option`, half the questions instead get an
  option "Options i and j are all true" combining the true answers (the sparse
  label) and the other half are tense: an extension, not the paper's tables.

Each base question yields a `complete` item (every option) and an
`insufficient` one (A.3 step 2): an unmodified question loses one incorrect
option; a modified one loses its sparse option, which leaves single-choice
questions with no correct option at all (gold `none`: the no-correct-answer
items). Disturbing-miscellany items keep the correct option and 1..9 wrong ones
(MMLU-Pro's ten options). Options are always numbered 1..n in prompts
(`number_scheme`), and the gold is stored as option numbers.

Choice questions are first fitted to the configured option count (`fit_options`,
default 4 as in the authors' released items): the correct option and wrong ones
sampled with the seed; multiple-choice questions keep `true_options` true
answers (default 2 of 4, as the authors' MultiRC items). A question that cannot
supply them (a two-option ScienceQA question, a MultiRC question with one true
answer) is skipped and counted, never padded.

Offline generators (so the demo runs without the hub): FLD-style judging
problems (generators/fld.py), arithmetic single-choice questions, and "which of
these numbers are even" multiple-choice questions; all answers exact by
construction. Sources are read by `load_bases` through generators/sources.py,
the loader WakenLLM uses too.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from configuration import IBDataset, derived_seed
from configuration.ib import MISCELLANY  # the partition of the disturbing-miscellany items
from generators.fld import generate_problem
from generators.sources import SourceRecord, load_configured
from validators.checks import Check

ITEMS_VERSION = "ib-2"
ALL_FALSE = "All other options are false"
JUDGING_OPTIONS = ("True", "False", "Unknown")


@dataclass
class Base:
    """A question before label modification: options and the 0-based indexes of the true ones."""

    base_id: str
    form: str  # judging, single, multiple
    context: str
    question: str
    options: list[str]
    true: list[int]
    origin: str
    extra: dict[str, Any] = field(default_factory=dict)


def ib_seed(seed: int, name: str) -> int:
    return derived_seed(seed, "ib", name, ITEMS_VERSION)


# -- offline generators -------------------------------------------------------------------

def fld_bases(rng: random.Random, count: int, name: str) -> list[Base]:
    unknown = count // 2
    labels = ["True" if k % 2 == 0 else "False" for k in range(count - unknown)] + ["Unknown"] * unknown
    out = []
    for k, label in enumerate(labels):
        p = generate_problem(rng, rng.randint(1, 3), label)
        out.append(Base(f"{name}-gen-{k:04d}", "judging", p.context(), p.hypothesis_text(), list(JUDGING_OPTIONS),
                        [JUDGING_OPTIONS.index(p.label)], "generator:fld", {"depth": p.depth}))
    return out


def arithmetic_bases(rng: random.Random, count: int, name: str, n_options: int = 4) -> list[Base]:
    out = []
    for k in range(count):
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        wrong = rng.sample([x for x in range(a + b - 12, a + b + 13) if x != a + b and x > 0], n_options - 1)
        options = [str(a + b)] + [str(w) for w in wrong]
        out.append(Base(f"{name}-gen-{k:04d}", "single", "", f"What is {a} + {b}?", options, [0], "generator:arithmetic"))
    return out


def even_number_bases(rng: random.Random, count: int, name: str, n_options: int = 6) -> list[Base]:
    """"Which of these numbers are even?" with `n_options` numbers, at least two of them even and two odd."""
    out = []
    for k in range(count):
        while True:
            nums = rng.sample(range(1, 60), n_options)
            true = [i for i, x in enumerate(nums) if x % 2 == 0]
            if 2 <= len(true) <= n_options - 2:
                break
        out.append(Base(f"{name}-gen-{k:04d}", "multiple", "", "Which of these numbers are even?",
                        [str(x) for x in nums], true, "generator:even_numbers"))
    return out


def arithmetic10_bases(rng: random.Random, count: int, name: str) -> list[Base]:
    """Ten-option arithmetic questions: the offline stand-in for MMLU-Pro in disturbing miscellany."""
    return arithmetic_bases(rng, count, name, n_options=10)


GENERATORS = {"fld": fld_bases, "arithmetic": arithmetic_bases, "arithmetic10": arithmetic10_bases,
              "even_numbers": even_number_bases}


def source_bases(records: Sequence[SourceRecord], form: str, name: str) -> list[Base]:
    out = []
    for r in records:
        if form == "judging":
            if r.label not in JUDGING_OPTIONS:
                continue
            true = [JUDGING_OPTIONS.index(r.label)]
            options = list(JUDGING_OPTIONS)
        elif form == "multiple":
            true = list(r.extra.get("answer_indices") or [])
            options = list(r.choices or [])
            if not true or len(options) < 2:
                continue
        else:
            if r.choices is None or r.answer_index is None:
                continue
            options, true = list(r.choices), [r.answer_index]
        out.append(Base(f"{name}-{r.source_id}", form, r.context, r.question, options, true, r.origin,
                        {"source_id": r.source_id}))
    return out


def load_bases(name: str, spec: IBDataset, count: int, seed: int,
               report: dict[str, Any] | None = None) -> tuple[list[Base], list[SourceRecord]]:
    """A dataset's base questions and the source records they came from ([] for generators, which
    make enough candidates for a 1:1 tense / sparse draw, with at least `spec.options` options)."""
    if spec.generator is not None:
        rng = random.Random(ib_seed(seed, name + ":generator"))
        n = max(2 * count, 4)
        if spec.generator == "arithmetic":
            return arithmetic_bases(rng, n, name, n_options=max(spec.options, 4)), []
        if spec.generator == "even_numbers":
            return even_number_bases(rng, n, name, n_options=spec.options + 2), []
        return GENERATORS[spec.generator](rng, n, name), []
    assert spec.source is not None
    records = load_configured(spec.source.kind, spec.source, spec.source.topics, report=report)
    return source_bases(records, spec.form, name), records


def fit_options(base: Base, options: int, true_options: int, rng: random.Random) -> Base | str:
    """The question with exactly `options` options (paper A.3 and the authors' released items:
    4): single choice keeps its correct option and samples the wrong ones; multiple choice samples
    `true_options` true answers (at least 2: one true answer is not a multiple-choice item) and
    fills up with wrong ones. Judging questions are returned as they are. Why not, when the
    question cannot supply them."""
    if base.form == "judging":
        return base
    wrong = [i for i in range(len(base.options)) if i not in base.true]
    n_true = 1 if base.form == "single" else true_options
    if len(base.true) < n_true:
        return f"fewer than {n_true} true answers"
    if len(wrong) < options - n_true:
        return f"fewer than {options} options"
    keep = sorted(rng.sample(base.true, n_true) + rng.sample(wrong, options - n_true))
    return Base(base.base_id, base.form, base.context, base.question, [base.options[i] for i in keep],
                [keep.index(i) for i in base.true if i in keep], base.origin, base.extra)


# -- items ------------------------------------------------------------------------------------

def _numbers(idx: Sequence[int]) -> list[int]:
    return sorted(i + 1 for i in idx)


def _item(name: str, base: Base, variant: str, label_type: str, options: list[str], gold: list[int] | str,
          removed: str | None, seed: int, **extra: Any) -> dict[str, Any]:
    return {
        "dataset": name, "item_id": f"{base.base_id}:{variant}", "base_id": base.base_id, "form": base.form,
        "label_type": label_type, "variant": variant, "options": options, "gold": gold,
        "n_options": len(options), "number_scheme": "1..n", "context": base.context, "question": base.question,
        "removed_option": removed, "origin": base.origin, "extra": {**base.extra, **extra},
        "dataset_seed": seed, "items_version": ITEMS_VERSION,
    }


def items_for(name: str, base: Base, sparse: bool, rng: random.Random, seed: int,
              combined: bool = False) -> list[dict[str, Any]]:
    """The complete and insufficient items of one base question (A.3 steps 1 and 2); `combined`:
    a multiple-choice question gets the combined option when `sparse` (see the module docstring)."""
    options = list(base.options)
    true = list(base.true)
    if base.form == "judging":
        label_type = "sparse" if options[true[0]] == "Unknown" else "tense"
        complete = _item(name, base, "complete", label_type, options, _numbers(true), None, seed)
        if label_type == "sparse":  # Unknown removed: no offered option is right
            insufficient = _item(name, base, "insufficient", label_type, ["True", "False"], "none", "Unknown", seed)
        else:
            wrong = "False" if options[true[0]] == "True" else "True"
            kept = [o for o in options if o != wrong]
            insufficient = _item(name, base, "insufficient", label_type, kept, [kept.index(options[true[0]]) + 1],
                                 wrong, seed)
        return [complete, insufficient]

    # choice forms: shuffle first (TruthfulQA lists its correct answer first)
    order = list(range(len(options)))
    rng.shuffle(order)
    options = [base.options[i] for i in order]
    true = [order.index(i) for i in base.true]
    if base.form == "single":
        if sparse:
            options[true[0]] = ALL_FALSE  # step 1: the correct option becomes the sparse one
            complete = _item(name, base, "complete", "sparse", options, _numbers(true), None, seed,
                             replaced_option=base.options[base.true[0]])
            kept = [o for o in options if o != ALL_FALSE]
            insufficient = _item(name, base, "insufficient", "sparse", kept, "none", ALL_FALSE, seed)
        else:
            complete = _item(name, base, "complete", "tense", options, _numbers(true), None, seed)
            drop = rng.choice([i for i in range(len(options)) if i not in true])
            kept = [o for i, o in enumerate(options) if i != drop]
            insufficient = _item(name, base, "insufficient", "tense", kept, [kept.index(options[true[0]]) + 1],
                                 options[drop], seed)
        return [complete, insufficient]

    # multiple
    if not combined:  # table 3's GR3 items: multi-select, every one counted in GR3
        complete = _item(name, base, "complete", "sparse", options, _numbers(true), None, seed)
        insufficient = _drop_a_wrong_option(name, base, options, true, "sparse", rng, seed)
        return [complete, insufficient]
    if sparse:
        combined = f"Options {' and '.join(str(n) for n in _numbers(true))} are all true"
        with_combined = options + [combined]
        complete = _item(name, base, "complete", "sparse", with_combined, [len(with_combined)], None, seed)
        insufficient = _item(name, base, "insufficient", "tense", options, _numbers(true), combined, seed)
    else:
        complete = _item(name, base, "complete", "tense", options, _numbers(true), None, seed)
        insufficient = _drop_a_wrong_option(name, base, options, true, "tense", rng, seed)
    return [complete, insufficient]


def _drop_a_wrong_option(name: str, base: Base, options: list[str], true: list[int], label_type: str,
                         rng: random.Random, seed: int) -> dict[str, Any]:
    """A multiple-choice question's insufficient item: one wrong option removed (A.3 step 2)."""
    wrong = [i for i in range(len(options)) if i not in true]
    if not wrong:
        return _item(name, base, "insufficient", label_type, options, _numbers(true), None, seed)
    drop = rng.choice(wrong)
    kept = [o for i, o in enumerate(options) if i != drop]
    gold = sorted(kept.index(options[i]) + 1 for i in true)
    return _item(name, base, "insufficient", label_type, kept, gold, options[drop], seed)


def build_items(name: str, bases: Sequence[Base], count: int, seed: int, options: int = 4, true_options: int = 2,
                report: dict[str, Any] | None = None, combined_option: bool = False) -> list[dict[str, Any]]:
    """`count` base questions (half sparse, half tense), seeded, each fitted to `options` options
    (`fit_options`); two items each. Questions that cannot be fitted are left out, counted by
    reason in `report["unfit"]`."""
    dseed = ib_seed(seed, name)
    rng = random.Random(dseed)
    fitted, unfit = [], {}
    for b in bases:
        got = fit_options(b, options, true_options, random.Random(derived_seed(dseed, "fit", b.base_id)))
        if isinstance(got, str):
            unfit[got] = unfit.get(got, 0) + 1
        else:
            fitted.append(got)
    if report is not None:
        report["unfit"] = unfit
    if len(fitted) < count:
        why = f" ({len(bases) - len(fitted)} left out: " + "; ".join(f"{n} with {w}" for w, n in unfit.items()) + ")" \
            if unfit else ""
        raise ValueError(f"{name}: {count} questions wanted, the source has {len(fitted)} usable{why}")
    form = fitted[0].form if fitted else "single"
    if form == "judging":  # the sparse half are the Unknown items, sampled 1:1
        unknown = [b for b in fitted if b.options[b.true[0]] == "Unknown"]
        known = [b for b in fitted if b.options[b.true[0]] != "Unknown"]
        if len(unknown) < count // 2 or len(known) < count - count // 2:
            raise ValueError(f"{name}: not enough Unknown / True-False questions for {count}")
        chosen = rng.sample(known, count - count // 2) + rng.sample(unknown, count // 2)
        flags = [False] * (count - count // 2) + [True] * (count // 2)
    else:
        chosen = rng.sample(fitted, count)
        flags = [k % 2 == 1 for k in range(count)]  # every second question gets the sparse label
    rows = []
    for base, sparse in zip(chosen, flags):
        rows += items_for(name, base, sparse, rng, dseed, combined_option)
    return rows


def miscellany_items(name: str, bases: Sequence[Base], count: int, seed: int) -> list[dict[str, Any]]:
    """Disturbing miscellany (paper section 4): each question with its correct option and 1..9 wrong
    ones (nested: the N-option item keeps the wrong options of the smaller ones)."""
    dseed = ib_seed(seed, name + ":miscellany")
    rng = random.Random(dseed)
    usable = [b for b in bases if b.form == "single" and len(b.options) >= 10]
    if len(usable) < count:
        raise ValueError(f"{name}: {count} ten-option questions wanted for disturbing miscellany, found {len(usable)}")
    rows = []
    for base in rng.sample(usable, count):
        correct = base.options[base.true[0]]
        wrong = [o for i, o in enumerate(base.options) if i not in base.true]
        rng.shuffle(wrong)
        for n_wrong in range(1, 10):
            options = [correct] + wrong[:n_wrong]
            rng.shuffle(options)
            rows.append(_item(name, base, f"miscellany_{n_wrong + 1}", "tense", options,
                              [options.index(correct) + 1], None, dseed))
    return rows


# -- a stored dataset's rows and quality checks (the `ib_items` asset stores and reports them) -------

def stored_rows(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as `ib.items` holds them: options, gold and details as JSON text."""
    return [{**r, "options": json.dumps(r["options"]), "gold": json.dumps(r["gold"]),
             "extra": json.dumps(r["extra"], default=str)} for r in items]


def item_checks(name: str, spec: IBDataset, stored: Sequence[dict[str, Any]]) -> list[Check]:
    """The checks of one dataset's stored items: tense and sparse labels balanced among the
    complete items (the miscellany, and multiple choice without the combined option, which has
    no tense label, are exempt), and every gold option number among the item's options."""
    complete = Counter(r["label_type"] for r in stored if r["variant"] == "complete")
    bad_gold = [r["item_id"] for r in stored if json.loads(r["gold"]) != "none"
                and not all(1 <= g <= r["n_options"] for g in json.loads(r["gold"]))]
    balanced = (name == MISCELLANY or abs(complete["tense"] - complete["sparse"]) <= 1
                or (spec.form == "multiple" and not spec.combined_option and not complete["tense"]))
    return [Check("tense_sparse_balanced", balanced, {"complete_items": dict(complete)}),
            Check("gold_among_options", not bad_gold, {"bad": bad_gold})]

