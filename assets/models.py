"""Assets of the model layer: the configured models and a summary of the call ledger."""


from datetime import UTC, datetime

import dagster as dg

from assets.metadata import table
from assets.resources import LLMResource, SettingsResource, WarehouseResource
from configuration import ConfigError
from llm_calls import EmbeddedModelError, HttpError, probe_request, redact, served_ids

GROUP = "llm"


_LIST_TIMEOUT_S = 15.0  # the models list, before the probe call


@dg.asset(group_name=GROUP, kinds={"duckdb"}, code_version="models-1")
def models(
    context: dg.AssetExecutionContext, settings: SettingsResource, warehouse: WarehouseResource, llm: LLMResource
) -> dg.MaterializeResult:
    """One row per configured model in `llm.models`: whether its endpoint is reachable
    (and the error if not), the ids it serves, and a probe answer through the ledger
    with its latency. An unreachable model is recorded, not fatal; the check
    `evaluated_models_reachable` fails when a model under evaluation is down."""
    cfg = settings.load()
    wh = warehouse.get()
    ledger = llm.ledger(context, wh)
    rows = []
    for name, m in cfg.models.items():
        row = {
            "name": name, "kind": "embedded" if m.embedded else "remote", "served_model": m.served_model,
            "evaluated": name in cfg.evaluate,
            "endpoint_host": None, "reachable": False, "served_ids": None, "error": None,
            "probe_prompt": cfg.probe_prompt, "probe_answer": None, "probe_latency_s": None,
            "probe_cached": None, "checked_at": datetime.now(UTC).replace(tzinfo=None),
        }
        ep = None
        try:
            ep = llm.registry.endpoint(name)
            row["endpoint_host"] = ep.host
            row["served_ids"] = served_ids(ep.base_url, ep.api_key, _LIST_TIMEOUT_S)
            row["reachable"] = True
            probe = ledger.complete(name, [probe_request(cfg.probe_prompt)], purpose="models.probe")[0]
            row.update(probe_answer=probe.text, probe_latency_s=probe.latency_s, probe_cached=probe.cached)
            if not probe.ok:
                row["error"] = f"probe failed: {probe.error}"
        except (ConfigError, EmbeddedModelError, HttpError, OSError) as exc:
            where = f" ({ep.host})" if ep is not None else ""
            row["error"] = f"{type(exc).__name__}{where}: {exc}"
        # a server's 401 reply may echo the key: nothing leaves this step unredacted
        row["error"] = redact(row["error"], [ep.api_key if ep is not None else None])
        context.log.info(f"model {name}: reachable={row['reachable']} error={row['error']}")
        rows.append(row)
    wh.replace_partition("llm.models", rows)
    shown = [{k: r[k] for k in ("name", "kind", "served_model", "reachable", "probe_answer", "error")} for r in rows]
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(rows),
            "reachable": sum(r["reachable"] for r in rows),
            "models": table(shown),
        }
    )


@dg.asset_check(asset=models, description="Every model listed under `evaluate` (and the judge) answered the probe.")
def evaluated_models_reachable(settings: SettingsResource, warehouse: WarehouseResource) -> dg.AssetCheckResult:
    cfg = settings.load()
    needed = sorted(set(cfg.evaluate) | {cfg.judge})
    rows = warehouse.get().rows(
        "SELECT name, reachable, error FROM llm.models WHERE name IN (SELECT unnest(?::VARCHAR[]))", [needed]
    )
    bad = {r["name"]: r["error"] for r in rows if not r["reachable"] or r["error"]}
    missing = [n for n in needed if n not in {r["name"] for r in rows}]
    return dg.AssetCheckResult(
        passed=not bad and not missing,
        metadata={"failing": dg.MetadataValue.json(bad), "not_probed": dg.MetadataValue.json(missing)},
    )


def llm_call_summary_asset(upstream: list[dg.AssetKey]) -> dg.AssetsDefinition:
    """The ledger summary, downstream of every asset that calls models."""

    @dg.asset(name="llm_call_summary", group_name=GROUP, deps=upstream, kinds={"duckdb"}, code_version="summary-1")
    def llm_call_summary(warehouse: WarehouseResource) -> dg.MaterializeResult:
        """Counts of the call ledger (`llm.calls`) per model, purpose and status, with
        tokens and latency; the same numbers as the SQL view `llm.call_summary`."""
        wh = warehouse.get()
        summary = wh.rows("SELECT * FROM llm.call_summary")
        totals = wh.rows(
            "SELECT count(*) AS calls, count(*) FILTER (status = 'failed') AS failed, "
            "coalesce(sum(completion_tokens), 0) AS completion_tokens FROM llm.calls"
        )[0]
        return dg.MaterializeResult(
            metadata={
                "dagster/row_count": totals["calls"],
                "failed_calls": totals["failed"],
                "completion_tokens": int(totals["completion_tokens"]),
                "summary": table(summary),
            }
        )

    return llm_call_summary
