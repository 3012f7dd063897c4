"""What Dagster has on record per partition: the storage id of each partition's latest
materialization, which the planning, the steps and the automation compare."""

from __future__ import annotations

from datetime import date

import dagster as dg


def latest_materializations(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey
) -> dict[date, int]:
    """Per materialized partition, the storage id of its latest materialization: ids grow with
    time, so comparing them says which of two partitions was published after the other."""
    latest = instance.event_log_storage.get_latest_storage_id_by_partition(
        asset_key, dg.DagsterEventType.ASSET_MATERIALIZATION
    )
    return {date.fromisoformat(key): storage_id for key, storage_id in latest.items()}
