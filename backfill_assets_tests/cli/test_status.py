"""`backfill-assets status`'s row counts, from the Delta logs."""

from __future__ import annotations

from datetime import date

import pyarrow as pa
from deltalake import write_deltalake

from backfill_assets.cli.status import lake_rows
from backfill_assets.settings import Settings


def test_the_first_rate_partition_counts_the_rate_dates_of_its_lead_in(tmp_path):
    """raw_fx_rates' first partition also holds the rate dates of the week before it (its
    materialization counts them): status said 0 for it when no rate file was dated that day."""
    lake = tmp_path / "lake"
    dates = [date(2023, 12, 28), date(2023, 12, 28), date(2023, 12, 30), date(2024, 1, 2)]
    write_deltalake(
        str(lake / "raw" / "fx_rates"),
        pa.table({"rate_date": pa.array(dates, pa.date32()), "payload": ["EUR,1.1"] * 4}),
        partition_by=["rate_date"],
    )
    settings = Settings.from_env(
        {"BACKFILL_LAKE_DIR": str(lake), "BACKFILL_START_DATE": "2024-01-01"}
    )
    assert lake_rows(settings)["raw_fx_rates"] == {date(2024, 1, 1): 3, date(2024, 1, 2): 1}
