"""Late data, without Dagster's APIs: which landed files are new since a cursor, which raw
partitions and which event days they change. The sensor, the schedule and ``catch-up`` share it."""

from backfill_assets.late_data.cursor import LandingCursor, PendingGroup, day_ranges
from backfill_assets.late_data.detect import (
    Detection,
    Finding,
    Request,
    detect,
    event_day_requests,
    release,
)

__all__ = [
    "Detection",
    "Finding",
    "LandingCursor",
    "PendingGroup",
    "Request",
    "day_ranges",
    "detect",
    "event_day_requests",
    "release",
]
