"""The event-day checks' evaluation: each check's outcome on each event day, from the figures
``transforms.audit`` computes of what was staged. The checks themselves (their specs, which
Dagster shows) are declared in ``defs/event_days/checks.py``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

import dagster as dg

from backfill_assets.catalog import FCT_DAILY_REVENUE, STG_ORDERS
from backfill_assets.publishing.publication import CheckOutcome
from backfill_assets.transforms.audit import EMPTY_DAY
from backfill_assets.transforms.totals import ZERO

# Checks that only a bug can fail: the data cannot make them fail, so re-running cannot help.
CODE_DEFECT = (
    " A failure means a defect in the code, not in the data: report it with the run "
    "id; re-executing will fail again."
)

UNIQUE_ORDER_IDS = "unique_order_ids"
ONE_ROW_PER_VALID_ORDER = "one_row_per_valid_order"
FX_RATE_PRESENT = "fx_rate_present"
AMOUNT_USD_FITS = "amount_usd_fits"
WINDOW_COMPLETE = "window_complete"
MATCHES_SCHEMA = "matches_contract_schema"

TOTALS_MATCH_STAGING = "totals_match_staging"


def missing_window_files(
    first: date, last: date, landed: Iterable[tuple[date, str]], read: set[tuple[date, str]]
) -> list[str]:
    """The landed files dated ``first .. last`` that raw does not hold."""
    return sorted(f for (a, f) in landed if first <= a <= last and (a, f) not in read)


def _no_unpriced_orders(check: str, day: date, stats: dict, kind: str) -> CheckOutcome:
    """``check`` passes when no order of ``day`` is of ``kind`` (``staging_stats``' count of
    orders without a rate, or whose amount_usd does not fit); it names the first few."""
    return CheckOutcome(
        STG_ORDERS,
        check,
        day,
        stats[kind] == 0,
        {
            f"orders_{kind}": stats[kind],
            "first_offending_orders": dg.MetadataValue.json(list(stats[f"first_{kind}"])),
        },
    )


def staging_outcomes(
    days: list[date],
    stats: dict[date, dict],
    valid_ids: dict[date, int],
    missing_files: dict[date, list[str]],
    schema_errors: list[str],
) -> list[CheckOutcome]:
    outcomes = []
    for day in days:
        s = stats.get(day, {**EMPTY_DAY, "rule_violations": {}})
        violations = s["rule_violations"]
        missing = missing_files.get(day, [])
        outcomes += [
            CheckOutcome(
                STG_ORDERS,
                UNIQUE_ORDER_IDS,
                day,
                s["rows"] == s["distinct_ids"],
                {"rows": s["rows"], "distinct_order_ids": s["distinct_ids"]},
            ),
            CheckOutcome(
                STG_ORDERS,
                ONE_ROW_PER_VALID_ORDER,
                day,
                s["rows"] == valid_ids.get(day, 0),
                {"expected_rows": valid_ids.get(day, 0), "actual_rows": s["rows"]},
            ),
            _no_unpriced_orders(FX_RATE_PRESENT, day, s, "without_rate"),
            _no_unpriced_orders(AMOUNT_USD_FITS, day, s, "too_large"),
            CheckOutcome(
                STG_ORDERS,
                WINDOW_COMPLETE,
                day,
                not missing,
                {
                    "landed_files_missing_from_raw": dg.MetadataValue.json(missing[:10]),
                    "missing_count": len(missing),
                },
            ),
            CheckOutcome(
                STG_ORDERS,
                MATCHES_SCHEMA,
                day,
                not schema_errors and not violations,
                {
                    "schema_errors": dg.MetadataValue.json(schema_errors[:10]),
                    "rows_breaking_rules": dg.MetadataValue.json(violations),
                },
            ),
        ]
    return outcomes


def compared(expected: dict, actual: dict) -> dict:
    """Both sides of a comparison of totals as metadata, revenue as text (exact to the cent)."""

    def shown(k: str, v: object) -> object:
        return str(v) if k == "revenue_usd" else v

    return {
        **{f"expected_{k}": shown(k, v) for k, v in expected.items()},
        **{f"actual_{k}": shown(k, v) for k, v in actual.items()},
    }


def fact_outcomes(
    days: list[date], expected: dict[date, dict], actual: dict[date, dict]
) -> list[CheckOutcome]:
    outcomes = []
    for day in days:
        exp, act = expected.get(day, ZERO), actual.get(day, ZERO)
        outcomes.append(
            CheckOutcome(
                FCT_DAILY_REVENUE, TOTALS_MATCH_STAGING, day, exp == act, compared(exp, act)
            )
        )
    return outcomes
