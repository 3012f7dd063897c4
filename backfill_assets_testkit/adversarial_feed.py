"""An adversarial feed: the generated one, plus on every arrival day a file of lines at the
contract's edges, a fixed share of the day's records.

    .venv/bin/python backfill_assets_testkit/adversarial_feed.py LANDING --start 2024-01-01 \\
        --days 20 --orders-per-day 20000

``generate_feed``'s orders and rates, then in each arrival folder ``orders-zz-adversarial.jsonl``
(its name sorts after the generated files', so its versions win the ties they enter) with
``share`` (5%) as many lines as the day's generated records, at least one of each kind, the
kinds in turn: repeated keys, malformed JSON of every sort, NaN amounts, number texts such as
12.500 and 1e3, timestamps with offsets and 7 fractional digits, minute-precision times,
64- and 65-character ids, escaped keys, deep nesting, invalid UTF-8 bytes, whitespace lines,
CRLF and CR CR LF endings, and versions of the day's generated orders that tie with them (the
same instant in another zone, or less than a microsecond later) or follow them by one
microsecond. Some valid lines are easy to get wrong: a key repeated deeper down (only the
object's own keys count), a 1,500-digit number in a field beyond the contract (past Jackson's
default limit), an ``amount`` key spelled with an escape and given a number. What each line is
worth is the reference's to say (``backfill_assets_tests``); the comments name the intent.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from backfill_assets.demo.generate import FeedSummary, generate_feed

SHARE = 0.05  # adversarial lines per generated record of the same arrival day
FILE_NAME = "orders-zz-adversarial.jsonl"
PAIRS = (("EUR", "DE"), ("GBP", "GB"), ("USD", "US"), ("JPY", "JP"), ("BRL", "BR"), ("INR", "IN"))


@dataclass(frozen=True)
class AdversarialFeed:
    """What ``land_adversarial_feed`` wrote: the generated feed, and the adversarial files and
    lines (blank ones included) added to it."""

    feed: FeedSummary
    files: int
    lines: int


@dataclass
class _Day:
    """What a line of one arrival day is made from."""

    arrival: date
    lateness: int
    first: date  # the feed's event days: a valid line's event day is one of them
    last: date
    originals: list[dict]  # generated valid orders that arrived this day, to tie with
    serial: int = 0

    def oid(self, width: int = 0) -> str:
        self.serial += 1
        text = f"ADV-{self.arrival:%Y%m%d}-{self.serial:06d}"
        return text + "X" * max(0, width - len(text))

    def event_day(self, back: int = 1) -> date:
        """``back`` days before the arrival, within the lateness and the feed's event days."""
        day = self.arrival - timedelta(days=min(back, self.lateness))
        return min(self.last, max(self.first, day))


def _q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _order(
    day: _Day,
    *,
    oid: str | None = None,
    customer: str = '"C77777"',
    event: str | None = None,
    updated: str | None = None,
    status: str = '"paid"',
    amount: str = '"19.99"',
    pair: tuple[str, str] = PAIRS[0],
    extra: str = "",
    keys: tuple[str, ...] = (),
) -> str:
    """A record with each value given as raw JSON text (``oid`` as plain text); ``keys``
    replaces the field names, in order, as written (escaped, say)."""
    event = event or _q(f"{day.event_day()}T10:15:30Z")
    names = keys or ("order_id", "customer_id", "event_time", "updated_at", "status", "amount")
    values = (_q(oid or day.oid()), customer, event, updated or event, status, amount)
    body = ",".join(f'"{name}":{value}' for name, value in zip(names, values, strict=True))
    return f'{{{body},"currency":"{pair[0]}","country":"{pair[1]}"{extra}}}'


def _tie(day: _Day, k: int, how: str) -> str:
    """A version of one of the day's generated orders: ``zone`` the same updated_at instant in
    another zone, ``submicro`` 0.9 microseconds later (the same instant, to the microsecond),
    ``micro`` one microsecond later; its status changed."""
    if not day.originals:
        return _order(day, updated=_q(f"{day.event_day()}T10:15:30.0000009Z"))
    original = dict(day.originals[k % len(day.originals)])
    instant = _instant(original["updated_at"])
    assert instant is not None  # the originals are chosen so
    if how == "zone":
        text = instant.astimezone(timezone(timedelta(hours=-3, minutes=-30))).isoformat()
    elif how == "submicro":
        text = f"{instant:%Y-%m-%dT%H:%M:%S}.{instant.microsecond:06d}9Z"
    else:
        text = (instant + timedelta(microseconds=1)).isoformat().replace("+00:00", "Z")
    original["updated_at"] = text
    original["status"] = "cancelled" if original["status"] != "cancelled" else "paid"
    return json.dumps(original, separators=(",", ":"))


def _instant(text: object) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo else None


Kind = Callable[[_Day, int], str | bytes]


def _at(day: _Day, back: int, clock: str) -> str:
    return _q(f"{day.event_day(back)}T{clock}")


def _nested(depth: int) -> str:
    return ',"deep":' + '{"a":' * depth + "1" + "}" * depth


KINDS: tuple[Kind, ...] = (
    # valid: number texts as the contract reads them
    lambda d, k: _order(d, amount="12.5", pair=PAIRS[k % 6]),
    lambda d, k: _order(d, amount="100", pair=PAIRS[(k + 1) % 6]),
    lambda d, k: _order(d, amount="0.05"),  # its amount_usd rounds half-up to the cent
    lambda d, k: _order(d, amount='"007"'),
    lambda d, k: _order(d, amount='"999999.99"', pair=PAIRS[3]),
    # valid: timestamps at the edges of the format
    lambda d, k: _order(d, event=_at(d, 1, "10:15:30.1234567+05:30")),
    lambda d, k: _order(d, event=_at(d, 1, "23:30:00.9999999-00:29")),
    lambda d, k: _order(d, event=_at(d, 0, "10:05Z"), updated=_at(d, 0, "11:05+01:00")),
    lambda d, k: _order(d, event=_q(f"{d.event_day(1) + timedelta(days=1)}T17:00:00+18:00")),
    lambda d, k: _order(d, event=_at(d, 1, "20:00:00-05:00")),  # the next UTC day
    lambda d, k: _order(d, event=_at(d, 2, "00:00:00.000001+00:00")),
    # valid: ids, escapes, unicode, whitespace, nesting, fields beyond the contract
    lambda d, k: _order(d, oid=d.oid(64)),
    lambda d, k: _order(
        d,
        keys=(
            "order\\u005fid",
            "\\u0063ustomer_id",
            "event_time",
            "updated_at",
            "st\\u0061tus",
            "amount",
        ),
    ),
    lambda d, k: _order(
        d,
        amount="12.5",
        keys=("order_id", "customer_id", "event_time", "updated_at", "status", "\\u0061mount"),
    ),
    lambda d, k: _order(d, customer='"C😀é"'),
    lambda d, k: _order(d, customer='"C\\ud83d\\ude00\\u0000"'),
    lambda d, k: _order(d, customer='" "'),
    lambda d, k: " \t" + json.dumps(json.loads(_order(d)), separators=(" , ", " :\t")) + " ",
    lambda d, k: _order(d, extra=',"meta":{"a":[1,{"b":null}],"c":{"d":"}]{["},"e":[]}'),
    lambda d, k: _order(d, extra=',"meta":{"x":1,"x":2}'),  # repeated deeper down: valid
    lambda d, k: _order(d, extra=_nested(200)),
    lambda d, k: _order(d, extra=',"note":"NaN, Infinity, ]} 1e3"'),
    lambda d, k: _order(d, extra=',"big":' + "9" * 1500),  # past Jackson's 1,000 digits
    lambda d, k: _order(d, customer='"12"'),  # a string of digits is a string
    # valid: versions of generated orders, and of one of this file's
    lambda d, k: _tie(d, k, "zone"),
    lambda d, k: _tie(d, k, "submicro"),
    lambda d, k: _tie(d, k, "micro"),
    lambda d, k: _order(d, oid=f"ADV-{d.arrival:%Y%m%d}-SAME", status='"placed"'),
    lambda d, k: _order(d, oid=f"ADV-{d.arrival:%Y%m%d}-SAME", status='"cancelled"'),
    # malformed_json
    lambda d, k: _order(d, extra=',"status":"placed"'),
    lambda d, k: _order(d, extra=',"order\\u005fid":"ADV-OTHER"'),
    lambda d, k: _order(d, amount="NaN"),
    lambda d, k: _order(d, amount="-Infinity"),
    lambda d, k: _order(d, amount="012"),
    lambda d, k: _order(d).replace("}", ",}"),
    lambda d, k: _order(d).replace('"', "'"),
    lambda d, k: _order(d)[: 40 + k % 60],
    lambda d, k: "[" + _order(d) + "]",
    lambda d, k: "null",
    lambda d, k: '"placed"',
    lambda d, k: "\ufeff" + _order(d),
    lambda d, k: _order(d) + " x",
    lambda d, k: _order(d) + "]",
    lambda d, k: _order(d) + "{}",
    lambda d, k: _order(d, extra=',"1":2').replace('"1"', "1"),
    lambda d, k: _order(d, extra=_nested(1200)),
    lambda d, k: _order(d, customer='"C\x00"'),
    lambda d, k: _order(d, customer='"C\t1"'),
    lambda d, k: _order(d, customer='"C\\x41"'),
    lambda d, k: _order(d, customer='"C\udcff"').encode("utf-8", "surrogateescape"),
    lambda d, k: _order(d, customer='"C"').encode().replace(b'"C"', b'"C\xe2\x82"'),
    lambda d, k: _order(d, customer='"C"').encode().replace(b'"C"', b'"C\xed\xa0\x80"'),
    lambda d, k: _order(d, customer='"C"').encode().replace(b'"C"', b'"\xc0\xafC\xf4\x90\x80\x80"'),
    # missing_field
    lambda d, k: _order(d, oid="-").replace('"-"', '""'),
    lambda d, k: _order(d, customer="null"),
    lambda d, k: _order(d).replace(',"country":"DE"', ""),
    # invalid_value
    lambda d, k: _order(d, amount="12.500"),
    lambda d, k: _order(d, amount="1e3"),
    lambda d, k: _order(d, amount="1.0E2"),
    lambda d, k: _order(d, amount="-0"),
    lambda d, k: _order(d, amount='"12.500"'),
    lambda d, k: _order(d, amount='"1,50"'),
    lambda d, k: _order(d, amount='"1234567890123"'),
    lambda d, k: _order(d, pair=("EUR\\n", "DE")),
    lambda d, k: _order(d, pair=("eur", "DE")),
    lambda d, k: _order(d, pair=("EUR", "DEU")),
    lambda d, k: _order(d, status='"Paid"'),
    lambda d, k: _order(d, oid=d.oid(65)),
    lambda d, k: _order(d, oid="@").replace('"@"', "12345"),
    lambda d, k: _order(d, customer="48213"),
    lambda d, k: _order(d, customer='["C1"]'),
    lambda d, k: _order(d, event=_at(d, 1, "10:15:30Z").replace("T", "t")),
    lambda d, k: _order(d, event=_at(d, 1, "24:00:00Z")),
    lambda d, k: _order(d, event=_at(d, 1, "10:15:60Z")),
    lambda d, k: _order(d, event=_at(d, 1, "10:15:30+18:01")),
    lambda d, k: _order(d, event=_at(d, 1, "10:15:30+0530")),
    lambda d, k: _order(d, event=_at(d, 1, "10:15:30")),
    lambda d, k: _order(d, event=_at(d, 1, "10:15:30.1234567890Z")),
    lambda d, k: _order(d, event=_at(d, 1, "10:05.5Z")),
    lambda d, k: _order(d, event=_at(d, 1, "10:15:30Z").replace("T", " ")),
    lambda d, k: _order(d, event='"0000-01-01T10:00:00Z"'),
    lambda d, k: _order(d, event='"2023-02-29T10:00:00Z"'),
    lambda d, k: _order(d, event='"0001-01-01T00:00:00+00:01"'),
    # future_event, too_late
    lambda d, k: _order(d, event=_q(f"{d.arrival + timedelta(days=1)}T00:00:00Z")),
    lambda d, k: _order(d, event=_q(f"{d.arrival - timedelta(days=d.lateness + 1)}T23:59:59Z")),
    # blank: numbered, not records
    lambda d, k: "",
    lambda d, k: " \t ",
    lambda d, k: "\u00a0\u2028\u3000",
)


def _originals(folder: Path, arrival: date, lateness: int, rng: random.Random) -> list[dict]:
    """Up to 64 of the generated valid orders that landed in ``folder``."""
    found = []
    for path in sorted(folder.glob("orders-*.jsonl")):
        if path.name == FILE_NAME:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not (
                isinstance(record, dict) and str(record.get("order_id", "")).startswith("TWS-")
            ):
                continue
            event, updated = _instant(record.get("event_time")), _instant(record.get("updated_at"))
            if event and updated and 0 <= (arrival - event.date()).days <= lateness:
                found.append(record)
    return rng.sample(found, min(64, len(found)))


def _records_in(folder: Path) -> int:
    return sum(
        sum(1 for line in path.read_bytes().split(b"\n") if line.strip())
        for path in folder.glob("orders-*.jsonl")
        if path.name != FILE_NAME
    )


def land_adversarial_feed(
    root: str | Path,
    start: date,
    days: int,
    orders_per_day: int,
    seed: int = 7,
    share: float = SHARE,
    max_lateness_days: int = 7,
) -> AdversarialFeed:
    """``generate_feed`` of the ``days`` event days from ``start``, then one adversarial file in
    each arrival folder: ``share`` of the folder's generated records, at least one line of each
    of ``KINDS``, taken in turn."""
    root, last = Path(root), start + timedelta(days=days - 1)
    feed = generate_feed(root, start, last, orders_per_day, seed, max_lateness_days)
    files = lines = 0
    for folder in sorted((root / "orders").glob("arrival_date=*")):
        arrival = date.fromisoformat(folder.name.split("=", 1)[1])
        rng = random.Random(f"{seed}/adversarial/{arrival.isoformat()}")
        originals = _originals(folder, arrival, max_lateness_days, rng)
        day = _Day(arrival, max_lateness_days, start, last, originals)
        count = max(len(KINDS), round(share * _records_in(folder)))
        out = []
        for k in range(count):
            line = KINDS[k % len(KINDS)](day, k)
            data = line.encode("utf-8") if isinstance(line, str) else line
            out.append(data + (b"\r\n", b"\n", b"\r\r\n", b"\n")[k % 4])
        (folder / FILE_NAME).write_bytes(b"".join(out))
        files, lines = files + 1, lines + count
    return AdversarialFeed(feed, files, lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("landing", type=Path)
    p.add_argument("--start", type=date.fromisoformat, required=True)
    p.add_argument("--days", type=int, required=True)
    p.add_argument("--orders-per-day", type=int, default=20_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--share", type=float, default=SHARE)
    args = p.parse_args(argv)
    made = land_adversarial_feed(
        args.landing, args.start, args.days, args.orders_per_day, args.seed, args.share
    )
    print(
        f"adversarial feed: {made.feed.records} generated records in {made.feed.order_files} "
        f"files, {made.lines} adversarial lines in {made.files} files"
    )


if __name__ == "__main__":
    main()
