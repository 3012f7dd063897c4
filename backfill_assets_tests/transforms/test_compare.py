"""A correction's row diff on inline rows, against the same counts made in plain Python."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from backfill_assets.transforms.compare import row_changes

A, B, C = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)
SCHEMA = "d date, k string, amount decimal(18,2), note string"
BEFORE = [
    (A, "kept", 1, None),
    (A, "changed", 2, "x"),
    (A, "gone", 3, "y"),
    (B, "null-same", 4, None),
    (B, "null-new", 5, None),
]
AFTER = [
    (A, "kept", 1, None),
    (A, "changed", 20, "x"),
    (A, "new", 6, "z"),
    (B, "null-same", 4, None),
    (B, "null-new", 5, "set"),
    (C, "only-after", 7, None),
]


def by_python(before, after) -> dict:
    old = {(r[0], r[1]): r[2:] for r in before}
    new = {(r[0], r[1]): r[2:] for r in after}
    days = {k[0] for k in old} | {k[0] for k in new}
    out = {}
    for d in days:
        o = {k: v for k, v in old.items() if k[0] == d}
        n = {k: v for k, v in new.items() if k[0] == d}
        out[d] = {
            "rows_before": len(o),
            "rows_after": len(n),
            "added": len(n.keys() - o.keys()),
            "removed": len(o.keys() - n.keys()),
            "changed": sum(1 for k in o.keys() & n.keys() if o[k] != n[k]),
        }
    return out


def test_row_changes_counts_added_removed_and_changed_keys_per_partition(spark):
    def dec(rows):
        return [(d, k, Decimal(a), n) for d, k, a, n in rows]

    before, after = dec(BEFORE), dec(AFTER)
    got = row_changes(
        spark.createDataFrame(before, SCHEMA), spark.createDataFrame(after, SCHEMA), "d", ("k",)
    )
    assert got == by_python(before, after)
    assert got[A]["changed"] == 1 and got[B]["changed"] == 1  # NULL = NULL is no change
