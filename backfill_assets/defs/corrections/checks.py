"""The ``correction_pending`` check of each asset a correction changes (``corrections/pending.py``).

The lifecycle reports it after each of a correction's steps; no job runs it, so a backfill
never gains a step for it (``definitions.py`` leaves it out of every job's selection). Executed
from the UI, it reads the corrections' records and says the same.
"""

from collections.abc import Iterator

import dagster as dg

from backfill_assets.corrections import pending, registry
from backfill_assets.resources import PipelineResource


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            pending.CHECK,
            asset=asset,
            description="Warns while a correction not yet cut over (staged, diffed or rolled "
            "back) will change this asset: the check's metadata names the correction and the "
            "partitions.",
        )
        for asset in pending.MARKED
    ],
    can_subset=True,
    name="correction_pending_checks",
)
def correction_pending_checks(
    context: dg.AssetCheckExecutionContext, pipeline: PipelineResource
) -> Iterator[dg.AssetCheckResult]:
    selected = context.selected_asset_check_keys
    for e in pending.evaluations(registry.all_corrections(pipeline.lake_dir)):
        if dg.AssetCheckKey(e.asset_key, e.check_name) in selected:
            yield dg.AssetCheckResult(
                asset_key=e.asset_key,
                check_name=e.check_name,
                passed=e.passed,
                severity=e.severity,
                description=e.description,
                metadata=e.metadata,
            )
