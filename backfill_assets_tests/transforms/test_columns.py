"""Every column of every table carries a description, as the Dagster UI's Columns panel shows it."""

from __future__ import annotations

import pyspark.sql.types as T

from backfill_assets.asset_events.lineage import column_schema
from backfill_assets.transforms import schemas
from backfill_assets.transforms.columns import DESCRIPTIONS

# Every StructType schemas.py defines: a table added there without descriptions fails here.
TABLE_SCHEMAS = {
    name: value for name, value in vars(schemas).items() if isinstance(value, T.StructType)
}


def test_every_schema_is_a_described_table():
    assert set(TABLE_SCHEMAS) == {
        "RAW_ORDERS",
        "RAW_ORDERS_STORED",
        "QUARANTINE_ORDERS",
        "RAW_FX_RATES",
        "STAGING_ORDERS",
        "DAILY_REVENUE",
        "CUSTOMER_LTV",
        "MONTHLY_REVENUE",
        "ENRICHED_ORDERS",
        "CUSTOMER_SEGMENTS",
    }
    described = [struct for struct, _ in DESCRIPTIONS.values()]
    # RAW_ORDERS: the contract's columns of raw/orders, which the stored table begins with.
    stored = TABLE_SCHEMAS["RAW_ORDERS_STORED"]
    assert (
        stored.fields[: len(TABLE_SCHEMAS["RAW_ORDERS"].fields)]
        == TABLE_SCHEMAS["RAW_ORDERS"].fields
    )
    assert all(
        f.name.startswith("_") for f in stored.fields[len(TABLE_SCHEMAS["RAW_ORDERS"].fields) :]
    )
    for name, struct in TABLE_SCHEMAS.items():
        assert described.count(struct) == (name != "RAW_ORDERS"), name


def test_every_column_of_every_table_has_a_description():
    for name, struct in TABLE_SCHEMAS.items():
        if name == "RAW_ORDERS":
            continue
        columns = column_schema(struct).columns
        assert [c.name for c in columns] == struct.fieldNames(), name
        for column in columns:
            assert column.description and column.description.strip(), f"{name}.{column.name}"


def test_descriptions_name_only_columns_the_table_has():
    for table, (struct, texts) in DESCRIPTIONS.items():
        assert set(texts) == set(struct.fieldNames()), table


def test_descriptions_carry_the_contract_rules():
    staging = dict(DESCRIPTIONS["staging/orders"][1])
    assert "half-up to the cent" in staging["amount_usd"]
    assert "7 days" in staging["usd_per_unit"]
    reasons = DESCRIPTIONS["quarantine/orders"][1]["reason"]
    order = ["malformed_json", "missing_field", "invalid_value", "future_event", "too_late"]
    assert sorted(order, key=reasons.index) == order
