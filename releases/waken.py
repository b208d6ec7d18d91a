"""WakenLLM's release: one configuration per dataset (paper 000, section 2), half solvable, half Unknown."""

from __future__ import annotations

from typing import Any

from configuration import Config
from releases import Paper, Part, Release, labels, provenance, table_of
from warehouse import Warehouse

DESCRIPTION = ("Logical-reasoning items (FLD-style proofs, FOLIO, ScienceQA) with True / False / Unknown labels, "
               "half solvable and half unsolvable (Unknown), for measuring vague perception.")
TASK_CATEGORIES = ("question-answering", "text-classification")
PAPER = Paper(
    "Awakening LLMs' Reasoning Potential: A Fine-Grained Pipeline to Evaluate and Mitigate Vague Perception",
    "@article{ling2025awakening,\n  title={Awakening LLMs' Reasoning Potential: A Fine-Grained Pipeline to Evaluate and "
    "Mitigate Vague Perception},\n  author={Ling, Zipeng and Tang, Yuehao and Liu, Shuliang and Yang, Junqi and Fu, "
    "Shenghong and Huang, Chen and Huang, Kejia and Wan, Yao and Hou, Zhichao and Hu, Xuming},\n  journal={arXiv "
    "preprint arXiv:2507.16199},\n  year={2025},\n  url={https://arxiv.org/abs/2507.16199}\n}",
    "section 2 and appendix C: the datasets and their Unknown halves")
_SQL = """SELECT dataset, item_id, kind, form, sample_type, label, original_label, verified_label, context, question,
                 origin, extra::VARCHAR AS extra, dataset_seed, items_version, item_digest
          FROM waken.items WHERE dataset = ? ORDER BY item_id"""


def languages(cfg: Config, configs: list[str]) -> tuple[str, ...]:
    return ("en",)


def parts(cfg: Config, wh: Warehouse) -> list[Part]:
    out = []
    for name, spec in cfg.waken.datasets.items():
        t = table_of(wh, _SQL, [name])
        versions = ", ".join(sorted(set(t.column("items_version").to_pylist())))
        sources, lic = provenance(cfg, spec.kind, spec.source, "generators/fld.py", versions)
        out.append(Part(name, t, sources, lic, labels(t, "label")))
    return out


def tables_of(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {"waken.items": rows}


def construction(cfg: Config) -> str:
    return ("Per dataset, the configured count of items, half solvable (True / False) and half unsolvable (Unknown), "
            "seeded by (seed, dataset): FLD-style items from the offline proof-tree generator, or source rows made "
            "Unknown by deleting the sentences a proof needs (appendix C); FOLIO labels re-proved from its FOL with z3 "
            "(`verified_label`).")


def limits(cfg: Config) -> list[str]:
    return ["Items loaded from a source keep that source's licence and errors; the Unknown halves are made here.",
            "`extra` holds the construction's details (depth, distractors, source ids) as JSON text."]


# what the cross-family code reads (configuration/families.py: Parts.release)
RELEASE = Release(DESCRIPTION, TASK_CATEGORIES, PAPER, parts, tables_of, languages, construction, limits)
