"""The synthetic feed generator: determinism, and every promised quirk counted from the files."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta

import pytest

from backfill_assets.demo.generate import generate_feed, remove_rates

START, END, ML = date(2024, 1, 1), date(2024, 1, 10), 7
CURRENCIES = {"EUR", "GBP", "JPY", "BRL", "INR"}


@pytest.fixture(scope="module")
def feed(tmp_path_factory):
    root = tmp_path_factory.mktemp("landing")
    return root, generate_feed(root, START, END, orders_per_day=200, seed=7, max_lateness_days=ML)


def tree(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def visible(path) -> bool:
    return not path.name.startswith(("_", "."))


def order_lines(root) -> list[tuple[date, str, int, str]]:
    """(arrival date, file, line number, line) of every non-blank line of finished files."""
    out = []
    for path in sorted((root / "orders").glob("arrival_date=*/*.jsonl")):
        if visible(path):
            arrival = date.fromisoformat(path.parent.name.split("=")[1])
            for n, line in enumerate(path.read_bytes().decode().split("\n"), start=1):
                if line.strip():
                    out.append((arrival, str(path), n, line.removesuffix("\r")))
    return out


def objects(root) -> list[tuple[date, str, int, dict]]:
    out = []
    for arrival, name, n, line in order_lines(root):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append((arrival, name, n, obj))
    return out


def utc(text) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo else None


def test_same_seed_same_bytes_other_seed_differs(tmp_path):
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        generate_feed(
            tmp_path / name, START, START + timedelta(days=2), orders_per_day=50, seed=seed
        )
    a, b, c = tree(tmp_path / "a"), tree(tmp_path / "b"), tree(tmp_path / "c")
    assert a == b and len(a) > 10
    assert a != c


def test_a_day_does_not_depend_on_the_range(feed, tmp_path):
    generate_feed(tmp_path, START, date(2024, 1, 4))
    generate_feed(tmp_path, date(2024, 1, 5), END)
    assert tree(tmp_path) == tree(feed[0])


def test_summary_counts_what_was_written(feed):
    root, summary = feed
    files = [p for p in (root / "orders").rglob("*.jsonl") if visible(p)]
    assert summary.order_files == len(files)
    assert summary.rate_files == len(list((root / "fx_rates").rglob("*.csv")))
    assert summary.records == len(order_lines(root))
    assert 0 < summary.malformed < summary.records // 5


def test_arrival_lateness_and_future_events(feed):
    root, _ = feed
    lateness = Counter()
    for arrival, _, _, obj in objects(root):
        event = utc(obj.get("event_time"))
        if event is not None:
            lateness[(arrival - event.date()).days] += 1
    total = sum(lateness.values())
    assert lateness[0] > 0.75 * total
    assert all(lateness[d] > 0 for d in range(1, ML + 1))
    too_late = sum(n for d, n in lateness.items() if d > ML)
    assert 0 < too_late < 0.05 * total
    assert lateness[-1] >= 10  # one future event a day
    arrivals = {p.name for p in (root / "orders").iterdir()}
    assert max(arrivals) <= f"arrival_date={END + timedelta(days=ML + 3)}"


def test_resends_status_updates_and_ties(feed):
    root, _ = feed
    copies = Counter(line for _, _, _, line in order_lines(root))
    assert sum(1 for n in copies.values() if n > 1) >= 20
    versions = defaultdict(list)
    for arrival, _name, _n, obj in objects(root):
        versions[obj.get("order_id")].append((arrival, obj.get("status"), obj.get("updated_at")))
    statuses = Counter(frozenset(s for _, s, _ in v) for v in versions.values())
    assert statuses[frozenset({"placed", "paid", "cancelled"})] > 50
    assert statuses[frozenset({"placed", "cancelled"})] > 10
    cancelled_later = paid_first = ties = 0
    for v in versions.values():
        first = {s: min(a for a, s2, _ in v if s2 == s) for _, s, _ in v}
        cancelled_later += first.get("cancelled", date.min) > first.get("paid", date.max)
        paid_first += first.get("paid", date.max) < first.get("placed", date.min)
        instants = {(utc(u), s) for _, s, u in v}
        ties += len({i for i, _ in instants}) < len(instants)
    assert cancelled_later > 10 and paid_first > 0 and ties > 3


def test_malformed_lines_of_every_kind(feed):
    root, _ = feed
    kinds = Counter()
    for _, _, _, line in order_lines(root):
        try:
            obj = json.loads(line, parse_float=lambda t: ("number", t))
        except ValueError:
            kinds["broken json"] += 1
            continue
        if not isinstance(obj, dict):
            kinds[f"json {type(obj).__name__}"] += 1
            continue
        fields = (
            "order_id",
            "customer_id",
            "event_time",
            "updated_at",
            "status",
            "amount",
            "currency",
            "country",
        )
        kinds["missing field"] += any(f not in obj for f in fields)
        kinds["null field"] += any(obj.get(f, "") is None for f in fields)
        kinds["empty string"] += any(obj.get(f) == "" for f in fields)
        kinds["bad currency"] += obj.get("currency") in ("usd", "EURO")
        kinds["number customer_id"] += isinstance(obj.get("customer_id"), int)
        event = obj.get("event_time")
        kinds["no zone"] += isinstance(event, str) and utc(event) is None and bool(utc(event + "Z"))
        amount = obj.get("amount")
        kinds["amount number"] += isinstance(amount, tuple) and amount[1].count(".") == 1
        kinds["amount 1e3"] += amount == ("number", "1e3")
        kinds["amount 1.234"] += amount in (("number", "1.234"), "1.234")
        kinds["amount string"] += isinstance(amount, str)
    for kind in (
        "broken json",
        "json list",
        "json NoneType",
        "json str",
        "missing field",
        "null field",
        "empty string",
        "bad currency",
        "number customer_id",
        "no zone",
        "amount 1e3",
        "amount 1.234",
    ):
        assert kinds[kind] >= 10, kind
    assert kinds["amount number"] > 20 and kinds["amount string"] > 2000


def test_zones_with_local_dates_other_than_utc(feed):
    root, _ = feed
    zones, shifted = Counter(), 0
    for _, _, _, obj in objects(root):
        text = obj.get("event_time")
        if utc(text) is not None:
            zones["Z" if text.endswith("Z") else text[-6:]] += 1
            shifted += utc(text).date() != date.fromisoformat(text[:10])
    assert {"Z", "+05:30", "-08:00", "+09:00"} <= set(zones)
    assert shifted > 200


def test_file_quirks(feed):
    root, _ = feed
    files = list((root / "orders").rglob("*.jsonl"))
    texts = [p.read_bytes() for p in files if visible(p)]
    assert sum(b"\r\n" in t for t in texts) >= 3
    assert sum(b"\n\n" in t or b"\n  \t" in t for t in texts) >= 3
    assert any(not t.endswith(b"\n") for t in texts)
    assert any(not visible(p) for p in files)
    per_folder_day = Counter((p.parent.name, p.name[:15]) for p in files if visible(p))
    assert max(per_folder_day.values()) >= 2


def rates(root) -> dict[date, list[list[dict[str, str]]]]:
    """Rows of each rate_date, file by file in name order."""
    out: dict[date, list[list[dict[str, str]]]] = {}
    for folder in sorted((root / "fx_rates").iterdir()):
        day = date.fromisoformat(folder.name.split("=")[1])
        out[day] = [
            list(csv.DictReader(io.StringIO(p.read_text()))) for p in sorted(folder.glob("*.csv"))
        ]
    return out


def test_rates_cover_every_event_day_without_weekends(feed):
    root, _ = feed
    published = rates(root)
    assert min(published) == START - timedelta(days=3)
    assert all(day.weekday() < 5 for day in published)
    listed = {
        (day, row["currency"]) for day, files in published.items() for rows in files for row in rows
    }
    assert {c for _, c in listed} == CURRENCIES  # USD needs no rate
    for k in range((END - START).days + 1):
        day = START + timedelta(days=k)
        for currency in CURRENCIES:
            assert any((day - timedelta(days=b), currency) in listed for b in range(8))
    assert any(len({r["currency"] for r in files[0]}) < 5 for files in published.values())


def test_a_later_file_corrects_a_rate(feed):
    corrections = []
    for day, files in rates(feed[0]).items():
        first = {r["currency"]: r["usd_per_unit"] for r in files[0]}
        corrections += [
            (day, r["currency"])
            for later in files[1:]
            for r in later
            if r["currency"] in first and r["usd_per_unit"] != first[r["currency"]]
        ]
    assert len(corrections) >= 2


def test_remove_rates_leaves_a_day_without_a_rate(tmp_path):
    generate_feed(tmp_path, START, START + timedelta(days=4), orders_per_day=10)
    removed = remove_rates(tmp_path, "GBP", START - timedelta(days=3), START + timedelta(days=1))
    after = rates(tmp_path)
    gbp_days = {
        d for d, files in after.items() for rows in files for r in rows if r["currency"] == "GBP"
    }
    assert removed >= 3 and min(gbp_days) == START + timedelta(days=2)
    assert all(any(r["currency"] == "INR" for r in files[0]) for files in after.values())


def test_summary_agrees_with_the_independent_oracle(feed):
    from backfill_assets_testkit.reference import REASONS, Reference

    root, summary = feed
    ref = Reference(root, ML)
    verdicts = Counter(r.reason for a in ref.arrival_dates for r in ref.records(a))
    assert sum(verdicts.values()) == summary.records
    assert summary.records - verdicts[None] == summary.malformed
    assert set(verdicts) == {None, *REASONS}
    days = [START + timedelta(days=k) for k in range((END - START).days + 1)]
    assert ref.staging(days)[1] == set()  # every event day has every rate it needs


def test_a_feed_as_of_a_day_lands_nothing_after_it_and_the_same_files_before(feed, tmp_path):
    root, _ = feed
    as_of = END + timedelta(days=2)
    summary = generate_feed(
        tmp_path, START, END, orders_per_day=200, seed=7, max_lateness_days=ML, last_arrival=as_of
    )
    full, cut = tree(root), tree(tmp_path)
    arrival = {
        path: date.fromisoformat(path.split("/")[1].split("=")[1])
        for path in full
        if path.startswith("orders/")
    }
    assert cut == {path: data for path, data in full.items() if arrival.get(path, START) <= as_of}
    assert max(arrival.values()) > as_of  # the full feed had later arrivals to hold back
    from backfill_assets_testkit.reference import Reference

    ref = Reference(tmp_path, ML)
    verdicts = Counter(r.reason for a in ref.arrival_dates for r in ref.records(a))
    assert summary.records == len(order_lines(tmp_path)) == sum(verdicts.values())
    assert summary.records - verdicts[None] == summary.malformed
    with pytest.raises(ValueError, match="last_arrival"):
        generate_feed(tmp_path, START, END, last_arrival=END - timedelta(days=1))


def _orders_per_customer(root) -> Counter:
    """Distinct generated orders (TWS-...) per customer, read from the landed lines."""
    customer_of = {}
    for path in root.joinpath("orders").rglob("orders-*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and str(rec.get("order_id", "")).startswith("TWS-"):
                customer_of[rec["order_id"]] = rec["customer_id"]
    return Counter(customer_of.values())


def test_a_hot_customer_places_its_share_of_the_orders(feed, tmp_path):
    generate_feed(
        tmp_path,
        START,
        END,
        orders_per_day=200,
        seed=7,
        max_lateness_days=ML,
        hot_customer_share=0.6,
    )
    counts = _orders_per_customer(tmp_path)
    ((hot, orders),) = counts.most_common(1)
    assert abs(orders / sum(counts.values()) - 0.6) < 0.03  # 2,000 orders: sd ~0.011
    assert counts.most_common(2)[1][1] < 10  # everyone else stays spread out
    plain = _orders_per_customer(feed[0])
    assert plain[hot] < 5 and sum(plain.values()) == sum(counts.values())


def test_no_hot_customer_is_the_plain_feed(feed, tmp_path):
    generate_feed(
        tmp_path,
        START,
        END,
        orders_per_day=200,
        seed=7,
        max_lateness_days=ML,
        hot_customer_share=0.0,
    )
    assert tree(tmp_path) == tree(feed[0])


def test_a_hot_share_of_one_is_refused(tmp_path):
    with pytest.raises(ValueError, match="hot_customer_share"):
        generate_feed(tmp_path, START, END, hot_customer_share=1.0)
