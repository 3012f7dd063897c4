"""The landing zone the benchmark's independent jobs of the contract are held to, and the checks
that hold them: ``duckdb_contract.py`` (test_duckdb_contract.py) and ``spark_contract.py``
(test_spark_contract.py) answer each case as the reference does.

A generated feed laced with hand-written adversarial records (every rejection reason, dedupe ties,
rate corrections and cut-offs, held days), lines that are not UTF-8, an ``amount_usd`` beyond
DECIMAL(18,2), the fuzzed files (``fuzz_feed.py``), and ``adversarial_feed.py``'s feed. Each
``check_*`` takes a job (``Job``) or what it wrote. Every expected value comes from the reference
(``reference.py``) or from ``fuzz_feed.classify``, never from a job under test.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads

from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit import adversarial_feed, fuzz_feed
from backfill_assets_testkit.duckdb_contract import Summary
from backfill_assets_testkit.reference import (
    REASONS,
    FactRow,
    QuarantineRow,
    Reference,
    StagingRow,
    fact_rows,
)

D1 = date(2024, 1, 1)
DAYS = [D1 + timedelta(days=i) for i in range(5)]  # D1..D5: D4, D5 have hand-written orders only
RATES = "currency,usd_per_unit\n"
ARRIVAL = "orders/arrival_date="

# A job of the contract: run(landing, out, start, end, max_lateness_days) -> Summary
Job = Callable[[Path, Path, date, date, int], Summary]


def land(root: Path, rel: str, data: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)


def land_decoy(landed: Path) -> None:
    """A file in a sub-folder of ``landed``'s partition folder whose path ends like ``landed``'s
    (``arrival_date=D/sub/orders/arrival_date=D/<name>``): not part of the landing zone, it
    must add nothing anywhere. It restates nothing but holds an order in USD of its day."""
    folder = landed.parent
    day = folder.name.partition("=")[2]
    land(
        folder / "sub" / folder.parent.name / folder.name,
        landed.name,
        order("DECOY-1", event=f"{day}T12:00:00Z", currency="USD", country="US") + "\n",
    )


def order(
    oid="H1",
    *,
    event="2024-01-01T10:00:00Z",
    updated=None,
    status="paid",
    amount='"10.00"',
    currency="EUR",
    country="DE",
    customer="C1",
) -> str:
    """A record with ``amount`` written as raw JSON text (a string needs its own quotes)."""
    return (
        f'{{"order_id":"{oid}","customer_id":"{customer}","event_time":"{event}",'
        f'"updated_at":"{updated or event}","status":"{status}","amount":{amount},'
        f'"currency":"{currency}","country":"{country}"}}'
    )


def edge_orders(day: date) -> list[str]:
    """Orders of event day ``day`` in USD at the contract's edges, as lines of a file that lands
    on ``day``: the last microsecond there is as an update (valid) and as an event
    (``future_event``); an amount written as a number beside a nested ``"amount"`` whose text
    differs (the order's own is judged: ``12.500`` is ``invalid_value``, ``10`` is valid); a
    valid order followed by the text that would close an array wrapping it, and more
    (``malformed_json``: the line is not one JSON object)."""
    at = f"{day}T10:00:00Z"
    last = "9999-12-31T23:59:59.999999Z"

    def edge(oid: str, **fields) -> str:
        return order(
            oid, **{"event": at, "currency": "USD", "country": "US", "customer": "C-edge"} | fields
        )

    return [
        edge("edge-latest-update", updated=last),
        edge("edge-latest-event", event=last, updated=at),
        '{"meta":{"amount":12.5},' + edge("edge-nested-1", amount="12.500")[1:],
        '{"meta":{"amount":1e1},' + edge("edge-nested-2", amount="10")[1:],
        edge("edge-closing-a-wrapper") + ',"\\u0000end-of-record"]garbage',
    ]


def rows(out: Path, table: str, partition: str) -> list[dict]:
    """A Parquet table written partitioned by ``partition`` (hive folders), read by pyarrow."""
    if not (out / table).exists():
        return []
    schema = pa.schema([(partition, pa.date32())])
    dataset = pads.dataset(
        out / table, format="parquet", partitioning=pads.partitioning(schema, flavor="hive")
    )
    return dataset.to_table().to_pylist()


def as_rows(kind, found: list[dict]) -> list:
    return sorted(kind(**{name: r[name] for name in kind.__dataclass_fields__}) for r in found)


ODD_RECORDS = [
    '{"order_id": "O1", "order_id": "O2"}',  # a repeated key
    '{"order_id":"O1",',
    '"placed"',
    "[1]",
    order(amount="NaN"),
    order(amount="-Infinity"),  # DuckDB's JSON reader accepts both
    order().replace("}", ",}"),
    order().replace('"DE"', '["DE",]'),  # trailing commas, too
    order("H2", customer="NaN, Infinity,]"),  # the same words inside a string: valid
    order(oid=""),
    order(amount="null"),
    order().replace(',"country":"DE"', ""),
    order(currency="eur", event="2024-01-09T00:00:00Z"),  # invalid wins over future
    order(amount="12.500"),
    order(amount="1e3"),
    order("H3", amount="12.5"),
    order("H4", amount='"007"'),
    order(oid="X" * 65),
    order("Y" * 64),
    order(status="Paid"),
    order(event="2024-02-30T10:00:00Z"),
    order(event="2024-01-01T24:00:00Z"),
    order(event="2024-01-01T10:00:00+18:01"),
    order(event="0000-01-01T10:00:00Z"),
    order(event="2024-01-01T10:00:00"),
    order(event="2024-01-01t10:00:00z"),
    order("H5", event="2024-01-01T10:05Z"),
    order("H6", event="2024-01-01T23:30:00.1234567-00:29"),
    order(event="2024-01-02T00:00:00Z"),  # arrives on the 1st: future
    order(event="2023-12-24T23:59:59Z"),
    order("H7", event="2023-12-25T00:00:00Z"),  # 8, 7 days
    order("H8", customer=" "),  # whitespace is a non-empty string
    '{"deep":' * 1200 + "1" + "}" * 1200,
    order("H9").replace("}", ',"x":' + "[" * 50 + "]" * 50 + "}"),
]


def build_landing(root: Path) -> Path:
    """A generated feed (its own malformed, late and repeated records) plus hand-written
    files: every rejection reason, dedupe ties, rate corrections and cut-offs, held days."""
    generate_feed(root, DAYS[0], DAYS[2], orders_per_day=60, seed=11)
    land(
        root,
        f"{ARRIVAL}2024-01-01/zz odd.jsonl",
        "\r\n".join(ODD_RECORDS) + "\n \t\n\u00a0\u2028\n\n",
    )
    land(root, f"{ARRIVAL}2024-01-01/_inflight.jsonl", order("GONE") + "\n")
    land(root, f"{ARRIVAL}2024-01-01/.hidden.jsonl", order("GONE") + "\n")
    # event day D2, arriving on D2 and D3, in files with glob characters and a colon in their
    # names (Hadoop's paths cannot name a file with a colon)
    ties = [
        order("T1", event="2024-01-02T10:00:00Z", status="placed"),
        order("T1", event="2024-01-02T10:00:00Z", updated="2024-01-02T11:00:00Z"),
        order("T2", event="2024-01-02T10:00:00Z", updated="2024-01-02T12:00:00Z"),
        order(
            "T2", event="2024-01-02T10:00:00Z", updated="2024-01-02T12:00:00Z", status="cancelled"
        ),
        order("T4", event="2024-01-02T10:00:00Z", updated="2024-01-02T12:00:00Z"),
        order(
            "T4", event="2024-01-02T10:00:00Z", updated="2024-01-02T12:00:00Z", status="cancelled"
        ),
        order("T3", event="2024-01-02T10:00:00Z", updated="2024-01-02T12:00:00Z", currency="GBP"),
    ]
    land(root, f"{ARRIVAL}2024-01-02/a [x]*?:.jsonl", "\n".join(ties))
    land(
        root,
        f"{ARRIVAL}2024-01-02/b.jsonl",
        order(
            "T3", event="2024-01-02T10:00:00Z", updated="2024-01-02T17:30:00+05:30", status="placed"
        ),
    )
    land(
        root,
        f"{ARRIVAL}2024-01-03/a.jsonl",
        "\n".join(
            [
                order(
                    "T1",
                    event="2024-01-02T10:00:00Z",
                    updated="2024-01-02T10:59:59Z",
                    status="cancelled",
                ),  # a later arrival, but older
                order(
                    "T2",
                    event="2024-01-02T10:00:00Z",
                    updated="2024-01-02T12:00:00Z",
                    status="placed",
                ),  # the same instant, a later arrival
                order("R1", event="2024-01-03T02:00:00Z", amount='"0.05"'),  # half-up rounding
                order(
                    "R2", event="2024-01-03T02:00:00Z", amount="10.01", currency="SEK", country="SE"
                ),
            ]
        ),
    )
    land(root, "fx_rates/rate_date=2024-01-03/zz.csv", RATES + "EUR,0.5\nSEK,0.1\nSEK,0.0999999\n")
    land(root, "fx_rates/rate_date=2024-01-03/zzz.csv", "currency,rate\nEUR,5\n")  # not the header
    land(root, "fx_rates/rate_date=2024-01-03/_zzzz.csv", RATES + "EUR,9\n")  # still being written
    land(root, "fx_rates/rate_date=2024-01-02/zz.csv", RATES + "EUR,0\nGBP,1.2x\nGBP,1.5,1\n")
    # D4: NOK from 7 days before D4 counts; D5: NOK from 8 days before does not, so D5 is held
    land(root, "fx_rates/rate_date=2023-12-28/r.csv", RATES + "SEK,0.09\nNOK,0.095\n")
    land(root, "fx_rates/rate_date=2023-12-27/r.csv", RATES + "NOK,0.09\n")
    land(
        root,
        f"{ARRIVAL}2024-01-04/a.jsonl",
        order("S1", event="2024-01-04T05:00:00Z", currency="NOK", country="NO"),
    )
    land(
        root,
        f"{ARRIVAL}2024-01-05/a.jsonl",
        "\n".join(
            [
                order("S2", event="2024-01-05T05:00:00Z", currency="NOK", country="NO"),
                order("S3", event="2024-01-05T05:00:00Z", currency="USD", country="US"),
            ]
        ),
    )
    return root


def run_on_landing(job: Job, landing: Path, out: Path) -> tuple[Path, Summary]:
    """The job over ``build_landing``'s days: where it wrote, and its summary."""
    return out, job(landing, out, DAYS[0], DAYS[-1], 7)


def check_staging(landing: Path, out: Path, summary: Summary) -> None:
    """Staging equals the reference's and holds the same days."""
    expected, held = Reference(landing, 7).staging(DAYS)
    assert held == {date(2024, 1, 5)} and summary.held == [date(2024, 1, 5)]
    assert as_rows(StagingRow, rows(out, "staging", "event_date")) == expected
    by_id = {(r.event_date, r.order_id): r for r in expected}
    # the hand-written cases are in what was compared, decided as the contract says
    assert [by_id[(DAYS[1], t)].status for t in ("T1", "T2", "T3", "T4")] == [
        "paid",
        "placed",
        "placed",
        "cancelled",
    ]
    assert by_id[(DAYS[2], "R1")].amount_usd == Decimal("0.03")
    assert by_id[(DAYS[2], "R2")].usd_per_unit == Decimal("0.0999999")
    assert by_id[(DAYS[3], "S1")].usd_per_unit == Decimal("0.095")
    assert {"H2", "H3", "H4", "H5", "H6", "H8", "H9", "Y" * 64} <= {
        r.order_id for r in expected if r.event_date == D1
    }


def check_fact(landing: Path, out: Path, summary: Summary) -> None:
    expected = Reference(landing, 7).fact(DAYS)
    assert as_rows(FactRow, rows(out, "fact", "event_date")) == expected
    assert summary.fact_rows == len(expected) and sum(f.revenue_usd for f in expected) > 0


def check_quarantine(landing: Path, out: Path) -> None:
    """Quarantine equals the reference's, with every reason."""
    expected = Reference(landing, 7).quarantine(DAYS)
    assert as_rows(QuarantineRow, rows(out, "quarantine", "arrival_date")) == expected
    assert {q.reason for q in expected} == set(REASONS)
    odd = [q for q in expected if q.source_file.endswith("zz odd.jsonl")]
    assert len(odd) == len(ODD_RECORDS) - 9  # the nine records named H* and Y... are valid


def check_lines_not_utf8(job: Job, tmp_path: Path) -> None:
    """Lines that are not UTF-8 are malformed_json, shown with replacement characters."""
    good = order("U1", currency="USD", country="US").encode()
    bad = [
        b'{"order_id":"\xff"}',
        b'{"a":"\xe2\x82"}',
        b"\xed\xa0\x80\xc0\xaf \xf4\x90\x80\x80",
        b'{"caf\xc3\xa9":"\x80"}',
    ]
    land(tmp_path, f"{ARRIVAL}2024-01-01/x.jsonl", b"\r\n".join([good, *bad, good]) + b"\r\n")
    out = tmp_path / "out"
    summary = job(tmp_path, out, D1, D1, 7)
    found = sorted(
        (r["line_number"], r["reason"], r["payload"])
        for r in rows(out, "quarantine", "arrival_date")
    )
    assert found == [
        (n, "malformed_json", line.decode("utf-8", errors="replace"))
        for n, line in enumerate(bad, start=2)
    ]
    assert summary.staging_rows == 1  # U1, its later line winning the tie


def check_overflow_holds_its_day(job: Job, tmp_path: Path) -> None:
    """An amount_usd beyond DECIMAL(18,2) holds its day."""
    land(tmp_path, f"{ARRIVAL}2024-01-01/a.jsonl", order("BIG", amount='"999999999999.99"'))
    land(tmp_path, f"{ARRIVAL}2024-01-02/a.jsonl", order("OK", event="2024-01-02T01:00:00Z"))
    land(tmp_path, "fx_rates/rate_date=2024-01-01/a.csv", RATES + "EUR,999999.5\n")
    summary = job(tmp_path, tmp_path / "out", D1, DAYS[1], 7)
    assert summary.held == [D1]
    assert [
        (r["event_date"], r["order_id"], r["amount_usd"])
        for r in rows(tmp_path / "out", "staging", "event_date")
    ] == [(DAYS[1], "OK", Decimal("9999995.00"))]


def classified(root: Path) -> dict[tuple[date, str, int], tuple[str, str | None]]:
    """(arrival date, source_file, line number) -> (payload, reason) of every record landed
    under ``root``, by ``fuzz_feed.classify`` (the reference's ``judge`` with its ``LATENESS``,
    and ``malformed_json`` for a line that is not UTF-8, its payload decoded with U+FFFD as the
    tables hold it)."""
    found = {}
    for folder in sorted((root / "orders").glob("arrival_date=*")):
        day = date.fromisoformat(folder.name.split("=", 1)[1])
        for path in sorted(folder.iterdir()):
            if not path.name.endswith(".jsonl") or path.name.startswith(("_", ".")):
                continue
            content = path.read_bytes()
            lines = content.split(b"\n")
            for number, payload, reason in fuzz_feed.classify(content, day):
                if payload is None:
                    payload = lines[number - 1].removesuffix(b"\r").decode("utf-8", "replace")
                found[(day, path.relative_to(root).as_posix(), number)] = (payload, reason)
    return found


def check_quarantine_classified(out: Path, expected: dict) -> None:
    """The job's quarantine holds exactly the rejected records of ``expected`` (``classified``),
    with their reasons and payloads."""
    found = {
        (r["arrival_date"], r["source_file"], r["line_number"]): (r["payload"], r["reason"])
        for r in rows(out, "quarantine", "arrival_date")
    }
    assert found == {k: v for k, v in expected.items() if v[1] is not None}


def check_fuzzed_files(job: Job, tmp_path: Path) -> None:
    """The fault harness's fuzzed files (random bytes, bad UTF-8, NUL, long and deep lines,
    repeated keys, edge timestamps and amounts, odd names) get the reasons the contract gives,
    judged by the reference."""
    for i, (day, name, content) in enumerate(fuzz_feed.draw_fuzz_cases(150, seed=3)):
        land(tmp_path, f"{ARRIVAL}{day.isoformat()}/{i:04d} {name}", content)
    expected = classified(tmp_path)
    first, last = fuzz_feed.FUZZ_ARRIVALS[0], fuzz_feed.FUZZ_ARRIVALS[-1]
    summary = job(tmp_path, tmp_path / "out", first, last, fuzz_feed.LATENESS)
    check_quarantine_classified(tmp_path / "out", expected)
    assert summary.records == len(expected) > 100


def check_adversarial_feed(job: Job, tmp_path: Path) -> None:
    """``adversarial_feed.py``'s feed, 2 days of 200 orders and its lines at the contract's edges:
    staging, fact and quarantine equal the reference's, and no day is held."""
    root, out, days = tmp_path / "landing", tmp_path / "out", DAYS[:2]
    made = adversarial_feed.land_adversarial_feed(root, D1, len(days), 200, seed=5)
    reference = Reference(readable_copy(root, tmp_path / "readable"), 7)
    staging, held = reference.staging(days)
    summary = job(root, out, days[0], days[-1], 7)
    assert summary.held == sorted(held) == []
    assert as_rows(StagingRow, rows(out, "staging", "event_date")) == staging
    assert as_rows(FactRow, rows(out, "fact", "event_date")) == fact_rows(staging)
    judged = classified(root)
    check_quarantine_classified(out, {k: v for k, v in judged.items() if k[0] in days})
    read = [k for k in judged if k[0] <= days[-1] + timedelta(days=7)]
    assert summary.records == len(read)
    # what was compared holds the adversarial lines, valid and rejected for every reason
    adversarial = {v[1] for k, v in judged.items() if k[1].endswith(adversarial_feed.FILE_NAME)}
    assert adversarial == {None, *REASONS}
    assert made.lines >= len(days) * len(adversarial_feed.KINDS)
    assert sum(r.order_id.startswith("ADV-") for r in staging) > 40


def readable_copy(root: Path, copy: Path) -> Path:
    """A copy of a landing zone with every line that is not UTF-8 emptied (kept as a blank line,
    so the numbering stays): the reference reads only UTF-8 files, and such a line is
    malformed_json, in no staging row."""
    shutil.copytree(root, copy)
    for path in copy.rglob("*.jsonl"):
        lines = path.read_bytes().split(b"\n")
        kept = []
        for line in lines:
            try:
                line.decode("utf-8")
                kept.append(line)
            except UnicodeDecodeError:
                kept.append(b"")
        path.write_bytes(b"\n".join(kept))
    return copy
