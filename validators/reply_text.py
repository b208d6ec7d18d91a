"""A reply as text to read: the `Reading` every reader returns, the answer part split from the
thinking (`answer_part`), and the plain text of it (`plain`, `text_to_read`). Shared by the reading
ladder (`validators/read.py`) and MuSoBench's readers (`validators/muso_read.py`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# -- the reading and the reply's parts ---------------------------------------------------------

NONE = "none"  # the answer "no option is correct"
UNKNOWN = "Unknown"
LABELS = ("True", "False", "Unknown")
INT_MAX = 2**31 - 1  # numbers above this are read as out of range, never stored as integers


@dataclass(frozen=True)
class Reading:
    """What a reply answers (`answer`, None when it gives none), how that was read (`method`),
    and the text that decided it (`evidence`)."""

    answer: Any
    method: str
    evidence: str | None = None
    call_key: str | None = None  # the judge call that made this reading, when a judge did

    @property
    def decided(self) -> bool:
        return self.answer is not None


# s1.1 thinks after "<|im_start|>think" and answers after "<|im_start|>answer"; EXAONE-Deep closes with
# "</thought>"; some models close with "</reason>" (paper 002's authors split replies at each of these).
END_OF_THINKING = ("</think>", "</thinking>", "<|end_of_thought|>", "</thought>", "◁/think▷", "</reasoning>",
                   "<|/think|>", "</reason>", "</ reason>", "</ think>", "<|im_start|>answer")
OPEN_THINKING = re.compile(r"<think>|<thinking>|<\|begin_of_thought\|>|<thought>|◁think▷|<reasoning>|<reason>|"
                           r"<\|im_start\|>think", re.I)


def answer_part(reply: str | None, reasoning: str | None = None) -> tuple[str, str, bool]:
    """(thinking, answer text, finished): the reply split at its last end-of-thinking marker.
    `finished` is False when thinking was opened and never closed (a reply cut while thinking)."""
    text = reply or ""
    cut = max(((text.rfind(m), m) for m in END_OF_THINKING), key=lambda x: x[0])
    if cut[0] >= 0:
        thinking = OPEN_THINKING.sub("", text[:cut[0]]).strip()
        return ((reasoning or "") + "\n" + thinking).strip(), text[cut[0] + len(cut[1]):].strip(), True
    opened = OPEN_THINKING.search(text)
    if opened:
        return ((reasoning or "") + "\n" + text[opened.end():]).strip(), text[:opened.start()].strip(), False
    return (reasoning or "").strip(), text.strip(), True


_MARKDOWN = re.compile(r"\*\*|__|`+|^#+\s*|^>\s*|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)", re.M)
_LATEX_WRAP = re.compile(r"\\(?:text|textbf|mathrm|mathbf|operatorname)\s*\{([^{}]*)\}")


def plain(text: str) -> str:
    """Markdown emphasis, headers, code ticks and LaTeX text wrappers removed; `$` dropped."""
    latex = "\\" in text  # every LaTeX wrapper and escape starts with a backslash
    if latex:
        text = _LATEX_WRAP.sub(r"\1", text)
    text = text.replace("$", "")
    if latex:
        text = text.replace("\\(", "").replace("\\)", "").replace("\\[", "").replace("\\]", "")
        text = text.replace("\\{", "{").replace("\\}", "}")
    # each of `_MARKDOWN`'s marks holds one of these characters: a text without them has none to remove
    return _MARKDOWN.sub("", text) if any(c in text for c in "*_`#>") else text


def text_to_read(reply: str | None, reasoning: str | None = None) -> tuple[str | None, Reading | None]:
    """The plain answer text to read, or the reading when there is nothing to read."""
    if (reply is None or not reply.strip()) and not reasoning:
        return None, Reading(None, "empty")
    _, answer, finished = answer_part(reply, reasoning)
    if not answer:
        return None, Reading(None, "empty" if finished else "unfinished_thinking")
    return plain(answer), None
