"""WakenLLM metrics (paper 000, section 3, 5.3-5.7, appendix F) from `waken.outcomes` rows.

Rows come out in long form, one per (metric, sample type, stage, setting), with
the numerator and denominator beside the value, so every number can be traced.
Sample type: `s` solvable, `u` unsolvable, `all`. Stage: `1`, `2`, `all`, `-`.

Definitions (D: all items; D_VP^1: the Vague Perception items whose stage-1
reply was decided; D_VP^2: the decided stage-2 items, drawn from FC^1):
- TC/FC/UC_t^n counts and TCR/FCR/UCR_t^n = count / |D_VP^n| (3.2, F.1); the
  stage denominator is shared by both sample types, so TCR^n = TCR_s^n + TCR_u^n
  and, per stage, the sum over t of TCR + FCR + UCR is 1;
- OCR = |TC^1 ∪ TC^2| / |D_VP^1| (3.2);
- TCR_t (stage "sum") = TCR_t^1 + TCR_t^2, the stage-summed rate of 3.2;
- Conf_t = ½(TCR_t^1(M=0%) − TCR_t^1(M=100%)) + ½(TCR_t^2(M=0%) − TCR_t^2(M=100%)),
  both terms from the Remind-then-Guide runs: the printed formula (3.3, F.3)
  reads TCR_t^n as the vanilla stage, but Table 3's Conf_s / Conf_u are what the
  M=0% and M=100% rows of Tables 9-11 give (45 of 48 published values; the
  vanilla stages give 2 of 48; e.g. GPT-3.5 FLD: ½(54.17−5.83) + ½(81.82−1.67)
  = 64.25, Table 3 prints 64.25). The vanilla-minus-M=100% form is kept as
  `Conf_literal`. A stage with no input is left out of the average (`stages`);
- RPC = (|TC^1''| − |TC^1|) / |D_VP^1|, CGR = (|TC^2''| − |TC^2|) / |D_VP^2|
  ('' = with the earlier reasoning shown, 3.3), over the items decided both ways
  (a reasoning-shown call that failed or never ran gives NULL, not −TCR, and is
  counted in `n_RPC_unpaired`, `n_CGR_unpaired`): below zero means the earlier
  reasoning misguides, as the prose says, and Table 3's CGR equals −TCR2
  exactly in 6 of 24 rows and is never below it by more than rounding (e.g.
  GPT-3.5 FOLIO: TCR2 42.10, CGR −42.10), which only this sign gives. The
  printed order (without minus with) is kept as `RPC_literal`, `CGR_literal`;
- Deg = |UC^2| / |D_VP^2|: stage-1 False Converting items answered Unknown in
  stage 2 (5.7; undecided replies are not degradation);
- Acc(Direct) and baseline accuracies over the answered items of D: undecided
  replies count wrong, failed calls and judgements are not answers and are left
  out (counted in `n_direct_call_failed`, `n_baseline_failed`); Acc(WakenLLM) = Acc(Direct) +
  |TC^1 ∪ TC^2| / |D| as printed (5.5), i.e. Acc(Direct) + |TC^1| / |D| + |TC^2| / |D| (TC^2 comes
  from FC^1, so the two are disjoint): Table 6 is this form (GPT-3.5 FLD: 50.17 + 25.22 % x 240 / 600
  = 60.26, as printed; 6 of 16 rows within 0.1 pp, none for the form below). It counts twice the
  Unknown items the direct pass already had right (answered Unknown, explanation failing, converted
  again) and can exceed 1, so the de-duplicated Acc(Direct) + |(TC^1 ∪ TC^2) minus C| / |D|, C the
  items the direct pass got right, is kept beside it as `acc_wakenllm_dedup`;
- vague-perception shares (table 8): V = solvable answered Unknown / |D_s|,
  U = Unknown items whose explanation failed / |D_u|;
- per misguiding rate M: TCR_s^1, TCR_u^1, TCR_s^2, TCR_u^2 (tables 9-11);
- table 4 (section 5.4): `TCR_paired` of stage 1 under the pipeline's style
  (setting `vanilla`) and the other one (`style_swap`), both over the items
  decided under both, so the two styles are compared on the same items;
- algorithm 3 (appendix M): TCR^(t) of each reminded stage-1 round t = 2..T
  (setting `rtg_rp:t=<t>`, `waken.rtg_rounds` = T);
- ablation: the stage-1 UC items re-run at temperature 1.0, converted share
  and unchanged share (5.3); cause shares (5.6); the share of answered
  replies that needed the judge (table 7: how often exact reading did not suffice).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from validators.checks import Check
from validators.outcomes import FAILED, UNDECIDED

CLASSES = ("TC", "FC", "UC")


def _frac(num: float, den: float) -> float | None:
    return num / den if den else None


def wakenllm_accuracy(acc_direct: float | None, tc1: float, tc2: float, n: int) -> float | None:
    """Table 6's Acc(WakenLLM): Acc(Direct) + |TC^1| / |D| + |TC^2| / |D| (paper 000, 5.5)."""
    return None if acc_direct is None or not n else acc_direct + tc1 / n + tc2 / n


def conformity_value(followed: Sequence[float | None], misguided: Sequence[float | None]) -> tuple[float | None, int]:
    """Conf_t from per-stage TCR_t with correct labels (M=0%) and with every label wrong (M=100%):
    the mean over the stages that had input of (followed − misguided); and how many stages that was."""
    terms = [a - b for a, b in zip(followed, misguided) if a is not None and b is not None]
    return (sum(terms) / len(terms) if terms else None), len(terms)


class _Stage:
    """Converting classes of one step/setting: item id -> (sample type, class)."""

    def __init__(self, rows: Sequence[dict[str, Any]]):
        self.cls = {r["item_id"]: (r["sample_type"], r["outcome"]) for r in rows}
        self.decided = {i for i, (_, c) in self.cls.items() if c in CLASSES}

    def ids(self, cls: str, t: str = "all") -> set[str]:
        return {i for i, (st, c) in self.cls.items() if c == cls and (t == "all" or st == t)}

    def rate(self, cls: str, t: str) -> float | None:
        return _frac(len(self.ids(cls, t)), len(self.decided))


class _Put:
    """Collects the `waken.metrics` rows of one model on one dataset: `put(metric, value, ...)`."""

    def __init__(self, model: str, dataset: str):
        self.model, self.dataset = model, dataset
        self.rows: list[dict[str, Any]] = []

    def __call__(self, metric: str, value: float | None, num: float | None = None, den: float | None = None,
                 t: str = "all", stage: str = "-", setting: str = "vanilla") -> None:
        self.rows.append({"model": self.model, "dataset": self.dataset, "metric": metric, "sample_type": t,
                          "stage": stage, "setting": setting, "value": value, "numerator": num, "denominator": den})


Steps = dict[tuple[str, str], list[dict[str, Any]]]  # (step, setting) -> its outcome rows


def metric_rows(model: str, dataset: str, outcomes: Sequence[dict[str, Any]], n_items: dict[str, int],
                misguiding_rates: Sequence[float], baselines: Sequence[str]) -> list[dict[str, Any]]:
    """`waken.metrics` rows for one model on one dataset. `n_items` = {'s': |D_s|, 'u': |D_u|}."""
    by: Steps = defaultdict(list)
    for r in outcomes:
        by[(r["step"], r["setting"])].append(r)
    put = _Put(model, dataset)
    s1, s2 = _Stage(by[("stage1", "vanilla")]), _Stage(by[("stage2", "vanilla")])
    _direct_and_stages(put, by, n_items, s1, s2)
    _remind_then_guide(put, by, misguiding_rates, s1, s2)
    _style_swap_and_rounds(put, by, s1)
    _ablation_baselines_causes(put, by, outcomes, baselines)
    return put.rows


def _direct_and_stages(put: _Put, by: Steps, n_items: dict[str, int], s1: _Stage, s2: _Stage) -> None:
    """Direct accuracy, vague perception, the converting classes and rates of both stimulation
    stages, OCR, Deg and Acc(WakenLLM) (paper 000, sections 3-5, table 6)."""
    direct = by[("direct", "vanilla")]
    direct_failed = sum(r["outcome"] in FAILED for r in direct)
    n_all = n_items.get("s", 0) + n_items.get("u", 0) - direct_failed  # the answered items of D
    correct = sum(r["outcome"] == "correct" for r in direct)
    put("acc_direct", _frac(correct, n_all), correct, n_all)
    put("n_direct_undecided", sum(r["outcome"] == UNDECIDED for r in direct))
    put("n_direct_call_failed", direct_failed)
    vp_s = {r["item_id"] for r in direct if r["sample_type"] == "s" and r["prediction"] == "Unknown"}
    vp_u = {r["item_id"] for r in by[("diagnosis", "vanilla")] if r["outcome"] == "explanation_fails"}
    put("vague_perception_share", _frac(len(vp_s), n_items.get("s", 0)), len(vp_s), n_items.get("s", 0), t="s")
    put("vague_perception_share", _frac(len(vp_u), n_items.get("u", 0)), len(vp_u), n_items.get("u", 0), t="u")

    for n, st in (("1", s1), ("2", s2)):
        put("d_vp", len(st.decided), stage=n)
        put("n_undecided", len(st.cls) - len(st.decided), stage=n)
        for t in ("s", "u", "all"):
            for c in CLASSES:
                k = len(st.ids(c, t))
                put(c, k, stage=n, t=t)
                put(c + "R", st.rate(c, t), k, len(st.decided), t=t, stage=n)
    for t in ("s", "u", "all"):
        rates = [s1.rate("TC", t), s2.rate("TC", t)]
        put("TCR", None if None in rates else rates[0] + rates[1], t=t, stage="sum")
    tc_union = s1.ids("TC") | s2.ids("TC")
    put("OCR", _frac(len(tc_union), len(s1.decided)), len(tc_union), len(s1.decided), stage="all")
    put("Deg", _frac(len(s2.ids("UC")), len(s2.decided)), len(s2.ids("UC")), len(s2.decided), stage="2")
    acc_direct = _frac(correct, n_all)
    newly = tc_union - {r["item_id"] for r in direct if r["outcome"] == "correct"}
    put("acc_wakenllm", wakenllm_accuracy(acc_direct, len(s1.ids("TC")), len(s2.ids("TC")), n_all),
        correct + len(tc_union), n_all)
    put("acc_wakenllm_dedup", None if acc_direct is None else acc_direct + len(newly) / n_all,
        correct + len(newly), n_all)


def _remind_then_guide(put: _Put, by: Steps, misguiding_rates: Sequence[float], s1: _Stage, s2: _Stage) -> None:
    """Remind-then-Guide: TCR per stage with assigned labels at each misguiding rate, conformity
    (with its literal form), and RPC and CGR with the reasoning shown."""
    def rtg(rate: float) -> tuple[_Stage, _Stage]:
        setting = f"M={rate:.3f}"
        return _Stage(by[("rtg_label_stage1", setting)]), _Stage(by[("rtg_label_stage2", setting)])

    for rate in misguiding_rates:
        setting = f"M={rate:.3f}"
        put("misguiding_rate", rate, setting=setting)  # the exact rate: the setting's name rounds 2/3 to 0.667
        for n, st in zip(("1", "2"), rtg(rate)):
            for t in ("s", "u"):
                put("TCR", st.rate("TC", t), len(st.ids("TC", t)), len(st.decided), t=t, stage=n, setting=setting)

    def conformity(name: str, lo: tuple[_Stage, _Stage], hi: tuple[_Stage, _Stage]) -> None:
        for t in ("s", "u"):
            value, stages = conformity_value([st.rate("TC", t) for st in lo], [st.rate("TC", t) for st in hi])
            put(name, value, None, stages, t=t, stage="all", setting="rtg_label")

    if 1.0 in misguiding_rates:
        if 0.0 in misguiding_rates:
            conformity("Conf", rtg(0.0), rtg(1.0))
        conformity("Conf_literal", (s1, s2), rtg(1.0))

    r1, r2 = _Stage(by[("rtg_rp_stage1", "reasoning")]), _Stage(by[("rtg_rp_stage2", "reasoning")])
    for name, n, plain_, shown in (("RPC", "1", s1, r1), ("CGR", "2", s2, r2)):
        # paired: the items decided both without and with the reasoning shown. A reasoning-shown call
        # that failed or never ran is no TC'' of 0: with none paired the value is NULL, and the items
        # left out are counted (`n_<name>_unpaired`)
        paired = plain_.decided & shown.decided
        diff = len(shown.ids("TC") & paired) - len(plain_.ids("TC") & paired)
        den = len(paired)
        put(name, _frac(diff, den), diff if den else None, den, stage=n, setting="rtg_rp")
        put(name + "_literal", _frac(-diff, den), -diff if den else None, den, stage=n, setting="rtg_rp")
        put(f"n_{name}_unpaired", len(plain_.decided - shown.decided), stage=n, setting="rtg_rp")


def _style_swap_and_rounds(put: _Put, by: Steps, s1: _Stage) -> None:
    """Section 5.4, table 4: stage 1 with the other stimulation style, on the items decided both ways;
    algorithm 3: TCR^(t) of each reminded round t = 2..T over the items decided in it."""
    swapped = _Stage(by[("stage1", "swapped")])
    if swapped.cls:
        both = s1.decided & swapped.decided
        for name, st in (("vanilla", s1), ("style_swap", swapped)):
            for ty in ("s", "u", "all"):
                k = len(st.ids("TC", ty) & both)
                put("TCR_paired", _frac(k, len(both)), k, len(both), t=ty, stage="1", setting=name)
    for (step, setting), rows in sorted(by.items()):
        if step == "rtg_rp_stage1":
            t = 2 if setting == "reasoning" else int(setting.split("t=")[1])
            st = _Stage(rows)
            for ty in ("s", "u", "all"):
                put("TCR", st.rate("TC", ty), len(st.ids("TC", ty)), len(st.decided), t=ty, stage="1",
                    setting=f"rtg_rp:t={t}")


def _ablation_baselines_causes(put: _Put, by: Steps, outcomes: Sequence[dict[str, Any]],
                               baselines: Sequence[str]) -> None:
    """The ablation's shares, each baseline's accuracy, the judged causes' shares and the judge's share."""
    ablation = [r for (step, _), rows in by.items() if step == "ablation" for r in rows]
    ab = _Stage(ablation)
    put("ablation_converted", _frac(len(ab.ids("TC")), len(ab.decided)), len(ab.ids("TC")), len(ab.decided),
        stage="1", setting="ablation")
    put("ablation_unchanged", _frac(len(ab.ids("UC")), len(ab.decided)), len(ab.ids("UC")), len(ab.decided),
        stage="1", setting="ablation")

    for name in baselines:
        rows = by[("baseline", name)]
        answered = [r for r in rows if r["outcome"] not in FAILED]
        ok = sum(r["outcome"] == "correct" for r in answered)
        put("acc_baseline", _frac(ok, len(answered)) if rows else None, ok, len(answered), setting=name)
        put("n_baseline_failed", len(rows) - len(answered), setting=name)

    causes = by[("cause", "judge")]
    classified = [r for r in causes if r["outcome"] in ("fact_understanding", "reasoning_gap", "excessive_caution")]
    for cause in ("fact_understanding", "reasoning_gap", "excessive_caution"):
        k = sum(r["outcome"] == cause for r in classified)
        put("cause_share", _frac(k, len(classified)), k, len(classified), setting=cause)

    answered = [r for r in outcomes if r["step"] not in ("cause",) and r["outcome"] not in FAILED]
    judged = sum(r["method"].startswith("judge") for r in answered)
    put("judge_share", _frac(judged, len(answered)), judged, len(answered))


def identity_violations(outcomes: Sequence[dict[str, Any]]) -> list[str]:
    """Appendix F identities, checked on the outcomes: per stage the classes partition the decided
    items (so the rates sum to 1), and TC^1 and TC^2 are disjoint."""
    problems = []
    by: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in outcomes:
        by[(r["model"], r["step"], r["setting"])].append(r)
    for (model, step, _setting), rows in by.items():
        if step not in ("stage1", "stage2"):
            continue
        st = _Stage(rows)
        if st.decided:
            total = sum(st.rate(c, t) or 0 for c in CLASSES for t in ("s", "u"))
            if abs(total - 1) > 1e-9:
                problems.append(f"{model} {step}: TCR + FCR + UCR = {total}")
        if len(st.cls) != len(rows):
            problems.append(f"{model} {step}: an item appears twice")
    for model in {r["model"] for r in outcomes}:
        tc1 = _Stage(by[(model, "stage1", "vanilla")]).ids("TC")
        tc2 = _Stage(by[(model, "stage2", "vanilla")]).ids("TC")
        if tc1 & tc2:
            problems.append(f"{model}: TC1 and TC2 share {sorted(tc1 & tc2)[:3]}")
    return problems


def all_metric_rows(stored: Sequence[dict[str, Any]], sizes: dict[tuple[str, str], int],
                    misguiding_rates: Sequence[float], baselines: Sequence[str]) -> list[dict[str, Any]]:
    """`metric_rows` for every (model, dataset) of the stored outcomes; `sizes`: (dataset, 's' or
    'u') -> items of that sample type (the denominators of the vague-perception shares)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in stored:
        groups.setdefault((r["model"], r["dataset"]), []).append(r)
    rows: list[dict[str, Any]] = []
    for (model, dataset), rs in sorted(groups.items()):
        rows += metric_rows(model, dataset, rs, {"s": sizes.get((dataset, "s"), 0), "u": sizes.get((dataset, "u"), 0)},
                            misguiding_rates, baselines)
    return rows


def coverage(evaluated: Sequence[str], datasets: Sequence[str], stored: Sequence[dict[str, Any]]) -> Check:
    """Every evaluated model has outcomes on every configured dataset (an empty warehouse is no pass)."""
    have = {(r["model"], r["dataset"]) for r in stored}
    missing = sorted(f"{m}/{d}" for m in evaluated for d in set(datasets) if (m, d) not in have)
    return Check("every_model_and_dataset", not missing, {"missing": missing})

