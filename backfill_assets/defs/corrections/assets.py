"""The ``corrections`` asset: every correction as one partition, keyed by its id.

Nothing materializes it: each of a correction's steps (built, diffed, cut over, rolled back,
discarded, decommissioned) adds an observation to its partition with the record's state, who
made it, when, why, its range and its held days (``corrections/events.py``). The asset's
Partitions tab lists every correction; a partition's Events show its latest state and its
history, and the correction's runs are those tagged ``backfill_assets/correction=<id>``.
"""

from __future__ import annotations

import dagster as dg

from backfill_assets.catalog import CORRECTIONS, CORRECTIONS_PARTITIONS

CORRECTIONS_SPEC = dg.AssetSpec(
    CORRECTIONS,
    partitions_def=dg.DynamicPartitionsDefinition(name=CORRECTIONS_PARTITIONS),
    group_name="corrections",
    description="Every correction of staging and fact, one partition per id: its latest "
    "observation holds its state (staged, diffed, cut over, rolled back, discarded, "
    "decommissioned), who made it, when, why, its range and its held days. Start one with "
    "correction_start_job; act on it with correction_diff_job, correction_cutover_job, "
    "correction_rollback_job and correction_discard_job.",
)
