"""Native delta-spark engine (placeholder until implemented)."""

from __future__ import annotations


def native_delta_available(spark) -> bool:
    return False
