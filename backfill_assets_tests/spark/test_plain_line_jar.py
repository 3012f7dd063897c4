"""Raw's plain-line reader in the JVM (``spark/plain_line_jar.py``): set-up compiles it from its
source and builds it again when the source changes; a pipeline session loads it; the lines it
takes as plain are exactly those ``PLAIN_LINE`` matches; a session without it reads plain lines by
the pattern and from_json, with the same verdicts."""

from __future__ import annotations

import json
import random
import re
import shutil
import zipfile
from collections import Counter
from datetime import date

import pytest
from pyspark.sql import functions as F

from backfill_assets.demo.generate import generate_feed
from backfill_assets.spark import plain_line_jar
from backfill_assets.transforms.orders import FIELD_TEXTS, FIELDS, PLAIN_LINE
from backfill_assets_tests.spark.test_spark_smoke import session_child
from backfill_assets_tests.transforms.test_orders import BASE, CASES


@pytest.fixture
def javac() -> str:
    """The JDK's compiler, which set-up installs; the test fails naming the step where it is not."""
    path = shutil.which("javac")
    if path is None:
        pytest.fail(
            "no JDK compiler (javac) here: run `make setup`, which installs "
            "openjdk-17-jdk-headless with apt-get as root",
            pytrace=False,
        )
    return path


@pytest.mark.usefixtures("javac")
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


@pytest.mark.usefixtures("javac")
def test_a_source_that_does_not_compile_leaves_set_up_going(tmp_path, monkeypatch):
    broken = tmp_path / "PlainLineFields.java"
    broken.write_text("class PlainLineFields { not java }\n")
    monkeypatch.setattr(plain_line_jar, "SOURCE", broken)
    done = plain_line_jar.ensure(tmp_path / "plain.jar")
    assert done.startswith("not built (raw's plain lines are read by from_json, slower)")
    assert not (tmp_path / "plain.jar").exists()


def test_a_pipeline_session_loads_the_function(spark):
    if not plain_line_jar.jar_path().is_file():
        pytest.fail(
            "set-up built no jar: `python -m backfill_assets.spark.plain_line_jar` says why"
        )
    assert plain_line_jar.register(spark, FIELD_TEXTS)
    texts = {name: f"{name}-1" for name in FIELDS}
    line = json.dumps({**texts, "amount": 0, "x": None}, separators=(",", ":"))
    line = line.replace('"amount":0', '"amount":12.50')  # a number's text as written
    [row] = spark.sql(f"SELECT {plain_line_jar.FUNCTION}('{line}') AS f").collect()
    assert row["f"].asDict() == {**texts, "amount": "12.50"}


def _mutations(lines: list[str], count: int, seed: int) -> list[str]:
    """``count`` lines, each a line of ``lines`` changed once or twice where a plain line's shape
    is decided: a character deleted, inserted or replaced, a name renamed, a pair added."""
    rng = random.Random(seed)
    alphabet = '"\\{}[],:0123456789.-+eE \t\x01\x1f\x7faé\U0001f600'
    names = [*FIELDS, "x", "", "amount ", "Amount"]
    extras = [',"x":1', ',"x":-0.5e+3', ',"x":true', ',"x":"a"', ',"x":nul', ',"x":01', ',"n":1.']
    amounts = ["0", "00", "12", "012", "1.5", "1.50", "1.505", "1.", ".5", "-1", "1e3"]
    amounts += ["123456789012", "1234567890123", "123456789012.99", '"1"', "true"]
    out = []
    for _ in range(count):
        line = rng.choice(lines)
        for _ in range(rng.choice((1, 1, 2))):
            kind, at = rng.randrange(6), rng.randrange(len(line) + 1)
            if kind == 0:
                line = line[:at] + line[at + 1 :]
            elif kind == 1:
                line = line[:at] + rng.choice(alphabet) + line[at:]
            elif kind == 2:
                line = line[:at] + rng.choice(alphabet) + line[at + 1 :]
            elif kind == 3:
                old = rng.choice(FIELDS)
                line = line.replace(f'"{old}":', f'"{rng.choice(names)}":', 1)
            elif kind == 4:
                line = line[:-1] + rng.choice(extras) + "}" if line.endswith("}") else line
            else:
                line = re.sub(
                    r'"amount":("[^"]*"|[0-9.]+)', f'"amount":{rng.choice(amounts)}', line
                )
        out.append(line)
    return out


def test_the_functions_plain_lines_are_exactly_the_pattern_s(spark, tmp_path):
    generate_feed(tmp_path, date(2024, 1, 1), date(2024, 1, 1), orders_per_day=100, seed=3)
    generated = [
        line
        for path in sorted((tmp_path / "orders").rglob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    with_other = [
        line[:-1] + extra + "}"
        for line in generated[:50]
        for extra in (',"n":-1.5e3', ',"t":null', ',"s":"x"')
    ]
    cases = [payload for payload, _ in CASES.values()]
    lines = generated + with_other + cases + _mutations(generated + with_other, 20_000, seed=11)
    assert plain_line_jar.register(spark, FIELD_TEXTS)
    rows = spark.createDataFrame([(line,) for line in lines], "payload string").select(
        "payload",
        F.col("payload").rlike(PLAIN_LINE).alias("pattern"),
        F.call_function(plain_line_jar.FUNCTION, "payload").isNotNull().alias("function"),
    )
    differ = rows.filter(F.col("pattern") != F.col("function")).limit(5).collect()
    assert differ == []
    counts = Counter(row["pattern"] for row in rows.select("pattern").collect())
    assert counts[True] > 2_000 and counts[False] > 5_000  # both kinds, plenty of each


# A session whose spark.jars lacks the jar: validation falls back to from_json, and asking for the
# JVM function is an error that names the jar.
WITHOUT_THE_JAR = """
import json
from datetime import date
from backfill_assets.spark.session import build_session, spark_config
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
    plain = json.dumps(BASE, separators=(",", ":"))  # its amount the string "12.50"
    number = plain.replace('"12.50"', "12.50")
    repeated = plain.replace('"country":"DE"', '"status":"paid"')
    printed = session_child(WITHOUT_THE_JAR.format(lines=json.dumps([plain, number, repeated])), {})
    *rows, error = json.loads(printed)
    assert rows == [[None, "12.50"], [None, "12.50"], ["malformed_json", "None"]]
    assert error is not None and str(plain_line_jar.jar_path()) in error
