"""Instruction Boundary's release: one configuration per dataset and the miscellany set (paper 003,
section 3), each question as its complete and its insufficient item."""

from __future__ import annotations

from typing import Any

from configuration import Config
from releases import Paper, Part, Release, labels, provenance, table_of
from warehouse import Warehouse

DESCRIPTION = ("Judging and choice items whose correct label is often the rare (sparse) one: Unknown, none of the "
               "options, all options false, or a combined option; each question also as an insufficient item with "
               "an option removed.")
TASK_CATEGORIES = ("multiple-choice", "question-answering")
PAPER = Paper(
    "Instruction Boundary: Quantifying Biases in LLM Reasoning under Various Coverage",
    "@article{ling2025instruction,\n  title={Instruction Boundary: Quantifying Biases in LLM Reasoning under Various "
    "Coverage},\n  author={Ling, Zipeng and Tang, Yuehao and Huang, Chen and Liu, Shuliang and Jiang, Gaoyang and Fu, "
    "Shenghong and Yang, Junqi and Wan, Yao and Zhang, Jiawan and Huang, Kejia and Hu, Xuming},\n  journal={arXiv "
    "preprint arXiv:2509.20278},\n  year={2025},\n  url={https://arxiv.org/abs/2509.20278}\n}",
    "section 3 and appendix A: the items and their sparse labels")
_SQL = """SELECT dataset, item_id, base_id, form, label_type, variant, options::VARCHAR AS options, gold::VARCHAR AS gold,
                 n_options, number_scheme, context, question, removed_option, origin, extra::VARCHAR AS extra,
                 dataset_seed, items_version, item_digest
          FROM ib.items WHERE dataset = ? ORDER BY item_id"""


def languages(cfg: Config, configs: list[str]) -> tuple[str, ...]:
    return ("en",)


def parts(cfg: Config, wh: Warehouse) -> list[Part]:
    from generators.ib import MISCELLANY

    out = []
    for name, spec in [*cfg.ib.datasets.items(), (MISCELLANY, cfg.ib.miscellany)]:
        t = table_of(wh, _SQL, [name])
        versions = ", ".join(sorted(set(t.column("items_version").to_pylist())))
        sources, lic = provenance(cfg, spec.source.kind if spec.source else "", spec.source,
                                  f"generators/ib.py, {spec.generator}", versions)
        out.append(Part(name, t, sources, lic, labels(t, "label_type")))
    return out


def tables_of(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Released rows back as `ib.items`, each checked to be an item: `options` a JSON list of
    `n_options` texts, `gold` a JSON list of option numbers among them, or "none" (ValueError naming
    the row and field otherwise: a release is refused, never loaded half-typed)."""
    import json

    for n, r in enumerate(rows, 1):
        try:
            options, gold = json.loads(r["options"]), json.loads(r["gold"])
        except (TypeError, KeyError, json.JSONDecodeError) as exc:
            raise ValueError(f"row {n}: options or gold is not JSON text ({exc})") from None
        if not (isinstance(options, list) and all(isinstance(o, str) for o in options)
                and len(options) == r.get("n_options")):
            raise ValueError(f"row {n}: field 'options' is not a list of n_options texts")
        if not (gold == "none" or (isinstance(gold, list) and gold and all(
                isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= len(options) for k in gold))):
            raise ValueError(f"row {n}: field 'gold' is {gold!r}; expected option numbers among 1..{len(options)} "
                             'or "none"')
    return {"ib.items": rows}


def construction(cfg: Config) -> str:
    return ("Per dataset, the configured count of base questions seeded by (seed, dataset), each as a complete item "
            "and an insufficient one (an option removed, appendix A.3); the miscellany set's questions with one "
            "correct option and 1 to 9 wrong ones. `gold` holds the correct option numbers, or \"none\".")


def limits(cfg: Config) -> list[str]:
    out = ["The paper's prompt templates are not in its text; the prompts the project asks are its own (they are "
           "not part of the items)."]
    kinds = {d.source.kind for d in (*cfg.ib.datasets.values(), cfg.ib.miscellany) if d.source is not None}
    if "multirc" in kinds and "multirc" not in cfg.release.source_licenses:
        out.append("MultiRC has no standard licence (SuperGLUE's card: research use): name the one you release it "
                   "under in release.source_licenses.multirc.")
    return out


# what the cross-family code reads (configuration/families.py: Parts.release)
RELEASE = Release(DESCRIPTION, TASK_CATEGORIES, PAPER, parts, tables_of, languages, construction, limits)
