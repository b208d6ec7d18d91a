"""Set-valued scoring and calibration, shared by every family that needs them.

Formulas from MuSoBench (paper 001, appendix A.2). Edge cases, decided here once:

- precision of an empty answer set is 0.0: a reply with no solution recovers
  nothing, and leaving it undefined would let silence escape the precision and
  the precision-ECE (sklearn's `zero_division=0` convention);
- retention is undefined (None) when the first answer had no correct solution,
  correction is undefined when it had no wrong one; undefined values are left
  out of means, and the number of defined instances is reported beside them;
- ECE uses M = 10 equal-width confidence bins on [0, 1], the last closed
  ([0.9, 1.0]); N is the number of instances with a confidence.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

AnswerSet = set[Hashable]


def precision(pred: AnswerSet, truth: AnswerSet) -> float:
    """|Y ∩ Ŷ| / |Y| (A.2); 0.0 for an empty Y."""
    return len(pred & truth) / len(pred) if pred else 0.0


def recall(pred: AnswerSet, truth: AnswerSet) -> float:
    """|Y ∩ Ŷ| / |Ŷ| (A.2). Ŷ is never empty in MuSoBench."""
    if not truth:
        raise ValueError("recall needs a non-empty ground-truth set")
    return len(pred & truth) / len(truth)


def retention(first: AnswerSet, second: AnswerSet, truth: AnswerSet) -> float | None:
    """|(Y1 ∩ Ŷ) ∩ (Y2 ∩ Ŷ)| / |Y1 ∩ Ŷ| (A.2, CSR); None when Y1 has no correct answer."""
    kept = first & truth
    return len(kept & second) / len(kept) if kept else None


def correction(first: AnswerSet, second: AnswerSet, truth: AnswerSet) -> float | None:
    """1 - |(Y1 \\ Ŷ) ∩ (Y2 \\ Ŷ)| / |Y1 \\ Ŷ| (A.2, ESC); None when Y1 has no wrong answer."""
    wrong = first - truth
    return 1 - len(wrong & (second - truth)) / len(wrong) if wrong else None


def discovery(first: AnswerSet, second: AnswerSet, truth: AnswerSet) -> float:
    """|(Y2 ∩ Ŷ) \\ Y1| / |Ŷ| (A.2, NSD)."""
    return len((second & truth) - first) / len(truth)


@dataclass(frozen=True)
class ReliabilityBin:
    lo: float
    hi: float
    count: int
    mean_confidence: float | None
    mean_score: float | None


def reliability_bins(confidences: Sequence[float], scores: Sequence[float], n_bins: int = 10) -> list[ReliabilityBin]:
    """Equal-width bins of confidence (0-1) with each bin's mean confidence and mean score."""
    if len(confidences) != len(scores):
        raise ValueError("confidences and scores differ in length")
    members: list[list[int]] = [[] for _ in range(n_bins)]
    for i, c in enumerate(confidences):
        if not 0.0 <= c <= 1.0:
            raise ValueError(f"confidence {c} outside [0, 1]")
        members[min(int(c * n_bins), n_bins - 1)].append(i)
    out = []
    for m, idx in enumerate(members):
        out.append(ReliabilityBin(
            lo=m / n_bins, hi=(m + 1) / n_bins, count=len(idx),
            mean_confidence=sum(confidences[i] for i in idx) / len(idx) if idx else None,
            mean_score=sum(scores[i] for i in idx) / len(idx) if idx else None,
        ))
    return out


def ece(confidences: Sequence[float], scores: Sequence[float], n_bins: int = 10) -> float | None:
    """Σ_m |B_m|/N · |score(B_m) − conf(B_m)| (A.2), confidences and scores in [0, 1]; None if N = 0."""
    if not confidences:
        return None
    n = len(confidences)
    return sum(
        b.count / n * abs(b.mean_score - b.mean_confidence)  # type: ignore[operator]
        for b in reliability_bins(confidences, scores, n_bins) if b.count
    )


def mean(values: Sequence[float | None]) -> float | None:
    """Mean of the defined values; None when none is defined."""
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else None
