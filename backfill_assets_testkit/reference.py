"""Test oracle: an independent, literal pure-Python reading of docs/contract.md.

It shares no code with ``backfill_assets``; the pipeline's tables are compared
with what this module computes from the same landing zone. Where the contract
is silent, the choice made here is stated next to the code that makes it.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, localcontext
from pathlib import Path
from typing import TypedDict

FIELDS = (
    "order_id",
    "customer_id",
    "event_time",
    "updated_at",
    "status",
    "amount",
    "currency",
    "country",
)
STATUSES = ("placed", "paid", "cancelled")
# The contract's rejection reasons, in the order they are checked.
REASONS = ("malformed_json", "missing_field", "invalid_value", "future_event", "too_late")
RATE_HEADER = "currency,usd_per_unit"
CENT = Decimal("0.01")
MONEY_BOUND = Decimal("1e16")  # the least amount DECIMAL(18,2) cannot hold
RATE_QUANTUM = Decimal("0.00000001")

_AMOUNT = re.compile(r"\d{1,12}(\.\d{1,2})?", re.ASCII)
_RATE = re.compile(r"\d{1,6}(\.\d{1,8})?", re.ASCII)
_CURRENCY = re.compile(r"[A-Z]{3}", re.ASCII)
_COUNTRY = re.compile(r"[A-Z]{2}", re.ASCII)
_FOLDER_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
# Seconds and fraction optional; the zone is required and written `Z` or `±HH:MM`
# (upper-case `T` and `Z` only). A fraction has 1-9 digits, like java.time, and
# is truncated to microseconds, the precision of a Spark TIMESTAMP.
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?"
    r"(?:Z|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


@dataclass(frozen=True, order=True)
class RawRow:
    arrival_date: date
    source_file: str
    line_number: int
    payload: str


@dataclass(frozen=True, order=True)
class QuarantineRow:
    arrival_date: date
    source_file: str
    line_number: int
    reason: str
    payload: str


@dataclass(frozen=True, order=True)
class StagingRow:
    order_id: str
    customer_id: str
    event_time: datetime
    event_date: date
    updated_at: datetime
    status: str
    amount: Decimal
    currency: str
    country: str
    usd_per_unit: Decimal
    amount_usd: Decimal


@dataclass(frozen=True, order=True)
class FactRow:
    event_date: date
    country: str
    orders: int
    placed_orders: int
    paid_orders: int
    cancelled_orders: int
    revenue_usd: Decimal


class Order(TypedDict):
    """The typed order fields of a valid record."""

    order_id: str
    customer_id: str
    event_time: datetime
    event_date: date
    updated_at: datetime
    status: str
    amount: Decimal
    currency: str
    country: str


@dataclass(frozen=True)
class Record:
    """One landed record and the contract's verdict on it."""

    raw: RawRow
    reason: str | None
    fields: Order | None = None  # typed order fields of a valid record

    @property
    def order(self) -> Order:
        """The typed order fields, which only a valid record (no reason) has."""
        assert self.fields is not None, f"rejected ({self.reason}), no order: {self.raw}"
        return self.fields


@dataclass(frozen=True)
class Expected:
    """Every table of the contract for a set of dates (arrival dates for raw/quarantine)."""

    raw_orders: list[RawRow]
    quarantine: list[QuarantineRow]
    staging: list[StagingRow]
    held: set[date]
    fact: list[FactRow]


class _JsonNumber:
    """A JSON number kept as its source text, so `1e3` and `12.5` stay what was written."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _JsonObject(dict):
    duplicate_keys = False


def _object(pairs: list[tuple[str, object]]) -> _JsonObject:
    obj = _JsonObject(pairs)
    obj.duplicate_keys = len(obj) != len(pairs)
    return obj


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # Python accepts NaN/Infinity; JSON does not


def parse_json_object(line: str) -> dict[str, object] | None:
    """The line as a JSON object, or None when it is not one.

    Contract silence: an object repeating a top-level key is not taken to be a
    JSON object (which of the values counts would be a guess): malformed_json.
    """
    try:
        value = json.loads(
            line,
            parse_float=_JsonNumber,
            parse_int=_JsonNumber,
            parse_constant=_no_constant,
            object_pairs_hook=_object,
        )
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, _JsonObject) or value.duplicate_keys:
        return None
    return value


def parse_timestamp(text: object) -> datetime | None:
    """ISO 8601 date-time with a zone as an aware UTC datetime, or None if it is not one."""
    if not isinstance(text, str):
        return None
    m = _TIMESTAMP.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction, sign, off_h, off_m = m.groups()
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    offset = timedelta(hours=int(off_h or 0), minutes=int(off_m or 0))
    # ±18:00 is the widest offset java.time, and so Spark, accepts
    if offset > timedelta(hours=18) or int(off_m or 0) > 59:
        return None
    try:
        local = datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second or 0),
            micros,
            tzinfo=UTC,
        )
        return local + offset if sign == "-" else local - offset
    except (ValueError, OverflowError):
        return None


def _amount_text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, _JsonNumber):
        return value.text
    return None


def judge(line: str, arrival: date, max_lateness_days: int) -> tuple[str | None, Order | None]:
    """The first rejection reason that applies to a record, or (None, typed fields)."""
    obj = parse_json_object(line)
    if obj is None:
        return "malformed_json", None
    if any(obj.get(name) is None or obj.get(name) == "" for name in FIELDS):
        return "missing_field", None
    event_time, updated_at = parse_timestamp(obj["event_time"]), parse_timestamp(obj["updated_at"])
    amount = _amount_text(obj["amount"])
    order_id, customer_id, status = obj["order_id"], obj["customer_id"], obj["status"]
    currency, country = obj["currency"], obj["country"]
    if not (
        isinstance(order_id, str)
        and len(order_id) <= 64
        and isinstance(customer_id, str)
        and event_time is not None
        and updated_at is not None
        and isinstance(status, str)
        and status in STATUSES
        and amount is not None
        and _AMOUNT.fullmatch(amount) is not None
        and isinstance(currency, str)
        and _CURRENCY.fullmatch(currency) is not None
        and isinstance(country, str)
        and _COUNTRY.fullmatch(country) is not None
    ):
        return "invalid_value", None
    event_date = event_time.date()
    if event_date > arrival:
        return "future_event", None
    if (arrival - event_date).days > max_lateness_days:
        return "too_late", None
    return None, Order(
        order_id=order_id,
        customer_id=customer_id,
        event_time=event_time,
        event_date=event_date,
        updated_at=updated_at,
        status=status,
        amount=Decimal(amount).quantize(CENT),
        currency=currency,
        country=country,
    )


def records_of(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every record: split on LF, one trailing CR dropped, blanks skipped."""
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        # "Only whitespace" as Python's str.isspace() knows it (NBSP, U+2028, ... included)
        if line and not line.isspace():
            out.append((number, line))
    return out


def _dated_folders(parent: Path, key: str) -> dict[date, Path]:
    """`key=YYYY-MM-DD` folders; a folder named otherwise is not part of the landing zone."""
    found: dict[date, Path] = {}
    for folder in parent.glob(f"{key}=*") if parent.is_dir() else ():
        text = folder.name[len(key) + 1 :]
        if folder.is_dir() and _FOLDER_DATE.fullmatch(text):
            try:
                found[date.fromisoformat(text)] = folder
            except ValueError:
                continue
    return found


def _landed_files(folder: Path, suffix: str) -> list[Path]:
    """Finished files, by name: `_` and `.` files are still being written."""
    return sorted(
        (
            p
            for p in folder.iterdir()
            if p.is_file() and p.name.endswith(suffix) and not p.name.startswith(("_", "."))
        ),
        key=lambda p: p.name,
    )


def _read(path: Path) -> str:
    # Contract silence on encoding: files are UTF-8; an undecodable file is an error
    # of the oracle's input, not a record to judge, so it raises.
    return path.read_bytes().decode("utf-8")


def _rate_lines(path: Path) -> list[tuple[str, Decimal]]:
    """(currency, usd_per_unit) per valid line, in file order.

    Contract silence: a file whose first line is not the header lists nothing; a
    line that breaks a rule (field count, pattern, > 0; no CSV quoting or spaces)
    lists nothing, so the currency falls back to an earlier file or date.
    """
    lines = [line for _, line in records_of(_read(path))]
    if not lines or lines[0] != RATE_HEADER:
        return []
    out = []
    for line in lines[1:]:
        parts = line.split(",")
        if (
            len(parts) == 2
            and _CURRENCY.fullmatch(parts[0])
            and _RATE.fullmatch(parts[1])
            and Decimal(parts[1]) > 0
        ):
            out.append((parts[0], Decimal(parts[1])))
    return out


class Reference:
    """The contract's tables computed from a landing zone, read once and cached."""

    def __init__(self, landing_root: str | Path, max_lateness_days: int = 7) -> None:
        self.root = Path(landing_root)
        self.max_lateness_days = max_lateness_days
        self._arrivals = _dated_folders(self.root / "orders", "arrival_date")
        self._records: dict[date, list[Record]] = {}
        self._rates: dict[date, dict[str, Decimal]] = {}
        for rate_date, folder in _dated_folders(self.root / "fx_rates", "rate_date").items():
            listed: dict[str, Decimal] = {}
            for path in _landed_files(folder, ".csv"):
                listed.update(_rate_lines(path))  # later file, later line: wins
            self._rates[rate_date] = listed

    @property
    def arrival_dates(self) -> list[date]:
        """The arrival dates whose folder has landed, empty or not."""
        return sorted(self._arrivals)

    def records(self, arrival: date) -> list[Record]:
        """Every record landed with this arrival date, with its verdict."""
        if arrival not in self._records:
            out = []
            folder = self._arrivals.get(arrival)
            for path in _landed_files(folder, ".jsonl") if folder else ():
                source = path.relative_to(self.root).as_posix()
                for number, line in records_of(_read(path)):
                    reason, fields = judge(line, arrival, self.max_lateness_days)
                    out.append(Record(RawRow(arrival, source, number, line), reason, fields))
            self._records[arrival] = out
        return self._records[arrival]

    def raw_orders(self, arrival_dates) -> list[RawRow]:
        return sorted(r.raw for a in set(arrival_dates) for r in self.records(a))

    def quarantine(self, arrival_dates) -> list[QuarantineRow]:
        return sorted(
            QuarantineRow(
                r.raw.arrival_date, r.raw.source_file, r.raw.line_number, r.reason, r.raw.payload
            )
            for a in set(arrival_dates)
            for r in self.records(a)
            if r.reason
        )

    def rate(self, currency: str, day: date) -> Decimal | None:
        """usd_per_unit of the greatest rate_date R <= day, day - R <= 7, that lists it."""
        if currency == "USD":
            return Decimal(1).quantize(RATE_QUANTUM)
        for back in range(8):
            listed = self._rates.get(day - timedelta(days=back), {})
            if currency in listed:
                return listed[currency].quantize(RATE_QUANTUM)
        return None

    def latest_versions(self, event_date: date) -> dict[str, Record]:
        """Per order_id, the valid record of the event date that is greatest by
        (updated_at instant, arrival date, source_file, line_number)."""
        best: dict[str, tuple[tuple, Record]] = {}
        for back in range(self.max_lateness_days + 1):
            for rec in self.records(event_date + timedelta(days=back)):
                if rec.reason is None and rec.order["event_date"] == event_date:
                    key = (
                        rec.order["updated_at"],
                        rec.raw.arrival_date,
                        rec.raw.source_file,
                        rec.raw.line_number,
                    )
                    oid = rec.order["order_id"]
                    if oid not in best or key > best[oid][0]:
                        best[oid] = (key, rec)
        return {oid: rec for oid, (_, rec) in best.items()}

    def staging(self, event_dates) -> tuple[list[StagingRow], set[date]]:
        """Staging rows of the dates that can publish, and the dates held: for an order without
        a rate, or whose amount_usd does not fit DECIMAL(18,2)."""
        rows, held = [], set()
        for day in sorted(set(event_dates)):
            day_rows = []
            for rec in self.latest_versions(day).values():
                f = rec.order
                rate = self.rate(f["currency"], day)
                if rate is None:
                    held.add(day)
                    break
                with localcontext() as ctx:
                    ctx.prec = 60
                    amount_usd = (f["amount"] * rate).quantize(CENT, rounding=ROUND_HALF_UP)
                if amount_usd >= MONEY_BOUND:  # does not fit DECIMAL(18,2): the day fails
                    held.add(day)
                    break
                day_rows.append(
                    StagingRow(
                        f["order_id"],
                        f["customer_id"],
                        f["event_time"],
                        day,
                        f["updated_at"],
                        f["status"],
                        f["amount"],
                        f["currency"],
                        f["country"],
                        rate,
                        amount_usd,
                    )
                )
            else:
                rows.extend(day_rows)
        return sorted(rows), held

    def fact(self, event_dates) -> list[FactRow]:
        return fact_rows(self.staging(event_dates)[0])

    def expected(self, dates) -> Expected:
        dates = set(dates)
        staging, held = self.staging(dates)
        return Expected(
            self.raw_orders(dates), self.quarantine(dates), staging, held, fact_rows(staging)
        )


def fact_rows(staging: list[StagingRow]) -> list[FactRow]:
    """Counts of staging orders by final status per (event date, country); paid revenue."""
    groups: dict[tuple[date, str], list[StagingRow]] = defaultdict(list)
    for row in staging:
        groups[(row.event_date, row.country)].append(row)
    out = []
    for (day, country), rows in groups.items():
        counts = {s: sum(1 for r in rows if r.status == s) for s in STATUSES}
        revenue = sum((r.amount_usd for r in rows if r.status == "paid"), Decimal("0.00"))
        out.append(
            FactRow(
                day,
                country,
                len(rows),
                counts["placed"],
                counts["paid"],
                counts["cancelled"],
                revenue.quantize(CENT),
            )
        )
    return sorted(out)


def expected(landing_root: str | Path, dates, max_lateness_days: int = 7) -> Expected:
    """All contract tables for `dates` (as arrival dates for raw and quarantine, as event
    dates for staging and fact) from the landing zone at `landing_root`."""
    return Reference(landing_root, max_lateness_days).expected(dates)


def customer_ltv(reference: Reference, first: date, last: date) -> tuple[set[tuple], date | None]:
    """The contract extension's fact/customer_ltv rows of the days ``first`` .. ``last`` that
    can be built, by its sequential definition: walk the staging day by day, adding each
    customer's orders of the day to their running totals; every day from the first held
    staging day on is held. Rows are (as_of_date, customer_id, orders, paid_orders,
    lifetime_revenue_usd, first_order_date, last_order_date); also the first held day."""
    span = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    staging, held = reference.staging(span)
    first_held = min(held) if held else None
    by_day: dict[date, list[StagingRow]] = defaultdict(list)
    for row in staging:
        by_day[row.event_date].append(row)
    state: dict[str, list] = {}
    rows = set()
    for day in span:
        if first_held is not None and day >= first_held:
            break
        for customer in sorted({r.customer_id for r in by_day[day]}):
            mine = [r for r in by_day[day] if r.customer_id == customer]
            paid = [r for r in mine if r.status == "paid"]
            totals = state.setdefault(customer, [0, 0, Decimal("0.00"), day])
            totals[0] += len(mine)
            totals[1] += len(paid)
            totals[2] += sum((r.amount_usd for r in paid), Decimal("0.00"))
            rows.add((day, customer, totals[0], totals[1], totals[2], totals[3], day))
    return rows, first_held
