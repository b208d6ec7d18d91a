"""S1-Bench candidates (paper 002, section 2.1-2.2): the subcategory registry, programmatic
generators with exactly computed answers, and LLM generation / difficulty reduction prompts.

Programmatic candidates (ten reasoning and instruction-following subcategories, and two
knowledge subcategories drawn from small fact tables) carry a `check` that
`validators.s1_read.check_answer` applies: `exact` (the reply contains one of the answers as a
whole token, the judge's criterion in table 18; case-sensitive for capitalisation tasks),
`yes_no`, `symbol` (a chemical symbol standing alone) or `pattern` (for "output a three-digit
number"-style questions). Their answers are known by construction; no model output is ever
executed.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from configuration import Config

REGISTRY_PATH = Path(__file__).with_name("s1_subcategories.yaml")
LANGUAGES = ("en", "zh")


@dataclass(frozen=True)
class Subcategory:
    name: str
    category: str
    definition: dict[str, str]
    example: dict[str, str]


@dataclass(frozen=True)
class Registry:
    general_criteria: dict[str, str]
    categories: dict[str, dict[str, Any]]  # key -> {name: {en, zh}, criteria: {en, zh}}
    subcategories: dict[str, Subcategory]

    def criteria(self, sub: str, lang: str) -> str:
        """What the prompts call the "Specific Simplicity Criteria": the main category's own (paper 002,
        table 17's note: the simplicity requirements specific to the main category). The general
        criteria (section 2.1.1) are not among them: the generation prompt states them as its numbered
        conditions."""
        return self.categories[self.subcategories[sub].category]["criteria"][lang]


def built_subcategories(cfg: Config, reg: Registry) -> list[str]:
    """The subcategories a configuration builds: `demo_subcategories` at demo scale, else
    `subcategories` (null: every one of the registry's). A name the registry lacks is refused."""
    s = cfg.s1
    subs = s.demo_subcategories if cfg.scale == "demo" else (s.subcategories or list(reg.subcategories))
    unknown = [x for x in subs if x not in reg.subcategories]
    if unknown:
        raise ValueError(f"{cfg.source}: s1 subcategories {unknown} are not in the registry {sorted(reg.subcategories)}")
    return list(subs)


def load_registry(path: str | Path | None = None) -> Registry:
    """The registry file (default: generators/s1_subcategories.yaml); every entry needs a
    definition and an example pair in both languages."""
    p = Path(path) if path else REGISTRY_PATH
    data = yaml.safe_load(p.read_text(encoding="utf-8"))
    subs: dict[str, Subcategory] = {}
    cats: dict[str, dict[str, Any]] = {}
    for key, cat in data["categories"].items():
        cats[key] = {"name": cat["name"], "criteria": cat["criteria"]}
        for name, entry in cat["subcategories"].items():
            for lang in LANGUAGES:
                if not entry.get("definition", {}).get(lang):
                    raise ValueError(f"{p}: {key} / {name}: definition.{lang} is missing")
                for part in (f"question_{lang}", f"answer_{lang}"):
                    if not entry.get("example", {}).get(part):
                        raise ValueError(f"{p}: {key} / {name}: example.{part} is missing")
            subs[name] = Subcategory(name, key, entry["definition"], entry["example"])
    return Registry(data["general_criteria"], cats, subs)


@dataclass
class Candidate:
    subcategory: str
    language: str
    question: str
    answer: str
    check: dict[str, Any] | None  # None: only a judge can decide
    origin: str  # 'programmatic:<name>' or 'llm:<model>'
    extra: dict[str, Any] = field(default_factory=dict)


# -- programmatic generators -------------------------------------------------------------------

NUM_ZH = {2: "两", 3: "三", 4: "四", 5: "五", 6: "六", 7: "七"}
NUM_EN = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}
WORDS = ["apple", "banana", "letter", "coffee", "puppy", "balloon", "mirror", "pepper", "bottle", "summer"]


def _exact(*answers: Any) -> dict[str, Any]:
    return {"type": "exact", "answers": [str(a) for a in answers]}


def numerical(rng: random.Random, lang: str) -> Candidate:
    a, b = rng.randint(2, 30), rng.randint(2, 30)
    q = f"What is {a} plus {b}?" if lang == "en" else f"{a}加{b}等于多少？"
    return Candidate("numerical reasoning", lang, q, str(a + b), _exact(a + b), "programmatic:numerical")


def temporal(rng: random.Random, lang: str) -> Candidate:
    m = rng.randint(2, 9)
    q = f"How many seconds are in {m} minutes?" if lang == "en" else f"{m}分钟是多少秒？"
    return Candidate("temporal reasoning", lang, q, str(60 * m), _exact(60 * m), "programmatic:temporal")


def units(rng: random.Random, lang: str) -> Candidate:
    m = rng.randint(2, 9)
    q = f"How many centimeters are in {m} meters?" if lang == "en" else f"{m}米等于多少厘米？"
    return Candidate("measurement units", lang, q, str(100 * m), _exact(100 * m), "programmatic:units")


def counting(rng: random.Random, lang: str) -> Candidate:
    word = rng.choice(WORDS)
    letter = rng.choice(sorted(set(word)))
    n = word.count(letter)
    q = (f'How many times does the letter "{letter}" appear in the word "{word}"?' if lang == "en"
         else f'字母"{letter}"在单词"{word}"中出现了几次？')
    return Candidate("counting constraints", lang, q, str(n), _exact(n), "programmatic:counting")


def repetition(rng: random.Random, lang: str) -> Candidate:
    ch, n = rng.choice("xyzk"), rng.randint(2, 5)
    q = (f'Output the letter "{ch}" {NUM_EN[n]} times with no separators.' if lang == "en"
         else f'不加分隔符，连续输出{NUM_ZH[n]}次字母"{ch}"。')
    return Candidate("repetition constraints", lang, q, ch * n, _exact(ch * n), "programmatic:repetition")


def transformation(rng: random.Random, lang: str) -> Candidate:
    word = rng.choice(WORDS)
    q = f'Write the word "{word}" in capital letters.' if lang == "en" else f'把单词"{word}"写成大写字母。'
    # case matters: the task is the capitalisation ("pepper" does not answer PEPPER)
    return Candidate("transformation constraints", lang, q, word.upper(),
                     {**_exact(word.upper()), "case_sensitive": True}, "programmatic:transformation")


def length(rng: random.Random, lang: str) -> Candidate:
    n = rng.randint(2, 5)
    q = f"Output a {NUM_EN[n]}-digit number." if lang == "en" else f"输出一个{NUM_ZH[n]}位数。"
    example = str(10 ** (n - 1) + rng.randint(0, 8 * 10 ** (n - 1)))
    a = f"any {n}-digit number (e.g. {example})" if lang == "en" else f"任意{NUM_ZH[n]}位数（例如 {example}）"
    return Candidate("length constraints", lang, q, a,
                     {"type": "pattern", "regex": rf"(?<!\d)[1-9]\d{{{n - 1}}}(?!\d)"}, "programmatic:length")


def character(rng: random.Random, lang: str) -> Candidate:
    d = rng.randint(1, 9)
    q = f"Output a number that begins with {d}." if lang == "en" else f"输出一个以{d}开头的数字。"
    a = f"any number beginning with {d} (e.g. {d}7)" if lang == "en" else f"任意以{d}开头的数字（例如 {d}7）"
    return Candidate("character constraints", lang, q, a,
                     {"type": "pattern", "regex": rf"(?<!\d){d}\d*(?!\d)"}, "programmatic:character")


SETS = [("cats", "animals", "Tom", "猫", "动物"), ("roses", "flowers", "this plant", "玫瑰", "花"),
        ("squares", "shapes", "this figure", "正方形", "图形"), ("apples", "fruits", "this snack", "苹果", "水果")]


def set_membership(rng: random.Random, lang: str) -> Candidate:
    a, b, x, a_zh, b_zh = rng.choice(SETS)
    if lang == "en":
        q = f"All {a} are {b}. {x[0].upper() + x[1:]} is one of the {a}. Is {x} one of the {b}?"
        return Candidate("set reasoning", lang, q, "Yes", {"type": "yes_no", "answer": "yes"}, "programmatic:set")
    q = f"所有{a_zh}都是{b_zh}。这是一只{a_zh}。它是{b_zh}吗？"
    return Candidate("set reasoning", lang, q, "是", {"type": "yes_no", "answer": "是"}, "programmatic:set")


def code(rng: random.Random, lang: str) -> Candidate:
    word = rng.choice(WORDS)
    snippet = f'word = "{word}"\nprint(len(word))'
    q = (f"What does this Python 3 code print?\n{snippet}" if lang == "en"
         else f"这段 Python 3 代码输出什么？\n{snippet}")
    return Candidate("code reasoning", lang, q, str(len(word)), _exact(len(word)), "programmatic:code")


ELEMENTS = [("oxygen", "氧", "O"), ("hydrogen", "氢", "H"), ("carbon", "碳", "C"), ("nitrogen", "氮", "N"),
            ("helium", "氦", "He"), ("sodium", "钠", "Na"), ("iron", "铁", "Fe"), ("gold", "金", "Au")]
WORKS = [("Hamlet", "《哈姆雷特》", "Shakespeare", "莎士比亚"), ("Romeo and Juliet", "《罗密欧与朱丽叶》", "Shakespeare", "莎士比亚"),
         ("Don Quixote", "《堂吉诃德》", "Cervantes", "塞万提斯"), ("The Odyssey", "《奥德赛》", "Homer", "荷马")]


def chemical_symbol(rng: random.Random, lang: str) -> Candidate:
    name, name_zh, symbol = rng.choice(ELEMENTS)
    q = f"What is the chemical symbol for {name}?" if lang == "en" else f"{name_zh}的化学符号是什么？"
    # the symbol standing alone, case-sensitive: not the O of "Oxygen", not the H of "H2O"
    return Candidate("scientific notation", lang, q, symbol, {"type": "symbol", "symbol": symbol},
                     "programmatic:chemical_symbol")


def authorship(rng: random.Random, lang: str) -> Candidate:
    work, work_zh, author, author_zh = rng.choice(WORKS)
    q = f"Who is the author of {work}?" if lang == "en" else f"{work_zh}的作者是谁？"
    return Candidate("creative authorship", lang, q, author if lang == "en" else author_zh,
                     _exact(author, author_zh), "programmatic:authorship")


PROGRAMMATIC: dict[str, Callable[[random.Random, str], Candidate]] = {
    "scientific notation": chemical_symbol, "creative authorship": authorship,
    "numerical reasoning": numerical, "temporal reasoning": temporal, "measurement units": units,
    "counting constraints": counting, "repetition constraints": repetition,
    "transformation constraints": transformation, "length constraints": length,
    "character constraints": character, "set reasoning": set_membership, "code reasoning": code,
}


# -- LLM generation and difficulty reduction (paper table 17) ------------------------------------

GENERATION_PROMPT = (
    "Generate {n} pairs of questions and answers in both Chinese and English based on the category's name, "
    "definition, and specific simplicity criteria. The following conditions must be satisfied:\n"
    "1. Questions must be naturally and clearly expressed, unambiguous, and free of intentional traps.\n"
    "2. Answers must be unique or easily falsifiable, with no possibility of multiple correct answers.\n"
    "3. Make the questions as diverse as possible.\n\n"
    "# Category Name and Definition:\n{name}: {definition}\n\n# Specific Simplicity Criteria:\n{criteria}\n\n"
    "# Cases:\n## English question:\n{question_en}\n## English Answer:\n{answer_en}\n"
    "## Chinese question:\n{question_zh}\n## Chinese Answer:\n{answer_zh}\n\n"
    "Please generate {n} pairs of Chinese and English questions and answers in the following format: "
    "[question]English-question[answer]English-answer[question]Chinese-question[answer]Chinese-answer...\n\n"
    "Start generating:"
)
REDUCTION_PROMPT = (
    "Given a question and answer that are too complex for the model to answer correctly, you need to further "
    "reduce their difficulty while trying to:\n- Ensure the question aligns with the Category Name and Definition.\n"
    "- Ensure the question meets the Specific Simplicity Criteria.\n\n"
    "# Category Name and Definition:\n{name}: {definition}\n\n# Specific Simplicity Criteria:\n{criteria}\n\n"
    "# Question and Answer:\n[question]{question}[answer]{answer}\n\n"
    "The new question and answer, in the format [question]...[answer]...:"
)


def generation_prompt(reg: Registry, sub: str, n: int) -> str:
    s = reg.subcategories[sub]
    return GENERATION_PROMPT.format(n=n, name=sub, definition=s.definition["en"], criteria=reg.criteria(sub, "en"),
                                    **s.example)


def reduction_prompt(reg: Registry, c: Candidate) -> str:
    s = reg.subcategories[c.subcategory]
    return REDUCTION_PROMPT.format(name=c.subcategory, definition=s.definition[c.language],
                                   criteria=reg.criteria(c.subcategory, c.language), question=c.question, answer=c.answer)


_MARK = re.compile(r"\[\s*(question|answer|问题|答案)\s*\]\s*[:：]?", re.I)


def parse_pairs(text: str | None) -> list[tuple[str, str, str]]:
    """(language, question, answer) triples from `[question]...[answer]...` text. Tolerates line
    breaks, colons after markers, Chinese markers and stray text; a question without an answer
    (or the reverse) is dropped. The language is zh when the question contains Chinese characters."""
    if not text:
        return []
    pieces = _MARK.split(text)
    out: list[tuple[str, str, str]] = []
    pending: str | None = None
    for k in range(1, len(pieces) - 1, 2):
        kind = pieces[k].lower()
        value = pieces[k + 1].strip().strip("…").strip()
        value = re.sub(r"\s*\n\s*\d+[.)]\s*$", "", value).strip()  # a numbering left before the next marker
        if kind in ("question", "问题"):
            pending = value or None
        elif pending is not None and value:
            lang = "zh" if re.search(r"[\u4e00-\u9fff]", pending) else "en"
            out.append((lang, pending, value))
            pending = None
    return out


# -- the released benchmark as a source ------------------------------------------------------------

RELEASE_ORIGIN = "release"
# The release's category names (`reasoning_question`, `analysis_questions`, `knowledge_question`,
# `instruction_following`: as spelled on the authors' dataset card) and the paper's short forms
# (Table 4: RSN, KNO, IF, ANA), after `_label_key`.
_CATEGORIES = {"reasoning": "reasoning", "rsn": "reasoning", "knowledge": "knowledge", "kno": "knowledge",
               "instruction following": "instruction following", "if": "instruction following",
               "analysis": "analysis", "ana": "analysis"}
_HAN = re.compile(r"[\u4e00-\u9fff]")


def _label_key(raw: Any) -> str:
    """A category or subcategory name as the registry spells it: `analysis_questions` -> `analysis`,
    `numerical_reasoning` -> `numerical reasoning`, `Instruction-Following` -> `instruction following`."""
    key = re.sub(r"[\s_\-]+", " ", str(raw)).strip().lower()
    return re.sub(r" questions?$", "", key)


def load_release(path: str | Path, registry: Registry | None = None) -> list[dict[str, Any]]:
    """The items of a released S1-Bench file, as `s1.items` rows: the authors' `S1-Bench.json`, a JSON
    list of `{ID, question, answer, language, category, sub_category}` (their dataset card; their
    evaluation scripts read `ID`, `question` and `answer`). The authors' label names are mapped to the
    registry's (`reasoning_question` -> `reasoning`, `numerical_reasoning` -> `numerical reasoning`;
    `subcategory` is read too). Every item must carry a category and subcategory the registry knows,
    and they must agree: an unknown, missing or contradictory label is an error naming the item and
    the field, never a silent `unlabelled` (a missing category is taken from the subcategory). The
    language is kept as the file gives it (`en`, `zh`; one released item is marked `en` though its
    question is Chinese, and the paper counts it as marked), else told by the question's script.
    Answers have no exact check: the judge grades them against the reference answer, as the authors'
    GPT-4o evaluator does. Bad input names the file, item and field."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{p}: S1-Bench release file not found") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    if not isinstance(data, list):
        raise ValueError(f"{p}: expected a JSON list of items, got {type(data).__name__}")
    subs = (registry or load_registry()).subcategories
    rows, seen = [], set()
    for k, item in enumerate(data):
        where = f"{p}: item {k}"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected an object, got {type(item).__name__}")
        for name in ("ID", "question", "answer"):
            if name not in item or item[name] in (None, ""):
                raise ValueError(f"{where}: field {name!r} is missing or empty")
        if not isinstance(item["question"], str):
            raise ValueError(f"{where}: field 'question' must be text")
        where = f"{p}: item {k} (ID {item['ID']!r})"
        item_id = f"{RELEASE_ORIGIN}-{item['ID']}"
        if item_id in seen:
            raise ValueError(f"{where}: ID {item['ID']!r} appears twice")
        seen.add(item_id)
        sub, category = _release_labels(item, subs, where)
        language = str(item.get("language") or "").strip().lower()
        language = {"english": "en", "chinese": "zh", "中文": "zh"}.get(language, language)
        if not language:
            language = "zh" if _HAN.search(item["question"]) else "en"
        elif language not in LANGUAGES:
            raise ValueError(f"{where}: field 'language' is {item['language']!r}; expected one of {', '.join(LANGUAGES)}")
        rows.append({"item_id": item_id, "root_candidate": item_id, "rounds_taken": 0,
                     "subcategory": sub, "category": category, "language": language,
                     "question": item["question"], "answer": str(item["answer"]), "check_spec": json.dumps(None),
                     "origin": f"{RELEASE_ORIGIN}:{p.name}"})
    return rows


def _release_labels(item: dict[str, Any], subs: dict[str, Subcategory], where: str) -> tuple[str, str]:
    """(subcategory, category) of one released item, in the registry's names; errors name the field."""
    field = next((f for f in ("sub_category", "subcategory", "sub-category") if f in item), None)
    if field is None or item[field] in (None, ""):
        raise ValueError(f"{where}: field 'sub_category' is missing or empty")
    sub = _label_key(item[field])
    if sub not in subs:
        raise ValueError(f"{where}: field {field!r} is {item[field]!r}, which names no subcategory of the registry "
                         "(generators/s1_subcategories.yaml; paper 002, tables 15-16)")
    raw = item.get("category")
    if raw in (None, ""):
        return sub, subs[sub].category
    category = _CATEGORIES.get(_label_key(raw))
    if category is None:
        raise ValueError(f"{where}: field 'category' is {raw!r}; expected one of reasoning_question, knowledge_question, "
                         "instruction_following, analysis_question (or RSN, KNO, IF, ANA)")
    if category != subs[sub].category:
        raise ValueError(f"{where}: field 'category' is {raw!r} but subcategory {sub!r} belongs to {subs[sub].category!r}")
    return sub, category


def left_out_at_demo(cfg: Config) -> list[str]:
    """The configured subcategories the demo scale does not build (it builds `demo_subcategories`)."""
    others = [x for x in (cfg.s1.subcategories or []) if x not in cfg.s1.demo_subcategories]
    if not others:
        return []
    return [f"S1-Bench: subcategories {', '.join(others)} not built (demo scale builds "
            f"s1.demo_subcategories: {', '.join(cfg.s1.demo_subcategories)})"]

