"""Run-health checks on every model-calling asset: a run is green only when its calls were answered.

Three checks per asset (per partition for partitioned ones, whose key each result records):
the share of failed calls (retries spent, an endpoint that is down), of undecided replies (no
answer could be read, even by the judge) and of truncated replies (cut at the token budget).
Each has a threshold in the configuration (`reply_checks`): above it the check fails with ERROR
severity, and since the checks are blocking, the step and the run fail; above zero but within it,
the check fails with WARN severity, so the UI shows it without stopping the run.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from configuration import ReplyCheckThresholds
from warehouse import Warehouse

DESCRIPTIONS = {
    "failed_calls": "Share of this asset's model calls that failed (retries spent, endpoint down, malformed "
                    "replies). Above `reply_checks.failed_calls`: error, and the run fails.",
    "undecided_replies": "Share of replies from which no answer could be read, not even by the judge. Above "
                         "`reply_checks.undecided_replies`: error.",
    "truncated_replies": "Share of replies cut at the token budget (finish_reason 'length'). Above "
                         "`reply_checks.truncated_replies`: error.",
}


def reply_check_specs(asset: str, partitions_def: dg.PartitionsDefinition | None = None) -> list[dg.AssetCheckSpec]:
    """The three specs; on a partitioned asset they are partitioned alike, so each evaluation is
    recorded against its partition and the UI keeps every partition's verdict."""
    return [dg.AssetCheckSpec(name, asset=asset, blocking=True, description=text, partitions_def=partitions_def)
            for name, text in DESCRIPTIONS.items()]


def reply_check_results(wh: Warehouse, thresholds: ReplyCheckThresholds, partition: str | None, *, total: int,
                        failed: int, undecided: int, call_keys: Sequence[str]) -> list[dg.AssetCheckResult]:
    """The three results for `total` replies, of which `failed` failed and `undecided` gave no
    answer; truncation is read from the ledger rows of `call_keys`."""
    keys = sorted({k for k in call_keys if k})
    truncated = wh.scalar(
        "SELECT count(*) FROM llm.calls WHERE finish_reason = 'length' AND key IN (SELECT unnest(?::VARCHAR[]))",
        [keys]) if keys else 0
    measured = {"failed_calls": (failed, total), "undecided_replies": (undecided, max(total - failed, 0)),
                "truncated_replies": (truncated, len(keys))}
    out = []
    where = f" in partition {partition}" if partition else ""
    for name, (count, of) in measured.items():
        share = count / of if of else 0.0
        limit = getattr(thresholds, name)
        severity = dg.AssetCheckSeverity.ERROR if share > limit else dg.AssetCheckSeverity.WARN
        passed, description = count == 0, f"{count} of {of}{where} ({share:.1%}); threshold {limit:.0%}"
        if name == "failed_calls" and total == 0:  # 0 of 0 is no evidence of health: say the step measured nothing
            passed, severity = False, dg.AssetCheckSeverity.WARN
            description = f"no replies{where}: this step measured nothing (no items, or no setting applies to them)"
        out.append(dg.AssetCheckResult(
            check_name=name, passed=passed, severity=severity, description=description,
            metadata={"partition": partition or "", "count": count, "of": of, "share": share, "threshold": limit}))
    return out
