"""The raw checks' outcomes per partition: raw equals the landing zone, and the quarantine
accounts for every rejected record."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import date

import dagster as dg

from backfill_assets.catalog import RAW_ORDERS
from backfill_assets.landing.layout import LandingFile
from backfill_assets.publishing.publication import CheckOutcome
from backfill_assets.transforms.audit import FileKey, checksum_of

RAW_MATCHES_LANDING = "raw_matches_landing"
QUARANTINE_RECONCILES = "quarantine_reconciles"
RATES_MATCH_LANDING = "rates_match_landing"


def listed_files(files: Iterable[LandingFile]) -> dict[date, set[str]]:
    """The landing files' relative paths, by partition."""
    listed: dict[date, set[str]] = defaultdict(set)
    for f in files:
        listed[f.partition].add(f.relative_path)
    return listed


def landing_outcomes(
    asset_key: dg.AssetKey,
    check_name: str,
    days: list[date],
    listed: dict[date, set[str]],
    expected: dict,
    actual: dict,
    gives_rows: Callable[[str], bool],
    read_totals: dict | None = None,
) -> list[CheckOutcome]:
    """Per day, ``compare_files``; ``gives_rows`` tells whether the listed file at a relative
    path gives raw rows (``layout.has_records``), asked only of a file the read has no rows of.
    ``read_totals``, the records and checksum of every line the
    step read as Spark counted them in flight, must equal ``expected`` summed: lines that were
    read but never stored (lost between the read and the files) fail every day of the run,
    since nothing stored says which day they belonged to."""
    stored = (sum(v[0] for v in expected.values()), sum(int(v[1]) for v in expected.values()))
    lost = read_totals is not None and stored != (
        read_totals["records"],
        checksum_of(read_totals, "checksum"),
    )
    outcomes = []
    for day in days:
        passed, metadata = compare_files(day, listed.get(day, set()), expected, actual, gives_rows)
        if read_totals is not None:
            metadata["records_read_in_run"] = read_totals["records"]
            metadata["records_stored_in_run"] = stored[0]
        outcomes.append(CheckOutcome(asset_key, check_name, day, passed and not lost, metadata))
    return outcomes


def quarantine_outcomes(
    days: list[date],
    raw_rows: dict[date, int],
    expected_reasons: dict[date, dict[str | None, int]],
    actual_reasons: dict[date, dict[str, int]],
) -> list[CheckOutcome]:
    """``expected_reasons`` counts the verdicts (None = valid) stored with the records in raw;
    ``actual_reasons`` what quarantine holds."""
    outcomes = []
    for day in days:
        expected = {r: n for r, n in expected_reasons.get(day, {}).items() if r is not None}
        valid = expected_reasons.get(day, {}).get(None, 0)
        actual = actual_reasons.get(day, {})
        quarantined = sum(actual.values())
        passed = expected == actual and valid + quarantined == raw_rows.get(day, 0)
        outcomes.append(
            CheckOutcome(
                RAW_ORDERS,
                QUARANTINE_RECONCILES,
                day,
                passed,
                {
                    "raw_records": raw_rows.get(day, 0),
                    "valid_records": valid,
                    "quarantined_records": quarantined,
                    "expected_reasons": dg.MetadataValue.json(dict(sorted(expected.items()))),
                    "actual_reasons": dg.MetadataValue.json(dict(sorted(actual.items()))),
                },
            )
        )
    return outcomes


def compare_files(
    day: date,
    listed_files: set[str],
    expected: dict[FileKey, tuple[int, int]],
    actual: dict[FileKey, tuple[int, int]],
    gives_rows: Callable[[str], bool],
) -> tuple[bool, dict]:
    """Raw[day] against the landing files of ``day``: same files, same counts, same payloads.
    ``expected`` is what the read gave, so a listed file the read has no rows of is a file of no
    records only if ``gives_rows`` says so: one the reader did not see (a name the JVM could
    not hold: bytes that are not UTF-8, or beyond ASCII in the C locale) is a mismatch."""
    exp = {f: v for (d, f), v in expected.items() if d == day}
    act = {f: v for (d, f), v in actual.items() if d == day}
    unknown = sorted(set(act) - listed_files)
    mismatched = sorted(
        _shown(f)
        for f in listed_files
        if exp.get(f, (0, None)) != act.get(f, (0, None)) or (f not in exp and gives_rows(f))
    )
    metadata = {
        "landing_files": len(listed_files),
        "expected_records": sum(v[0] for v in exp.values()),
        "actual_records": sum(v[0] for v in act.values()),
        "files_not_in_landing": unknown[:10],
        "mismatched_files": mismatched[:10],
    }
    return (not unknown and not mismatched), metadata


def _shown(name: str) -> str:
    """The name as text: a byte that is not UTF-8 as ``\\xff``."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")
