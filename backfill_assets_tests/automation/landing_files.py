"""Hand-written landing files for the late-data tests: every event time is chosen by the test."""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

from backfill_assets_testkit.reference import parse_json_object, parse_timestamp, records_of


def order(
    order_id: str,
    event_time: str,
    status: str = "paid",
    amount: str = "10.00",
    currency: str = "USD",
    country: str = "US",
) -> str:
    """One valid order record (updated_at = event_time) as a JSON line."""
    return json.dumps(
        {
            "order_id": order_id,
            "customer_id": f"c-{order_id}",
            "event_time": event_time,
            "updated_at": event_time,
            "status": status,
            "amount": amount,
            "currency": currency,
            "country": country,
        }
    )


def arrival_folder(root: Path, arrival: date) -> Path:
    folder = root / "orders" / f"arrival_date={arrival.isoformat()}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_orders(root: Path, arrival: date, name: str, lines: list[str]) -> Path:
    """Writes ``_name`` first and renames it into place, as a well-behaved producer does."""
    folder = arrival_folder(root, arrival)
    partial = folder / f"_{name}"
    partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.rename(partial, folder / name)
    return folder / name


def write_rates(root: Path, rate_date: date, name: str, rates: dict[str, str]) -> Path:
    folder = root / "fx_rates" / f"rate_date={rate_date.isoformat()}"
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["currency,usd_per_unit"] + [f"{c},{r}" for c, r in rates.items()]
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder / name


def deliver_folder(staged: Path, root: Path) -> Path:
    """Moves a folder prepared elsewhere into the landing zone (its files keep their times)."""
    target = root / "orders" / staged.name
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(staged, target)
    return target


def oracle_event_days(paths: list[Path], lateness: int = 7) -> set[date]:
    """Event dates within the lateness window of the records of ``paths``, per the test oracle."""
    days = set()
    for path in paths:
        arrival = date.fromisoformat(path.parent.name.split("=")[1])
        for _, line in records_of(path.read_text(encoding="utf-8")):
            obj = parse_json_object(line)
            when = parse_timestamp(obj.get("event_time")) if obj else None
            if when and 0 <= (arrival - when.date()).days <= lateness:
                days.add(when.date())
    return days
