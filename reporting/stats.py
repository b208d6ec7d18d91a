"""Uncertainty for the headline numbers and paired comparisons between models (issue 50).

Every headline number of `report.headline` rests on units (`report.units`: one row per item, or per
instance, with its share of the number): `value = sum(num) / sum(den)` over the units, or for an
ECE the calibration error of the units' (confidence, score) pairs. From them:

- **Wilson 95 % interval** where each unit is one yes/no answer (num 0 or 1, den 1): accuracies
  scored once per item (Wilson 1927; lm-evaluation-harness and Inspect report a standard error, the
  Wilson interval stays inside [0, 1] and keeps its coverage at small n and near 0 or 1);
- **bootstrap over units** (percentile, `BOOT` resamples, a fixed seed) otherwise: means of
  per-item scores (recall, precision, pass@1), ratios (TCR, mean tokens), ECE; a unit pools every
  sample of its item, so the resampling is clustered by item;
- **paired comparisons** (`compare`) of two models on the units both were scored on: the
  difference, its paired-bootstrap interval, and a test: McNemar's exact test where units are
  yes/no (the binomial test on the discordant pairs), else the paired bootstrap's two-sided p.

Same units and seed, same numbers: the random stream is seeded from the row's identity.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054
BOOT = 2000


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of k successes in n trials (None when n is 0)."""
    if n <= 0:
        return None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def ratio(units: Sequence[tuple[float, float]]) -> float | None:
    den = sum(d for _, d in units)
    return sum(n for n, _ in units) / den if den else None


def _seed(*identity: object) -> int:
    return int(hashlib.sha256(repr(identity).encode()).hexdigest()[:16], 16)


def _draws(n: int, resamples: int, seed: tuple) -> np.ndarray:
    """`resamples` rows of `n` unit indexes drawn with replacement (NumPy's PCG64 from the seed: the
    same on every machine)."""
    return np.random.default_rng(_seed("bootstrap", *seed)).integers(0, n, size=(resamples, n), dtype=np.int32)


def _ratios(units: np.ndarray, idx: np.ndarray) -> np.ndarray:
    den = units[:, 1][idx].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den != 0, units[:, 0][idx].sum(axis=1) / np.where(den != 0, den, 1), np.nan)


def _eces(units: np.ndarray, idx: np.ndarray, n_bins: int = 10) -> np.ndarray:
    """The ECE of each resample (`evaluations.scoring.ece`: Σ_m |B_m|/N |score(B_m) - conf(B_m)| =
    Σ_m |Σ score - Σ conf| / N over the equal-width confidence bins)."""
    rows, n = idx.shape
    bins = np.minimum((units[:, 2] * n_bins).astype(int), n_bins - 1)[idx] + np.arange(rows)[:, None] * n_bins
    gap = np.bincount(bins.ravel(), weights=(units[:, 0] - units[:, 2])[idx].ravel(), minlength=rows * n_bins)
    return np.abs(gap.reshape(rows, n_bins)).sum(axis=1) / n


def bootstrap(units: Sequence, statistic: Callable[[Sequence], float | None], seed: tuple = (),
              resamples: int = BOOT, level: float = 0.95) -> tuple[float, float] | None:
    """The percentile interval of `statistic` over `resamples` resamples of the units (with
    replacement, as many as there are): the units are the clusters. `ratio` and `_ece` are computed
    for all resamples at once (NumPy); any other statistic one resample at a time."""
    if len(units) < 2:
        return None
    idx = _draws(len(units), resamples, seed)
    if statistic is ratio or statistic is _ece:
        arr = np.asarray(units, dtype=float)
        stats = (_ratios if statistic is ratio else _eces)(arr, idx)
    else:
        stats = np.array([x if (x := statistic([units[i] for i in row])) is not None else np.nan for row in idx])
    stats = np.sort(stats[~np.isnan(stats)])
    if len(stats) < resamples // 2:
        return None
    lo = stats[int(math.floor((1 - level) / 2 * (len(stats) - 1)))]
    hi = stats[int(math.ceil((1 + level) / 2 * (len(stats) - 1)))]
    return float(lo), float(hi)


def binary(units: Sequence[tuple[float, float]]) -> bool:
    """Whether every unit is one yes/no answer."""
    return all(d == 1 and n in (0, 1) for n, d in units)


@dataclass(frozen=True)
class Interval:
    lo: float | None
    hi: float | None
    method: str  # wilson, bootstrap, or why there is none


def interval(units: Sequence[tuple[float, float]], seed: tuple = (),
             statistic: Callable[[Sequence], float | None] | None = None) -> Interval:
    """The 95 % interval of a headline number from its units ((num, den) pairs; with `statistic`,
    any unit shape that function reads)."""
    if not units:
        return Interval(None, None, "no units")
    if statistic is None and binary(units):
        got = wilson(sum(n for n, _ in units), len(units))
        return Interval(*got, "wilson") if got else Interval(None, None, "no units")
    got = bootstrap(units, statistic or ratio, seed)
    return Interval(*got, "bootstrap") if got else Interval(None, None, "too few units")


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p: b units right for A only, c for B only; under no difference each
    discordant unit goes either way with probability 1/2."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class Comparison:
    shared: int
    value_a: float | None
    value_b: float | None
    diff: float | None
    lo: float | None
    hi: float | None
    test: str
    p_value: float | None


def compare(a: dict[str, tuple[float, float]], b: dict[str, tuple[float, float]], seed: tuple = (),
            resamples: int = BOOT) -> Comparison:
    """Model A against model B on the units both were scored on (keyed by unit): A - B, its paired
    bootstrap 95 % interval, and McNemar's exact test (yes/no units) or the paired bootstrap's
    two-sided p (the share of resampled differences on the other side of 0, doubled)."""
    shared = sorted(set(a) & set(b))
    pa, pb = [a[u] for u in shared], [b[u] for u in shared]
    va, vb = ratio(pa), ratio(pb)
    if va is None or vb is None:
        return Comparison(len(shared), va, vb, None, None, None, "no shared units", None)
    diff = va - vb
    pairs = list(zip(pa, pb))

    if len(pairs) < 2:
        return Comparison(len(pairs), va, vb, diff, None, None, "too few units", None)
    idx = _draws(len(pairs), resamples, ("compare", *seed))
    draws = _ratios(np.asarray(pa, dtype=float), idx) - _ratios(np.asarray(pb, dtype=float), idx)
    draws = np.sort(draws[~np.isnan(draws)])
    lo = float(draws[int(math.floor(0.025 * (len(draws) - 1)))])
    hi = float(draws[int(math.ceil(0.975 * (len(draws) - 1)))])
    if binary(pa) and binary(pb):
        only_a = sum(x[0] == 1 and y[0] == 0 for x, y in pairs)
        only_b = sum(x[0] == 0 and y[0] == 1 for x, y in pairs)
        return Comparison(len(shared), va, vb, diff, lo, hi, "mcnemar_exact", mcnemar_exact(only_a, only_b))
    other = int((draws <= 0).sum()) if diff > 0 else int((draws >= 0).sum())
    p = min(1.0, 2 * (other + 1) / (len(draws) + 1)) if diff != 0 else 1.0
    return Comparison(len(pairs), va, vb, diff, lo, hi, "paired_bootstrap", p)


# -- the warehouse's report.intervals and report.compare ------------------------------------------------

def _ece(units: Sequence[tuple[float, float, float]]) -> float | None:
    from evaluations.scoring import ece

    return ece([c for _, _, c in units], [n for n, _, _ in units])


def unit_set(units: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(units)).encode()).hexdigest()[:16]


def _grouped(wh) -> dict[tuple[str, str, str, str], dict[str, tuple[float, ...]]]:
    """(family, model, scope, metric) -> unit -> (num, den) or, for an ECE, (num, den, conf)."""
    out: dict[tuple[str, str, str, str], dict[str, tuple[float, ...]]] = {}
    for r in wh.rows("SELECT family, model, scope, metric, unit, num, den, conf FROM report.units "
                     "WHERE num IS NOT NULL AND den IS NOT NULL ORDER BY ALL"):
        key = (r["family"], r["model"], r["scope"], r["metric"])
        out.setdefault(key, {})[r["unit"]] = ((r["num"], r["den"]) if r["conf"] is None
                                              else (r["num"], r["den"], r["conf"]))
    return out


def interval_rows(wh) -> list[dict]:
    """A row of `report.intervals` per headline number that has units."""
    units = _grouped(wh)
    out = []
    for h in wh.rows("SELECT family, model, scope, metric, value FROM report.headline ORDER BY ALL"):
        key = (h["family"], h["model"], h["scope"], h["metric"])
        got = units.get(key)
        if not got:
            continue
        values = list(got.values())
        ece = len(values[0]) == 3
        iv = interval(values, key, _ece if ece else None)
        out.append({**dict(zip(("family", "model", "scope", "metric"), key)), "value": h["value"],
                    "lo": iv.lo, "hi": iv.hi, "method": iv.method, "units": len(values), "unit_set": unit_set(list(got))})
    return out


def compare_rows(wh) -> list[dict]:
    """A row of `report.compare` per pair of models on each headline number with units (not ECEs:
    a paired comparison of calibration errors needs more units than a run has per bin)."""
    units = _grouped(wh)
    by_number: dict[tuple[str, str, str], dict[str, dict[str, tuple[float, ...]]]] = {}
    for (family, model, scope, metric), got in units.items():
        if model != "-" and len(next(iter(got.values()))) == 2:
            by_number.setdefault((family, scope, metric), {})[model] = got
    out = []
    for (family, scope, metric), models in sorted(by_number.items()):
        names = sorted(models)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                c = compare(models[a], models[b], (family, scope, metric, a, b))
                out.append({"family": family, "scope": scope, "metric": metric, "model_a": a, "model_b": b,
                            "shared": c.shared, "only_a": len(set(models[a]) - set(models[b])),
                            "only_b": len(set(models[b]) - set(models[a])), "value_a": c.value_a,
                            "value_b": c.value_b, "diff": c.diff, "lo": c.lo, "hi": c.hi, "test": c.test,
                            "p_value": c.p_value})
    return out


def write(wh) -> tuple[int, int]:
    """Recompute `report.intervals` and `report.compare` from the units stored now (one unit of work
    on the warehouse: the reads see the units the write is computed from)."""
    with wh.connect():
        intervals, comparisons = interval_rows(wh), compare_rows(wh)
        wh.replace_partitions({"report.intervals": intervals, "report.compare": comparisons}, {})
    return len(intervals), len(comparisons)
