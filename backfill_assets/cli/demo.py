"""Which days `backfill-assets demo` generates and backfills, and the first partition it uses.

By default the demo covers the 60 days ending yesterday (UTC) and its first day is
also the first daily partition, so every partition bar in the UI shows the demo's
days and nothing else: all published, a held day as failed, none missing. The
demo records that first partition in the Dagster instance (``DAGSTER_HOME``),
where `make ui` and `make status` read it, so the UI sees the same partitions.
A configured ``BACKFILL_START_DATE`` and ``--start``/``--end`` still decide.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from backfill_assets.settings import Settings

DEMO_DAYS = 60
# In DAGSTER_HOME; the Makefile reads the same name.
FIRST_PARTITION_FILE = "backfill_start_date"
_SATURDAY = 5


@dataclass(frozen=True)
class DemoRange:
    first_partition: date
    start: date
    end: date

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1


def demo_range(
    yesterday: date,
    days: int = DEMO_DAYS,
    configured_start: date | None = None,
    start: date | None = None,
    end: date | None = None,
) -> DemoRange:
    """The event days to generate and backfill, and the first partition.

    ``start``/``end`` (either or both) win; else a configured start date gives the
    ``days`` from it (to yesterday at most); else the ``days`` ending yesterday.
    The first partition is the configured start date when there is one, else the
    range's first day. A default range starting on a weekend begins on the Friday
    before instead: the generated feed publishes rates on weekdays only, and a
    first partition with no rate at or before it would hold its first days.
    """
    if days < 1:
        raise ValueError("--days must be at least 1")
    span = timedelta(days=days - 1)
    if start or end:
        start = start or end - span
        end = end or min(start + span, yesterday)
    elif configured_start:
        start, end = configured_start, min(configured_start + span, yesterday)
    else:
        end, start = yesterday, yesterday - span
        while start.weekday() >= _SATURDAY:
            start -= timedelta(days=1)
    if start > end:
        raise ValueError(f"the demo's range {start} .. {end} is empty")
    return DemoRange(configured_start or start, start, end)


def use_first_partition(settings: Settings, first: date, dagster_home: Path) -> Settings:
    """Make ``first`` the first partition for this process's runs and for a later `make ui`."""
    os.environ["BACKFILL_START_DATE"] = first.isoformat()  # read when the runs load the definitions
    dagster_home.mkdir(parents=True, exist_ok=True)
    (dagster_home / FIRST_PARTITION_FILE).write_text(first.isoformat() + "\n", encoding="utf-8")
    return dataclasses.replace(settings, start_date=first)
