"""The readers and loaders measured on real files and replies that no one on this project wrote.

Each argument is a path to a file of the real-data kit (`../shared/real-kit/`, never copied into the
project; its README says what each holds). Prints, for each file given:

- MMLU-Pro replies (`--mmlu-pro mmlu_pro_replies.jsonl`): the agreement of the single-choice reader
  (`validators.read.read_options`, letters by position, no judge) with the letter MMLU-Pro's own
  extractor took (`their_pred`), over the replies where it took one; and the replies where it took
  none but the project reads an answer (each listed with the text that decided it). A `their_pred`
  that none of MMLU-Pro's three extraction patterns gives from the reply (its evaluation script fills
  a failed extraction with a random letter) is no extraction: such rows are counted and the
  agreement is printed with and without them;
- an S1-Bench release (`--s1-release s1bench_release_examples.json`): every item loaded by
  `generators.s1.load_release` with its fields kept (ID, question, answer, language, category and
  subcategory mapped to the registry's names), or the loader's error;
- ScienceQA's `problems.json` (`--scienceqa scienceqa_problems_150.json`): per topic of WakenLLM's
  four, the text-only rows, the rows with a context of their own (hint or passage), and the Unknown
  drafts the build would make (`generators.waken.deletion`, lecture shown as `lecture: true` shows
  it): those that cut the item's own context against those that would cut only lecture text, and
  the rows that allow no draft, by reason.

    python benchmarks/real_data.py --mmlu-pro ../shared/real-kit/mmlu_pro_replies.jsonl \\
        --s1-release ../shared/real-kit/s1bench_release_examples.json \\
        --scienceqa ../shared/real-kit/scienceqa_problems_150.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validators.read import read_options  # noqa: E402

LETTERS = "ABCDEFGHIJ"


def mmlu_pro_extraction(text: str) -> str | None:
    """MMLU-Pro's extraction as its evaluation code describes it: 'answer is (X)' first, then the last
    'Answer: X', then the last capital letter A-J standing alone; None when all three fail."""
    m = re.search(r"answer is \(?([A-J])\)?", text)
    if m:
        return m.group(1)
    m = re.search(r".*[aA]nswer:\s*([A-J])", text)
    if m:
        return m.group(1)
    m = re.search(r"\b[A-J]\b(?!.*\b[A-J]\b)", text, re.DOTALL)
    return m.group(0) if m else None


def mmlu_pro(path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    agree = total = 0
    fills: list[int] = []
    disagree: list[str] = []
    invented: list[str] = []
    for k, row in enumerate(rows):
        got = read_options(row["reply"], int(row["n_options"]), single=True)
        answer = got.answer
        letter = LETTERS[next(iter(answer)) - 1] if isinstance(answer, frozenset) and len(answer) == 1 else answer
        theirs = row["their_pred"]
        if theirs is None:
            if got.decided:
                invented.append(f"  row {k} (question {row['question_id']}): read {letter} by {got.method} from "
                                f"{(got.evidence or '')[:90]!r}")
            continue
        if mmlu_pro_extraction(row["reply"]) is None or not any(
                re.search(p, row["reply"], f) for p, f in ((rf"answer is \(?{theirs}\)?", 0),
                                                           (rf"[aA]nswer:\s*{theirs}", 0),
                                                           (rf"\b{theirs}\b", 0))):
            fills.append(k)  # their letter is nowhere in the reply as any of their patterns reads it
        total += 1
        if letter == theirs:
            agree += 1
        else:
            disagree.append(f"  row {k} (question {row['question_id']}): theirs {theirs}, ours {letter} "
                            f"({got.method}{': ' + repr((got.evidence or '')[:70]) if got.evidence else ''})")
    fill_agree = sum(1 for k in fills if _letter(rows[k]) == rows[k]["their_pred"])
    print(f"MMLU-Pro replies ({path.name}, {len(rows)} rows)")
    print(f"  agreement with MMLU-Pro's extraction where it found a letter: {agree}/{total} = {agree / total:.3f}")
    if fills:
        print(f"  of those, {len(fills)} letter(s) no extraction pattern gives from the reply (a random fill): "
              f"rows {fills}; without them: {agree - fill_agree}/{total - len(fills)} = "
              f"{(agree - fill_agree) / (total - len(fills)):.3f}")
    print(f"  replies where MMLU-Pro found no letter and the project reads one: {len(invented)}")
    for line in invented:
        print(line)
    print("  disagreements:")
    for line in disagree:
        print(line)


def _letter(row: dict) -> str | None:
    answer = read_options(row["reply"], int(row["n_options"]), single=True).answer
    return LETTERS[next(iter(answer)) - 1] if isinstance(answer, frozenset) and len(answer) == 1 else None


def s1_release(path: Path) -> None:
    from generators.s1 import load_release

    raw = json.loads(path.read_text(encoding="utf-8"))
    print(f"S1-Bench release ({path.name}, {len(raw)} items)")
    try:
        rows = load_release(path)
    except ValueError as exc:
        print(f"  refused: {exc}")
        return
    kept = 0
    for item, row in zip(raw, rows):
        whole = (row["item_id"] == f"release-{item['ID']}" and row["question"] == item["question"]
                 and row["answer"] == str(item["answer"]) and row["language"] == item.get("language", row["language"])
                 and "unlabelled" not in (row["category"], row["subcategory"]))
        kept += whole
        print(f"  ID {item['ID']}: {item.get('category')!r} -> {row['category']!r}, "
              f"{item.get('sub_category', item.get('subcategory'))!r} -> {row['subcategory']!r}, "
              f"language {row['language']}{'' if whole else '  (a field lost)'}")
    print(f"  items with every field kept and labels mapped: {kept}/{len(raw)}")


def scienceqa(path: Path) -> None:
    from configuration import SourceSpec
    from generators.sources import load_configured
    from generators.waken import NO_OWN_CONTEXT, _sentences, deletion, study_parts, supporting_sentences

    topics = ["physics", "biology", "writing-strategies", "figurative-language"]
    records = load_configured("scienceqa", SourceSpec(path=str(path), split="all"), topics)
    print(f"ScienceQA ({path.name}): {len(records)} text-only rows of the four topics (split: all, lecture shown)")
    print("  drafts: the Unknown drafts the build makes; each deleted sentence is found in the row's own context"
          " (hint or passage) or in its lecture.")
    print("  before: the earlier rule, two sentences deleted from the hint and lecture joined, for contrast.")
    print(f"  {'topic':<21}{'rows':>5}{'own ctx':>8}{'drafts':>7}{'cut own':>8}{'only lecture':>13}"
          f"{'before: drafts':>15}{'cut own':>8}{'only lecture':>13}   no draft, by reason")
    for topic in topics:
        rows = [r for r in records if r.topic == topic]
        own_rows, now, before = 0, Counter(), Counter()
        reasons: Counter[str] = Counter()
        for r in rows:
            own, lecture, question = study_parts(r, with_lecture=True)
            answer = r.choices[r.answer_index or 0]
            own_rows += bool(own)
            made = deletion(own, question, answer, lecture)
            if isinstance(made, str):
                reasons["no context of its own" if made == NO_OWN_CONTEXT else
                        "the answer stays in the text" if "still in the text" in made else "nothing left"] += 1
            else:
                now[_where(made[1], own, lecture)] += 1
            joined = " ".join(x for x in (own, lecture) if x)
            sentences = _sentences(joined)
            if len(sentences) >= 3:
                drop = supporting_sentences(joined, question, answer)[:2]
                before[_where([sentences[i] for i in drop], own, lecture)] += 1
        print(f"  {topic:<21}{len(rows):>5}{own_rows:>8}{sum(now.values()):>7}{now['own']:>8}{now['lecture']:>13}"
              f"{sum(before.values()):>15}{before['own']:>8}{before['lecture']:>13}   "
              + (", ".join(f"{k}: {v}" for k, v in reasons.most_common()) or "-"))
    print("  every draft then goes to the judge twice (the cut context; the question and options alone) and is kept"
          " only when neither gives a unique answer")


def _where(deleted: list[str], own: str, lecture: str) -> str:
    """'own' when a deleted sentence is the row's own context, 'lecture' when all are lecture text."""
    return "own" if any(d in own for d in deleted) else "lecture"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mmlu-pro", type=Path, help="the kit's mmlu_pro_replies.jsonl")
    p.add_argument("--s1-release", type=Path, help="the kit's s1bench_release_examples.json")
    p.add_argument("--scienceqa", type=Path, help="the kit's scienceqa_problems_150.json (problems.json layout)")
    args = p.parse_args(argv)
    if not (args.mmlu_pro or args.s1_release or args.scienceqa):
        p.error("give at least one file of the real-data kit")
    for fn, path in ((mmlu_pro, args.mmlu_pro), (s1_release, args.s1_release), (scienceqa, args.scienceqa)):
        if path is not None:
            fn(path)
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
