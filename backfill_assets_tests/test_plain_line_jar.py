"""Raw's plain-line reader in the JVM (``plain_line_jar.py``): set-up compiles it from its source
and builds it again when the source changes; a pipeline session loads it; a session without it
reads plain lines by from_json, with the same verdicts."""

from __future__ import annotations

import json
import shutil
import zipfile

import pytest

from backfill_assets import plain_line_jar
from backfill_assets.transforms.orders import FIELD_TEXTS
from backfill_assets_tests.test_spark_smoke import session_child

needs_javac = pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK compiler here")


@needs_javac
def test_set_up_compiles_the_source_once_and_again_when_it_changes(tmp_path, monkeypatch):
    jar = tmp_path / "plain.jar"
    assert plain_line_jar.ensure(jar) == f"built: {jar}"
    with zipfile.ZipFile(jar) as archive:
        assert "backfill_assets/jvm/PlainLineFields.class" in archive.namelist()
    assert plain_line_jar.ensure(jar) == f"up to date: {jar}"

    changed = tmp_path / "PlainLineFields.java"
    changed.write_text(plain_line_jar.SOURCE.read_text() + "\n// changed\n")
    monkeypatch.setattr(plain_line_jar, "SOURCE", changed)
    assert plain_line_jar.ensure(jar) == f"built: {jar}"


@needs_javac
def test_a_source_that_does_not_compile_leaves_set_up_going(tmp_path, monkeypatch):
    broken = tmp_path / "PlainLineFields.java"
    broken.write_text("class PlainLineFields { not java }\n")
    monkeypatch.setattr(plain_line_jar, "SOURCE", broken)
    done = plain_line_jar.ensure(tmp_path / "plain.jar")
    assert done.startswith("not built (raw's plain lines are read by from_json, slower)")
    assert not (tmp_path / "plain.jar").exists()


def test_a_pipeline_session_loads_the_function(spark):
    if not plain_line_jar.jar_path().is_file():
        pytest.fail("set-up built no jar: `python -m backfill_assets.plain_line_jar` says why")
    assert plain_line_jar.register(spark, FIELD_TEXTS)
    line = '{"order_id":"o-1","amount":12.50,"country":"DE","x":null,"status":"paid"}'
    [row] = spark.sql(f"SELECT {plain_line_jar.FUNCTION}('{line}') AS f").collect()
    assert row["f"].asDict() == {
        **dict.fromkeys(FIELD_TEXTS.fieldNames()),
        **{"order_id": "o-1", "amount": "12.50", "country": "DE", "status": "paid"},
    }


# A session whose spark.jars lacks the jar: validation falls back to from_json, and asking for the
# JVM function is an error that names the jar.
WITHOUT_THE_JAR = """
import json
from datetime import date
from backfill_assets.spark_session import build_session, spark_config
from backfill_assets.transforms.orders import validate_orders
from backfill_assets.transforms.schemas import RAW_ORDERS
conf = spark_config(master="local[1]", shuffle_partitions=1)
conf.pop("spark.jars", None)
spark = build_session(conf)
lines = json.loads({lines!r})
raw = spark.createDataFrame(
    [(date(2024, 1, 10), "f", n, line) for n, line in enumerate(lines)], RAW_ORDERS
)
rows = validate_orders(raw, 7).orderBy("line_number").collect()
try:
    validate_orders(raw, 7, plain_in_jvm=True)
    error = None
except RuntimeError as exc:
    error = str(exc)
print(json.dumps([[r["reason"], str(r["amount"])] for r in rows] + [error]))
"""


@pytest.mark.slow
def test_a_session_without_the_jar_reads_plain_lines_by_from_json():
    base = {
        "order_id": "o-1",
        "customer_id": "c-1",
        "event_time": "2024-01-09T10:00:00Z",
        "updated_at": "2024-01-09T10:05:00Z",
        "status": "paid",
        "amount": "12.50",
        "currency": "EUR",
        "country": "DE",
    }
    plain = json.dumps(base, separators=(",", ":"))
    number = plain.replace('"12.50"', "12.50")
    repeated = plain.replace('"country":"DE"', '"status":"paid"')
    printed = session_child(WITHOUT_THE_JAR.format(lines=json.dumps([plain, number, repeated])), {})
    *rows, error = json.loads(printed)
    assert rows == [[None, "12.50"], [None, "12.50"], ["malformed_json", "None"]]
    assert error is not None and str(plain_line_jar.jar_path()) in error
