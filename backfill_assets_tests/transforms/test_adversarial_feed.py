"""Raw's reader and validation against the contract on the testkit's ``adversarial_feed.py``: a
generated feed plus, in every arrival folder, lines at the contract's edges (repeated keys at the
top and deeper down, numbers past Jackson's limits, escaped keys, number texts, odd timestamps,
bad UTF-8, blank lines, CR endings). Every record gets the reason the reference gives it."""

from __future__ import annotations

from datetime import date

import pytest

from backfill_assets.landing.layout import list_landing_files
from backfill_assets.landing.spark_reader import read_order_lines
from backfill_assets.transforms.orders import validate_orders
from backfill_assets_testkit import fuzz_feed
from backfill_assets_testkit.adversarial_feed import KINDS, land_adversarial_feed
from backfill_assets_testkit.reference import REASONS

D1 = date(2024, 1, 1)
LATENESS = 7


# Plain lines' fields read by the JVM function set-up builds (plain_line_jar), and by from_json.
@pytest.mark.parametrize("plain_in_jvm", [True, False], ids=["plain-in-jvm", "plain-by-json"])
def test_every_record_of_the_adversarial_feed_gets_the_reason_the_contract_gives(
    spark, tmp_path, plain_in_jvm
):
    made = land_adversarial_feed(tmp_path, D1, 2, 200, seed=5, max_lateness_days=LATENESS)
    # every arrival folder the feed has, early and late deliveries included
    arrivals = sorted(
        date.fromisoformat(folder.name.split("=", 1)[1])
        for folder in (tmp_path / "orders").iterdir()
    )
    files = list_landing_files(tmp_path, "orders", arrivals)
    # fuzz_feed.classify: the reference's judge per line, malformed_json for bytes not UTF-8
    assert fuzz_feed.LATENESS == LATENESS
    expected = {
        (f.partition, f.relative_path, number): reason
        for f in files
        for number, _, reason in fuzz_feed.classify(
            (tmp_path / f.relative_path).read_bytes(), f.partition
        )
    }

    lines = read_order_lines(spark, str(tmp_path), files)
    validated = validate_orders(lines, LATENESS, plain_in_jvm=plain_in_jvm)
    found = {
        (r["arrival_date"], r["source_file"], r["line_number"]): r["reason"]
        for r in validated.select("arrival_date", "source_file", "line_number", "reason").collect()
    }

    assert found == expected
    # the feed is what it says: each kind of line in every folder, every verdict among them
    assert made.lines >= len(KINDS) * made.files and made.files == len(arrivals)
    assert set(expected.values()) == {None, *REASONS}
