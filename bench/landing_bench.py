"""Reading one landed file that holds a line that is not UTF-8, at growing sizes; run by hand.

    .venv/bin/python bench/landing_bench.py --lines 1000 2000 20000 200000

For each size, a file of that many order lines, the middle one with a byte that is not UTF-8,
is read by the landing reader (``read_order_lines``) in one Spark session, and the lines that
are not UTF-8 are counted. It prints the seconds of each read (the first includes the plan's
compilation); the time should grow with the file's lines, not with their square.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LINE = (
    b'{"order_id":"O1","customer_id":"C1","event_time":"2024-01-01T10:00:00Z",'
    b'"updated_at":"2024-01-01T10:00:00Z","status":"paid","amount":"1.00",'
    b'"currency":"EUR","country":"DE"}'
)
NOT_UTF8 = b'{"order_id":"\xff"}'


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--lines", type=int, nargs="+", default=[1000, 2000, 20000, 200000])
    p.add_argument("--workdir", type=Path, default=None)
    args = p.parse_args()

    from pyspark.sql import functions as F

    from backfill_assets.landing.layout import list_landing_files
    from backfill_assets.landing.spark_reader import read_order_lines
    from backfill_assets.spark.session import build_session, spark_config

    work = Path(args.workdir or tempfile.mkdtemp(prefix="backfill-landing-bench-"))
    spark = build_session(spark_config())
    day, figures = date(2024, 1, 1), []
    for n in args.lines:
        root = work / f"lines-{n}"
        folder = root / "orders" / f"arrival_date={day}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [LINE] * n
        lines[n // 2] = NOT_UTF8
        (folder / "orders.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        files = list_landing_files(root, "orders", [day])
        began = time.monotonic()
        read = read_order_lines(spark, root, files)
        bad = read.filter(~F.col("_utf8")).count()
        seconds = time.monotonic() - began
        print(f"{n} lines, {bad} not UTF-8: {seconds:.1f}s", flush=True)
        figures.append(f"lines_{n}_s={seconds:.1f}")
    spark.stop()
    print("RESULT " + " ".join(figures))


if __name__ == "__main__":
    main()
