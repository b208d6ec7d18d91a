"""Judge-model checks of items that cannot be checked exactly."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from llm_calls import CallRequest, Ledger

NO_UNIQUE_ANSWER = (
    "Here is a context, a question and its options.\n\nContext:\n{context}\n\nQuestion: {question}\nOptions:\n"
    "{options}\n\nDoes the context give enough information to choose exactly one option? Output only Yes or No."
)


def unknown_verifier(ledger: Ledger, judge: str) -> Callable[[list[dict[str, Any]]], list[tuple[bool, str]]]:
    """A verifier for WakenLLM's relabelled ScienceQA items (paper appendix C): the judge must say
    that the modified context no longer determines one option ("No"). "Yes", no answer, or a
    failed call rejects the item (it is then replaced from the pool)."""

    def verify(drafts: list[dict[str, Any]]) -> list[tuple[bool, str]]:
        prompts = []
        for d in drafts:
            options = "\n".join(f"({chr(65 + k)}) {c}" for k, c in enumerate(d["extra"]["choices"]))
            prompts.append(NO_UNIQUE_ANSWER.format(context=d["context"] or "(none)", question=d["question"],
                                                   options=options))
        results = ledger.complete(judge, [CallRequest([{"role": "user", "content": p}],
                                                      {"temperature": 0.0, "max_tokens": 8}) for p in prompts],
                                  purpose="waken.unknown_verification")
        out = []
        for r in results:
            if not r.ok:
                out.append((False, f"judge call failed: {r.error}"))
                continue
            m = re.search(r"\b(yes|no)\b", r.text or "", re.I)
            verdict = m.group(1).lower() if m else None
            out.append((verdict == "no", f"judge {r.key[:12]}: {(r.text or '').strip()[:80]!r}"))
        return out

    return verify
