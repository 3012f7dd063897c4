"""Landing zone: file listing on real folders and line splitting/numbering of the Spark readers."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

from backfill_assets.landing.layout import (
    DATASETS,
    LandingFile,
    has_records,
    landed_partitions,
    list_landing_files,
)
from backfill_assets.landing.spark_reader import read_order_lines, read_rate_lines
from backfill_assets.late_data.scan import scan_dataset
from backfill_assets.transforms.orders import validate_orders
from backfill_assets.transforms.schemas import RAW_FX_RATES, RAW_ORDERS
from backfill_assets_testkit.reference import judge
from backfill_assets_testkit.spark_jobs import jobs_started

JAN2, JAN3, JAN4, JAN5 = date(2024, 1, 2), date(2024, 1, 3), date(2024, 1, 4), date(2024, 1, 5)


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


def _names(schema) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def test_listing_skips_unfinished_and_foreign_files(tmp_path):
    _write(tmp_path, "orders/arrival_date=2024-01-03/b.jsonl", "12345")
    _write(tmp_path, "orders/arrival_date=2024-01-03/a.jsonl", "1")
    _write(tmp_path, "orders/arrival_date=2024-01-03/_a.jsonl", "in flight")
    _write(tmp_path, "orders/arrival_date=2024-01-03/.b.jsonl", "in flight")
    _write(tmp_path, "orders/arrival_date=2024-01-03/notes.txt", "not a feed file")
    _write(tmp_path, "orders/arrival_date=2024-01-03/deeper/c.jsonl", "not in the folder")
    _write(tmp_path, "orders/arrival_date=2024-01-02/z.jsonl", "")
    _write(tmp_path, "orders/arrival_date=2024-02-30/x.jsonl", "impossible date")
    _write(tmp_path, "orders/arrival_date=20240104/x.jsonl", "malformed name")
    _write(tmp_path, "fx_rates/rate_date=2024-01-03/r.csv", "currency,usd_per_unit\n")
    (tmp_path / "orders/arrival_date=2024-01-05").mkdir()

    files = list_landing_files(tmp_path, "orders", [JAN5, JAN3, JAN4, JAN2])

    assert files == [
        LandingFile(JAN2, "orders/arrival_date=2024-01-02/z.jsonl", 0),
        LandingFile(JAN3, "orders/arrival_date=2024-01-03/a.jsonl", 1),
        LandingFile(JAN3, "orders/arrival_date=2024-01-03/b.jsonl", 5),
    ]
    assert list_landing_files(tmp_path, "fx_rates", [JAN3]) == [
        LandingFile(JAN3, "fx_rates/rate_date=2024-01-03/r.csv", 22)
    ]
    assert landed_partitions(tmp_path, "orders") == [JAN2, JAN3, JAN5]
    assert landed_partitions(tmp_path / "nowhere", "fx_rates") == []


def test_a_year_of_day_folders_is_listed_without_a_spark_job(spark, tmp_path):
    """Spark lists more than 32 folders in a job of its own, one task per folder, unless told
    to list them on the driver: building the reader of 40 days' folders starts no job, and the
    rows are every file's."""
    days = [JAN2 + timedelta(days=n) for n in range(40)]
    for n, day in enumerate(days):
        _write(tmp_path, f"orders/arrival_date={day}/part-{n}.jsonl", f'{{"n": {n}}}\n')
    files = list_landing_files(tmp_path, "orders", days)
    with jobs_started(spark) as jobs:
        lines = read_order_lines(spark, tmp_path, files)
    assert jobs == []
    rows = lines.collect()
    assert sorted((r["arrival_date"], r["payload"]) for r in rows) == [
        (day, f'{{"n": {n}}}') for n, day in enumerate(days)
    ]


def test_order_lines_split_number_and_keep_payload_verbatim(spark, tmp_path):
    crlf = "orders/arrival_date=2024-01-03/crlf.jsonl"
    odd = "orders/arrival_date=2024-01-03/a b+c%20#é[1]{x,y}*?.jsonl"
    later = "orders/arrival_date=2024-01-04/last.jsonl"
    unicode = "orders/arrival_date=2024-01-04/unicode.jsonl"
    colon = "orders/arrival_date=2024-01-04/at-10:00.jsonl"  # Hadoop's paths cannot hold a ":"
    _write(tmp_path, crlf, '{"a":1}\r\n\r\n  \t\r\n {"b":2} \r\nx\r\r\n\u00a0\n')
    _write(tmp_path, odd, "first\n\nthird")  # no final newline
    _write(tmp_path, later, 'only\n{"z":1}\r')  # the last line, with no LF, loses its CR too
    _write(tmp_path, "orders/arrival_date=2024-01-04/empty.jsonl", "")
    _write(tmp_path, colon, "timed\n")
    _write(tmp_path, "orders/arrival_date=2024-01-04/blank.jsonl", "\n \n\r\n")
    # one line per character: the whitespace of str.isspace() (blank), then look-alikes that are not
    spaces = "\t\x0b\x0c\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"
    _write(tmp_path, unicode, "\n".join([*spaces, "\u200b", "\ufeff", "\x00"]))
    for unlisted in ("_inflight.jsonl", ".hidden.jsonl", "notes.txt", "sub/x.jsonl", "k=1/y.jsonl"):
        _write(tmp_path, f"orders/arrival_date=2024-01-03/{unlisted}", "not a record\n")
    files = list_landing_files(tmp_path, "orders", [JAN3, JAN4])
    assert len(files) == 7

    lines = read_order_lines(spark, str(tmp_path), files)

    assert _names(lines.schema) == [*_names(RAW_ORDERS), ("_utf8", "boolean")]
    assert lines.filter("not _utf8").count() == 0
    raw = lines.select(*RAW_ORDERS.fieldNames())
    assert sorted(tuple(r) for r in raw.collect()) == sorted(
        [
            (JAN3, crlf, 1, '{"a":1}'),
            (JAN3, crlf, 4, ' {"b":2} '),
            (JAN3, crlf, 5, "x\r"),  # only one trailing CR is dropped
            (JAN3, odd, 1, "first"),
            (JAN3, odd, 3, "third"),
            (JAN4, later, 1, "only"),
            (JAN4, later, 2, '{"z":1}'),
            (JAN4, colon, 1, "timed"),
            (JAN4, unicode, 19, "\u200b"),
            (JAN4, unicode, 20, "\ufeff"),
            (JAN4, unicode, 21, "\x00"),
        ]
    )


def test_readers_return_empty_tables_for_no_files(spark, tmp_path):
    orders = read_order_lines(spark, tmp_path, [])
    rates = read_rate_lines(spark, tmp_path, [])
    assert _names(orders.schema) == [*_names(RAW_ORDERS), ("_utf8", "boolean")]
    assert _names(rates.schema) == _names(RAW_FX_RATES)
    assert orders.count() == 0 and rates.count() == 0


def test_rate_lines_drop_the_header_and_keep_headerless_files_unparsed(spark, tmp_path):
    good = "fx_rates/rate_date=2024-01-03/fx-1.csv"
    late_header = "fx_rates/rate_date=2024-01-03/fx-2.csv"
    headerless = "fx_rates/rate_date=2024-01-04/fx-1.csv"
    colon = "fx_rates/rate_date=2024-01-04/fx-10:00.csv"
    _write(tmp_path, good, "currency,usd_per_unit\r\nEUR,1.08\r\n\r\nJPY,0.0067,x\r\nGBP\r\n")
    _write(tmp_path, late_header, "\n  \ncurrency,usd_per_unit\nBRL,0.2")
    _write(tmp_path, headerless, "EUR,1.09\n")
    _write(tmp_path, colon, "currency,usd_per_unit\nCHF,1.1\n")
    files = list_landing_files(tmp_path, "fx_rates", [JAN3, JAN4])

    rates = read_rate_lines(spark, tmp_path, files)

    assert _names(rates.schema) == _names(RAW_FX_RATES)
    assert sorted(tuple(r) for r in rates.collect()) == sorted(
        [
            (JAN3, good, 2, "EUR", "1.08", "EUR,1.08"),
            (JAN3, good, 4, "JPY", "0.0067,x", "JPY,0.0067,x"),
            (JAN3, good, 5, "GBP", None, "GBP"),
            (JAN3, late_header, 4, "BRL", "0.2", "BRL,0.2"),
            (JAN4, headerless, 1, None, None, "EUR,1.09"),
            (JAN4, colon, 2, "CHF", "1.1", "CHF,1.1"),
        ]
    )


def test_has_records_agrees_with_the_spark_reader_on_blank_lines(spark, tmp_path):
    texts = {
        "empty.jsonl": "",
        "blank.jsonl": "\n  \r\n\t\n\u00a0\u2003\n\r",
        "one.jsonl": '\n\n{"x": 1}',
        "garbage.jsonl": " \nnot json\n",
    }
    for name, text in texts.items():
        _write(tmp_path, f"orders/arrival_date=2024-01-01/{name}", text)
    files = list_landing_files(tmp_path, "orders", [date(2024, 1, 1)])
    rows = read_order_lines(spark, tmp_path, files).collect()
    with_rows = {r["source_file"].rsplit("/", 1)[1] for r in rows}
    assert with_rows == {"one.jsonl", "garbage.jsonl"}
    folder = tmp_path / "orders/arrival_date=2024-01-01"
    assert {name for name in texts if has_records(folder / name, DATASETS["orders"])} == with_rows


def test_has_records_skips_a_rate_files_header_as_the_reader_does(spark, tmp_path):
    texts = {
        "header-only.csv": "\ncurrency,usd_per_unit\r\n \n",
        "rates.csv": "currency,usd_per_unit\nEUR,1.1\n",
        "headerless.csv": "EUR,1.1\n",
        "empty.csv": "",
    }
    for name, text in texts.items():
        _write(tmp_path, f"fx_rates/rate_date=2024-01-01/{name}", text)
    files = list_landing_files(tmp_path, "fx_rates", [date(2024, 1, 1)])
    with_rows = {
        r["source_file"].rsplit("/", 1)[1]
        for r in read_rate_lines(spark, tmp_path, files).collect()
    }
    assert with_rows == {"rates.csv", "headerless.csv"}
    folder = tmp_path / "fx_rates/rate_date=2024-01-01"
    assert {name for name in texts if has_records(folder / name, DATASETS["fx_rates"])} == with_rows


def _utf8_or_none(line: bytes) -> str | None:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_a_line_that_is_not_utf8_is_malformed_json_and_its_neighbours_are_judged_alone(
    spark, tmp_path
):
    """JSON text is UTF-8 (RFC 8259 section 8.1): a line with bytes that are not is no JSON object,
    even when the bad bytes sit inside a string value (read leniently, two different bad ids
    would both become "o\ufffd" and be deduplicated as one order). Judged line by line: a valid
    line beside it, one with a real U+FFFD, and the byte 0x0A inside a multi-byte pair of hex
    digits ("\\xa0" after "0") are unaffected."""
    record = (
        '{"order_id":"%s","customer_id":"c","event_time":"2024-01-03T10:00:00Z",'
        '"updated_at":"2024-01-03T10:00:00Z","status":"paid","amount":"1.00",'
        '"currency":"USD","country":"US"}'
    )
    lines = [
        (record % "o\xff").encode("latin-1"),  # a lone continuation byte
        (record % "ok1").encode(),
        (record % "o\ufffd").encode(),  # U+FFFD, written as valid UTF-8
        (record % "o\xed\xa0\x80").encode("latin-1"),  # an encoded surrogate
        (record % "o\xc0\xaf").encode("latin-1"),  # an overlong "/"
        (record % "0\xa0").encode("latin-1"),  # 0x30 0xA0: hex "30A0", no line break in it
        (record % "ok2").encode(),
    ]
    for name, body in (
        ("mixed.jsonl", b"\n".join(lines) + b"\n"),
        ("clean.jsonl", (record % "ok3").encode()),
    ):
        path = tmp_path / "orders/arrival_date=2024-01-03" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    files = list_landing_files(tmp_path, "orders", [JAN3])
    raw = read_order_lines(spark, tmp_path, files)

    # the payload: one U+FFFD per maximal ill-formed subsequence, as Unicode recommends (and
    # Python's decoder does): the encoded surrogate is three
    payloads = {
        r["line_number"]: r["payload"]
        for r in raw.collect()
        if r["source_file"].endswith("mixed.jsonl")
    }
    assert payloads == {
        n: line.decode("utf-8", errors="replace") for n, line in enumerate(lines, start=1)
    }
    validated = validate_orders(raw, 7)

    got = {
        (r["source_file"].rsplit("/", 1)[1], r["line_number"]): r["reason"]
        for r in validated.collect()
    }
    expected = {("clean.jsonl", 1): None}
    for number, line in enumerate(lines, start=1):
        text = _utf8_or_none(line)
        expected["mixed.jsonl", number] = (
            "malformed_json" if text is None else judge(text, JAN3, 7)[0]
        )
    assert got == expected


def test_links_that_lead_outside_the_landing_root_are_not_landed(spark, tmp_path):
    """Nothing outside the landing root is part of it: a symbolic link to a file or a folder
    outside is skipped (the fault harness's decoys were read into raw); a link that stays inside
    the root is an ordinary landed file."""
    root, outside = tmp_path / "landing", tmp_path / "outside"
    _write(outside, "secret.jsonl", '{"decoy": 1}\n')
    _write(outside, "orders/arrival_date=2024-01-04/secret.jsonl", '{"decoy": 2}\n')
    _write(root, "orders/arrival_date=2024-01-03/real.jsonl", '{"a": 1}\n')
    _write(root, "shared/inside.jsonl", '{"b": 2}\n')
    jan3 = root / "orders/arrival_date=2024-01-03"
    (jan3 / "out.jsonl").symlink_to(outside / "secret.jsonl")
    (jan3 / "in.jsonl").symlink_to(root / "shared/inside.jsonl")
    (root / "orders/arrival_date=2024-01-04").symlink_to(outside / "orders/arrival_date=2024-01-04")

    files = list_landing_files(root, "orders", [JAN3, JAN4])

    assert [f.relative_path for f in files] == [
        "orders/arrival_date=2024-01-03/in.jsonl",
        "orders/arrival_date=2024-01-03/real.jsonl",
    ]
    assert landed_partitions(root, "orders") == [JAN3]
    scan = scan_dataset(root, "orders", JAN3, JAN4, None, 0, 2**62)  # the late-data sensor's scan
    assert scan.counts == {JAN3: 2}
    payloads = sorted(r["payload"] for r in read_order_lines(spark, root, files).collect())
    assert payloads == ['{"a": 1}', '{"b": 2}']


def test_a_file_in_a_sub_folder_is_not_read_as_the_landed_file_its_path_ends_like(spark, tmp_path):
    """Only a partition folder's own files are landed. A file deeper down whose path ends like a
    landed one (``arrival_date=D/sub/orders/arrival_date=D/a.jsonl``) was read as that file:
    its lines under the landed file's name, a restated order and an unlisted one published."""
    root = tmp_path / "landing"
    order = '{"order_id":"%s"}\n'
    _write(root, "orders/arrival_date=2024-01-03/a.jsonl", order % "real")
    for decoy in ("sub/orders/arrival_date=2024-01-03", "_x=1/orders/arrival_date=2024-01-03"):
        _write(root, f"orders/arrival_date=2024-01-03/{decoy}/a.jsonl", order % "decoy" * 2)
    _write(
        root,
        "orders/arrival_date=2024-01-03/sub/orders/arrival_date=2024-01-04/b.jsonl",
        order % "x",
    )
    _write(root, "orders/arrival_date=2024-01-04/b.jsonl", order % "real-b")
    _write(root, "fx_rates/rate_date=2024-01-03/r.csv", "currency,usd_per_unit\nEUR,1.2\n")
    _write(
        root,
        "fx_rates/rate_date=2024-01-03/old/fx_rates/rate_date=2024-01-03/r.csv",
        "currency,usd_per_unit\n\nEUR,5\n",
    )

    orders = read_order_lines(spark, root, list_landing_files(root, "orders", [JAN3, JAN4]))
    rates = read_rate_lines(spark, root, list_landing_files(root, "fx_rates", [JAN3]))

    assert sorted((r["source_file"], r["line_number"], r["payload"]) for r in orders.collect()) == [
        ("orders/arrival_date=2024-01-03/a.jsonl", 1, order.strip() % "real"),
        ("orders/arrival_date=2024-01-04/b.jsonl", 1, order.strip() % "real-b"),
    ]
    assert [(r["line_number"], r["currency"], r["usd_per_unit"]) for r in rates.collect()] == [
        (2, "EUR", "1.2")
    ]


def test_a_landed_file_named_beyond_ascii_is_read_under_the_c_locale(tmp_path):
    """The JVM reads file names in its locale's charset, which no JVM option overrides: under
    ``LC_ALL=C`` it listed ``é.jsonl`` as ``??.jsonl``, a file that does not exist, and raw was
    published without its records. The session's JVM gets a UTF-8 character type."""
    _write(tmp_path, "orders/arrival_date=2024-01-03/plain.jsonl", '{"a":1}\n')
    _write(tmp_path, "orders/arrival_date=2024-01-03/é.jsonl", '{"b":2}\n')
    child = (
        "import sys, datetime as dt\n"
        "from backfill_assets.landing.layout import list_landing_files\n"
        "from backfill_assets.landing.spark_reader import read_order_lines\n"
        "from backfill_assets.spark.session import build_session, spark_config\n"
        "spark = build_session(spark_config(master='local[1]'))\n"
        "files = list_landing_files(sys.argv[1], 'orders', [dt.date(2024, 1, 3)])\n"
        "rows = read_order_lines(spark, sys.argv[1], files).collect()\n"
        "print(repr(sorted((r.source_file, r.payload) for r in rows)))\n"
    )
    env = {**os.environ, "LC_ALL": "C"}
    env.pop("LC_CTYPE", None)
    done = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == repr(
        [
            ("orders/arrival_date=2024-01-03/plain.jsonl", '{"a":1}'),
            ("orders/arrival_date=2024-01-03/é.jsonl", '{"b":2}'),
        ]
    )


def test_a_landing_root_named_with_glob_characters_and_a_colon_is_read_as_it_is(spark, tmp_path):
    """Hadoop took ``a[1]:b`` for a pattern, then for a URI with a scheme: every read failed."""
    root = tmp_path / "a[1]:b{c,d}*?"
    _write(root, "orders/arrival_date=2024-01-03/x[1]{a}*:.jsonl", '{"a":1}\n')
    _write(tmp_path / "a1:bc", "orders/arrival_date=2024-01-03/x1a.jsonl", '{"decoy":1}\n')
    files = list_landing_files(root, "orders", [JAN3])
    rows = read_order_lines(spark, root, files).collect()
    assert [(r["source_file"], r["payload"]) for r in rows] == [
        ("orders/arrival_date=2024-01-03/x[1]{a}*:.jsonl", '{"a":1}')
    ]
