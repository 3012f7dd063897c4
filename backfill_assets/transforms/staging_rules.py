"""staging/orders' data rules as a pandera schema: the rows published must be typed, complete
and priced (``StagingOrdersModel``); the schema-level check (``staging_schema_errors``) and the
row rules as Spark columns (``staging_row_rules``) that staging's checks count per day.
Apart from ``schemas.py`` so that what only needs the tables' types does not import pandera.
"""

from __future__ import annotations

import functools
from typing import Annotated

import pandera.pyspark as pa
import pyspark.sql.types as T
from pandera.config import ValidationDepth, config_context
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from backfill_assets.transforms.schemas import STATUSES

# pandera compiles patterns with Python `re` and runs them with Java regex; `(?![\s\S])`
# means "end of input" in both (Java's `$` would also accept "USD\n").
_END = r"(?![\s\S])"


class StagingOrdersModel(pa.DataFrameModel):
    """staging/orders as published: every row typed, complete and priced."""

    order_id: T.StringType = pa.Field(nullable=False, str_length={"min_value": 1, "max_value": 64})
    customer_id: T.StringType = pa.Field(nullable=False, str_length={"min_value": 1})
    event_time: T.TimestampType = pa.Field(nullable=False)
    event_date: T.DateType = pa.Field(nullable=False)
    updated_at: T.TimestampType = pa.Field(nullable=False)
    status: T.StringType = pa.Field(nullable=False, isin=list(STATUSES))
    amount: Annotated[T.DecimalType, 18, 2] = pa.Field(nullable=False, ge=0)
    currency: T.StringType = pa.Field(nullable=False, str_matches=r"^[A-Z]{3}" + _END)
    country: T.StringType = pa.Field(nullable=False, str_matches=r"^[A-Z]{2}" + _END)
    usd_per_unit: Annotated[T.DecimalType, 18, 8] = pa.Field(nullable=False, gt=0)
    amount_usd: Annotated[T.DecimalType, 18, 2] = pa.Field(nullable=False, ge=0)

    class Config:
        strict = True
        unique = ("event_date", "order_id")


STAGING_SCHEMA = StagingOrdersModel


def staging_schema_errors(df: DataFrame) -> list[str]:
    """pandera's schema-level findings for a staging/orders DataFrame (columns, types,
    strictness), from its schema alone, with no Spark job. [] when they hold.

    The data rules are not pandera's to check here: ``staging_row_rules`` counts them per day in
    one aggregation. pandera counts a non-nullable column's nulls at the schema level, a job per
    column even on no rows; the schema it validates against here declares every column nullable
    and carries no check (the not-null rules are among ``staging_row_rules``)."""
    with config_context(validation_depth=ValidationDepth.SCHEMA_ONLY):
        checked = _schema_level().validate(check_obj=df.limit(0))
    return _messages(checked.pandera.errors or {})


@functools.cache
def _schema_level() -> pa.DataFrameSchema:
    """STAGING_SCHEMA's columns, types and strictness: its data rules and not-null flags off."""
    schema = STAGING_SCHEMA.to_schema()
    bare = schema.update_columns({n: {"checks": [], "nullable": True} for n in schema.columns})
    bare.unique = None
    return bare


def staging_row_rules() -> dict[str, Column]:
    """The data rules of the pandera model, each as a Spark condition true on a row breaking it,
    so all of them are counted per event day in one aggregation (pandera's own PySpark backend
    runs a job per rule over the whole range and reports the range, not the day). The model's
    uniqueness rule is the staging check ``unique_order_ids``."""
    rules: dict[str, Column] = {}
    for name, column in STAGING_SCHEMA.to_schema().columns.items():
        value = F.col(name)
        if not column.nullable:
            rules[f"{name}: not null"] = value.isNull()
        for check in column.checks:
            rules[f"{name}: {check.name} {_stats_text(check.statistics)}"] = F.coalesce(
                _breaks(value, check.name, check.statistics), F.lit(False)
            )
    return rules


def _breaks(value: Column, check: str, stats: dict) -> Column:
    if check == "str_length":
        length = F.length(value)
        low = (
            length < F.lit(stats["min_value"])
            if stats.get("min_value") is not None
            else F.lit(False)
        )
        high = (
            length > F.lit(stats["max_value"])
            if stats.get("max_value") is not None
            else F.lit(False)
        )
        return low | high
    if check == "isin":
        return ~value.isin(*stats["allowed_values"])
    if check == "greater_than_or_equal_to":
        return value < F.lit(stats["min_value"])
    if check == "greater_than":
        return value <= F.lit(stats["min_value"])
    if check == "str_matches":
        return ~value.rlike(str(stats["pattern"]))
    raise ValueError(f"no Spark form for the pandera check {check!r}: add one here")


def _stats_text(stats: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in stats.items() if v is not None)


def _messages(errors: dict) -> list[str]:
    messages: list[str] = []
    for depth, by_type in errors.items():
        for error_type, entries in by_type.items():
            for entry in entries:
                messages.append(
                    f"{depth}/{error_type}: {entry.get('column')}: {entry.get('check')}: "
                    f"{entry.get('error')}"
                )
    return messages
