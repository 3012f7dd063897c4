"""Synthetic "TheWorldShop" landing zone: orders and FX rates with every quirk the contract names.

Every event day draws from its own RNG (derived from the seed and the date) and
writes its lines into files named after that day, ``orders-<event day>-NN.jsonl``,
in whichever arrival folders they land. A day's files therefore do not depend on
the range being generated: two adjacent ranges produce the same files as one.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

from backfill_assets.catalog import FX_RATES_DATASET, ORDERS_DATASET
from backfill_assets.days import days_between
from backfill_assets.landing.layout import (
    DATASETS,
    FX_HEADER,
    join,
    list_landing_files,
    open_landed,
    put_landed,
)
from backfill_assets.storage.stores import is_s3

_DAY_MS = 86_400_000
_HOUR_MS = 3_600_000
# country, currency, zone written in event_time, zone offset in ms
_COUNTRIES = (
    ("US", "USD", "-08:00", -8 * _HOUR_MS),
    ("GB", "GBP", "Z", 0),
    ("DE", "EUR", "Z", 0),
    ("FR", "EUR", "Z", 0),
    ("JP", "JPY", "+09:00", 9 * _HOUR_MS),
    ("BR", "BRL", "Z", 0),
    ("IN", "INR", "+05:30", 11 * _HOUR_MS // 2),
)
_CUM_WEIGHTS = (30, 42, 52, 60, 72, 80, 100)
# amount range in minor units, and the minor units per major unit (JPY has none)
_AMOUNTS = {
    "USD": (500, 50_000, 100),
    "EUR": (500, 45_000, 100),
    "GBP": (400, 40_000, 100),
    "JPY": (500, 60_000, 1),
    "BRL": (2_500, 250_000, 100),
    "INR": (40_000, 4_000_000, 100),
}
_USD_PER_UNIT = {"EUR": 1.08, "GBP": 1.27, "JPY": 0.0067, "BRL": 0.20, "INR": 0.012}
_CHANNELS = ("web", "app", "store")
_TAILS = {
    country: tuple(
        f',"currency":"{cur}","country":"{country}","channel":"{ch}"}}' for ch in _CHANNELS
    )
    for country, cur, _, _ in _COUNTRIES
}


@dataclass(frozen=True)
class FeedSummary:
    """What one generate_feed call wrote; ``malformed`` counts the records the contract rejects
    (any reason, too_late judged with the generator's max_lateness_days)."""

    start: date
    end: date
    order_files: int
    rate_files: int
    records: int
    malformed: int


class _Tables:
    """Pre-rendered text: ISO 8601 instants (ms since day 1 of the proleptic calendar) with a
    zone, customer ids, order serials. A year of 20,000 orders a day formats some 28 million
    timestamps: tables of "YYYY-MM-DDT" per day and "HH:MM:SS" per second keep that cheap.
    """

    def __init__(self) -> None:
        self._dates: dict[int, str] = {}
        # the contract makes seconds optional: on even minutes, :00 seconds are left out
        self.hms = [
            f"{h:02d}:{m:02d}" + ("" if s == 0 and m % 2 == 0 else f":{s:02d}")
            for h in range(24)
            for m in range(60)
            for s in range(60)
        ]
        self.customers = [f"C{k:05d}" for k in range(60_000)]
        self.serials: list[str] = []

    def day(self, ordinal: int) -> str:
        ds = self._dates.get(ordinal)
        if ds is None:
            ds = self._dates[ordinal] = date.fromordinal(ordinal).isoformat() + "T"
        return ds

    def text(self, instant_ms: int, zone: str, offset_ms: int) -> str:
        day, ms = divmod(instant_ms + offset_ms, _DAY_MS)
        sec, ms = divmod(ms, 1000)
        if ms:
            return f"{self.day(day)}{self.hms[sec][:5]}:{sec % 60:02d}.{ms:03d}{zone}"
        return self.day(day) + self.hms[sec] + zone


class _DayFeed:
    """The lines one event day sends, bucketed by arrival offset (days after the event day)."""

    def __init__(self, day: date, max_lateness: int) -> None:
        self.day = day
        self.max_lateness = max_lateness
        self.cap = max_lateness + 3
        self.buckets: list[list[str]] = [[] for _ in range(self.cap + 1)]
        self.resends: list[list[str]] = [[] for _ in range(self.cap + 1)]
        self.specials: list[str] = []  # rejected on their own merits, all land on the day

    def rejected(self) -> int:
        late = sum(
            len(self.buckets[a]) + len(self.resends[a])
            for a in range(self.max_lateness + 1, self.cap + 1)
        )
        return late + len(self.specials)


def _lateness(u: float, ml: int) -> int:
    """Days late: 86% on time, 13% within max lateness, 1% one to three days beyond it."""
    if u < 0.86:
        return 0
    if u < 0.99:
        return 1 + int((u - 0.86) / 0.13 * ml) if ml else 0
    return ml + 1 + int((u - 0.99) / 0.01 * 3)


def _amount_text(minor: int, unit: int, as_number: bool) -> str:
    if unit == 1:
        return str(minor) if as_number else f'"{minor}"'
    if as_number:  # a JSON serializer writing a float drops trailing zeros
        return f"{minor // 100}.{minor % 100:02d}".rstrip("0").rstrip(".")
    return f'"{minor // 100}.{minor % 100:02d}"'


HOT_CUSTOMER = "C00000"  # the customer a --hot-customer-share feed gives that share of orders


def _orders(rng: random.Random, feed: _DayFeed, n: int, tables: _Tables, hot: float = 0.0) -> None:
    """Each order is placed, then maybe paid and maybe cancelled; each version is one line.
    A share ``hot`` of the orders is placed by ``HOT_CUSTOMER`` (from the same draw as the
    customer, so a feed without one is the same as before)."""
    rnd, fmt, ml = rng.random, tables.text, feed.max_lateness
    hms, customers, base = tables.hms, tables.customers, feed.day.toordinal() * _DAY_MS
    days = [tables.day(feed.day.toordinal() + k) for k in (-1, 0, 1)]  # local dates
    tables.serials += [f"{k:06d}" for k in range(len(tables.serials), n)]
    serials, id_prefix = tables.serials, f'{{"order_id":"TWS-{feed.day.strftime("%Y%m%d")}-'
    countries = rng.choices(_COUNTRIES, cum_weights=_CUM_WEIGHTS, k=n)
    # offsets past the last folder land in it: a late update never outruns the feed's end
    add = [b.append for b in feed.buckets] + [feed.buckets[-1].append] * 8
    for i, (country, cur, zone, off) in enumerate(countries):
        t = int(rnd() * _DAY_MS)
        if t % 1000 < 970:  # most producers write whole seconds
            t -= t % 1000
        event_ms, local = base + t, t + off
        k = 1 + (local >= _DAY_MS) - (local < 0)
        if t % 1000:
            event = fmt(event_ms, zone, off)
        else:
            event = days[k] + hms[(local - (k - 1) * _DAY_MS) // 1000] + zone
        who = rnd()
        customer = HOT_CUSTOMER if who < hot else customers[int((who - hot) / (1 - hot) * 60_000)]
        head = (
            f'{id_prefix}{serials[i]}","customer_id":"{customer}",'
            f'"event_time":"{event}","updated_at":"'
        )
        low, high, unit = _AMOUNTS[cur]
        amount = _amount_text(low + int(rnd() * (high - low)), unit, rnd() < 0.05)
        tail = '","amount":' + amount + _TAILS[country][i % 3]
        path, late = rnd(), rnd()
        late = 0 if late < 0.86 else _lateness(late, ml)
        placed_at = late + 1 if rnd() < 0.02 else late  # now and then "paid" lands first
        add[placed_at](head + event + '","status":"placed' + tail)
        if path < 0.20:
            continue
        upd = event_ms
        if path >= 0.25:
            upd = event_ms + 30_000 + int(rnd() * 1_800) * 1000
            paid_at = late + 1 if rnd() < 0.05 else late
            add[paid_at](head + fmt(upd, zone, off) + '","status":"paid' + tail)
            if path < 0.88:
                continue
        lag = int(rnd() * 4)
        if rnd() < 0.08:  # cancelled in the same millisecond it was paid: a tie on updated_at
            text = fmt(upd, "Z", 0) if zone != "Z" else fmt(upd, "+00:00", 0)
        else:
            text = fmt(upd + lag * _DAY_MS + int(rnd() * 7_200) * 1000, zone, off)
        add[late + lag](head + text + '","status":"cancelled' + tail)


def _specials(rng: random.Random, feed: _DayFeed, n: int, tables: _Tables) -> None:
    """Records the contract rejects for what they are, a few of each kind every day."""
    ymd = feed.day.strftime("%Y%m%d")
    ok_time = tables.text(feed.day.toordinal() * _DAY_MS + 43_200_000, "Z", 0)
    tomorrow = tables.text((feed.day.toordinal() + 1) * _DAY_MS + 3_600_000, "Z", 0)
    variants = (
        ("order_id", ""),
        ("customer_id", None),
        ("currency", "usd"),
        ("currency", "EURO"),
        ("amount", "@1e3"),
        ("amount", "@1.234"),
        ("amount", "1.234"),
        ("amount", "-5.00"),
        ("amount", "12,50"),
        ("status", "shipped"),
        ("country", "usa"),
        ("customer_id", 48_213),
        ("order_id", "X" * 65),
        ("event_time", ok_time[:-1]),
        ("updated_at", ok_time[:10]),
        ("event_time", f"{feed.day.year}-02-30T10:00:00Z"),
        ("event_time", tomorrow),
        ("amount", "MISSING"),
        ("status", "MISSING"),
    )
    for k in range(max(1, n // 2_000)):
        for j, (field, value) in enumerate(variants):
            rec: dict[str, object] = {
                "order_id": f"BAD-{ymd}-{k:03d}{j:02d}",
                "customer_id": "C00001",
                "event_time": ok_time,
                "updated_at": ok_time,
                "status": "placed",
                "amount": "19.99",
                "currency": "EUR",
                "country": "DE",
            }
            if value == "MISSING":
                del rec[field]
            else:
                rec[field] = value
            text = json.dumps(rec, separators=(",", ":"))
            feed.specials.append(text.replace('"@1e3"', "1e3").replace('"@1.234"', "1.234"))
        good = feed.specials[-1]  # the last variant, cut in half below
        feed.specials += [good[: len(good) // 2], f'["{ymd}",12.5]', "null", '"placed"']
    bucket = feed.buckets[0]
    for text in feed.specials:
        bucket.insert(int(rng.random() * (len(bucket) + 1)), text)


def _resend(rng: random.Random, feed: _DayFeed, n: int) -> None:
    """The exact same line again, later in the same arrival or in a later one."""
    rnd = rng.random
    for _ in range(max(2, n // 100)):
        offset = int(rnd() * 3)
        source = feed.buckets[offset]
        if source:
            feed.resends[min(offset + int(rnd() * 3), feed.cap)].append(
                source[int(rnd() * len(source))]
            )


def _write_lines(path: Path, lines: list[str], rng: random.Random) -> None:
    """One landed file; some are CRLF, some carry blank lines, some lack the final newline."""
    rnd = rng.random
    if rnd() < 0.15:
        lines = list(lines)
        for blank in ("", "  \t")[: 1 + int(rnd() * 2)]:
            lines.insert(int(rnd() * (len(lines) + 1)), blank)
    eol = "\r\n" if rnd() < 0.12 else "\n"
    text = eol.join(lines) + ("" if rnd() < 0.05 else eol)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def _write_day(root: Path, feed: _DayFeed, rng: random.Random) -> tuple[int, int]:
    """Writes the day's files into their arrival folders; returns (files, records)."""
    ymd = feed.day.strftime("%Y%m%d")
    files = records = 0
    for offset, bucket in enumerate(feed.buckets):
        lines = bucket + feed.resends[offset]
        if not lines:
            continue
        folder = root / DATASETS[ORDERS_DATASET].relative_folder(feed.day + timedelta(days=offset))
        folder.mkdir(parents=True, exist_ok=True)
        parts = 1 if offset else (1, 1, 1, 2, 2, 3)[int(rng.random() * 6)]
        size = -(-len(bucket) // parts)
        chunks = [bucket[k * size : (k + 1) * size] for k in range(parts)]
        chunks[-1] = chunks[-1] + feed.resends[offset]
        for chunk in chunks:
            files += 1
            records += len(chunk)
            _write_lines(folder / f"orders-{ymd}-{files:02d}.jsonl", chunk, rng)
        prefix = {3: ".", 6: "_"}.get(feed.day.weekday()) if offset == 0 else None
        if prefix:  # Thursdays and Sundays a file is caught still being written: to be ignored
            partial = [*lines[:3], lines[-1][:20]]
            _write_lines(folder / f"{prefix}orders-{ymd}-99.jsonl", partial, rng)
    return files, records


def _write_rates(root: Path, day: date, seed: int) -> int:
    """Weekday rate files; Wednesdays omit one currency, Tuesdays add a correcting second file."""
    if day.weekday() >= 5:
        return 0
    rng = random.Random(f"{seed}/fx_rates/{day.isoformat()}")
    rates = {cur: usd * (1 + 0.02 * (rng.random() - 0.5)) for cur, usd in _USD_PER_UNIT.items()}
    omitted = rng.choice(sorted(rates)) if day.weekday() == 2 else None
    corrected = rng.choice(sorted(rates))
    folder = root / DATASETS[FX_RATES_DATASET].relative_folder(day)
    folder.mkdir(parents=True, exist_ok=True)
    lines = [FX_HEADER] + [f"{c},{_rate_text(r)}" for c, r in rates.items() if c != omitted]
    (folder / "fx-rates-1.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if day.weekday() != 1:
        return 1
    fixed = f"{corrected},{_rate_text(rates[corrected] * 1.004)}"
    (folder / "fx-rates-2.csv").write_text(f"{FX_HEADER}\n{fixed}\n", encoding="utf-8")
    return 2


def _rate_text(usd_per_unit: float) -> str:
    return f"{usd_per_unit:.8f}" if usd_per_unit < 0.1 else f"{usd_per_unit:.6f}"


def _order_days(
    root: Path,
    days: list[date],
    n: int,
    seed: int,
    ml: int,
    last_arrival: date | None = None,
    hot: float = 0.0,
) -> tuple[int, int, int]:
    """Generates and writes the orders of some event days; returns (files, records, rejected)."""
    tables = _Tables()
    files = records = rejected = 0
    for day in days:
        rng = random.Random(f"{seed}/orders/{day.isoformat()}")
        feed = _DayFeed(day, ml)
        _orders(rng, feed, n, tables, hot)
        _resend(rng, feed, n)
        _specials(rng, feed, n, tables)
        if last_arrival is not None:  # after the RNG draws: the days' other files stay the same
            _withhold_after(feed, last_arrival)
        day_files, day_records = _write_day(root, feed, rng)
        files, records = files + day_files, records + day_records
        rejected += feed.rejected()
    return files, records, rejected


def _withhold_after(feed: _DayFeed, last_arrival: date) -> None:
    """Drops the lines that would arrive after ``last_arrival``: they have not landed yet."""
    for offset in range(feed.cap + 1):
        if feed.day + timedelta(days=offset) > last_arrival:
            feed.buckets[offset].clear()
            feed.resends[offset].clear()


def generate_feed(
    landing_root: str | os.PathLike[str],
    start: date,
    end: date,
    orders_per_day: int = 200,
    seed: int = 7,
    max_lateness_days: int = 7,
    last_arrival: date | None = None,
    hot_customer_share: float = 0.0,
) -> FeedSummary:
    """Writes the orders of event days [start, end] and the rates of [start - 3, end].

    Arrival folders reach up to ``end + max_lateness_days + 3`` (records that come too
    late), or only up to ``last_arrival`` when given: the feed as of that day (the demo's
    is as of yesterday), the later arrivals not landed yet. Existing files of the same
    names are overwritten; nothing else is touched. ``hot_customer_share`` of the orders are
    placed by one customer, ``HOT_CUSTOMER`` (a skewed partition key).
    """
    if end < start or orders_per_day < 1 or max_lateness_days < 0:
        raise ValueError("need start <= end, orders_per_day >= 1, max_lateness_days >= 0")
    if not 0 <= hot_customer_share < 1:
        raise ValueError("hot_customer_share must be in [0, 1)")
    if last_arrival is not None and last_arrival < end:
        raise ValueError("last_arrival must not be before end: every event day lands on its day")
    if is_s3(landing_root):  # written here, then landed object by object
        with tempfile.TemporaryDirectory(prefix="feed-") as folder:
            summary = generate_feed(
                folder,
                start,
                end,
                orders_per_day,
                seed,
                max_lateness_days,
                last_arrival,
                hot_customer_share,
            )
            for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
                put_landed(landing_root, path.relative_to(folder).as_posix(), path.read_bytes())
            return summary
    root = Path(landing_root)
    days = days_between(start, end)
    files, records, rejected = _order_days(
        root, days, orders_per_day, seed, max_lateness_days, last_arrival, hot_customer_share
    )
    rate_files = sum(
        _write_rates(root, start + timedelta(days=k), seed) for k in range(-3, len(days))
    )
    return FeedSummary(start, end, files, rate_files, records, rejected)


def remove_rates(
    landing_root: str | os.PathLike[str], currency: str, start: date, end: date
) -> int:
    """Deletes ``currency``'s lines from the rate files of [start, end]; returns how many.

    A test and demo tool for "a day lacking an FX rate": it rewrites landed files,
    which the landing contract itself never does.
    """
    removed = 0
    for folder in sorted((Path(landing_root) / "fx_rates").glob("rate_date=*")):
        if not start.isoformat() <= folder.name.split("=", 1)[1] <= end.isoformat():
            continue
        for path in sorted(folder.glob("*.csv")):
            lines = path.read_text(encoding="utf-8").split("\n")
            kept = [line for line in lines if line.split(",", 1)[0] != currency]
            if len(kept) != len(lines):
                removed += len(lines) - len(kept)
                path.write_text("\n".join(kept), encoding="utf-8")
    return removed


RESTATED_PREFIX = "fx-rates-9-restated-"
RESTATED_FILE = RESTATED_PREFIX + "{n}.csv"  # sorts after the day's other files, so it wins


def restate_rates(
    landing_root: str | os.PathLike[str], currency: str, start: date, end: date, factor: Decimal
) -> int:
    """A provider's restatement: for every rate date of [start, end] that lists ``currency``,
    a new file (landed beside the originals, which are never changed) with its rate times
    ``factor``. Returns the files written."""
    written = 0
    ds = DATASETS[FX_RATES_DATASET]
    by_day: dict[date, list[str]] = {}
    for f in list_landing_files(landing_root, FX_RATES_DATASET, days_between(start, end)):
        by_day.setdefault(f.partition, []).append(f.relative_path)
    for day, paths in sorted(by_day.items()):
        rate = None
        for relative in paths:  # sorted by name: the last file listing the currency wins
            with open_landed(join(landing_root, relative)) as src:
                text = src.read().decode("utf-8")
            for line in text.splitlines()[1:]:
                cur, _, value = line.partition(",")
                if cur == currency:
                    rate = Decimal(value)
        if rate is not None:
            restated = (rate * factor).quantize(Decimal("0.00000001"))
            taken = sum(1 for p in paths if p.rsplit("/", 1)[1].startswith(RESTATED_PREFIX))
            name = RESTATED_FILE.format(n=taken + 1)
            data = f"{FX_HEADER}\n{currency},{restated}\n".encode()
            put_landed(landing_root, f"{ds.relative_folder(day)}/{name}", data)
            written += 1
    return written
