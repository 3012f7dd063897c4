"""Delta's jars: set-up fetches once and then works offline; a bad jar stops a Delta session before
it starts."""

from __future__ import annotations

import os
import shutil
import stat
import sys

import pytest

from backfill_assets import delta_jars, plain_line_jar
from backfill_assets.delta_jars import JARS, DeltaJarsError, checked_jars, fetch
from backfill_assets.s3a_jars import S3A_JARS
from backfill_assets.spark_session import build_session, check_delta_jars, spark_config


@pytest.fixture
def jar_folder(tmp_path, monkeypatch):
    folder = tmp_path / "jars"
    monkeypatch.setenv("BACKFILL_DELTA_JARS", str(folder))
    return folder


@pytest.fixture
def fake_mvn(tmp_path, monkeypatch):
    """An ``mvn`` that records its calls and fails as an unreachable Maven Central would."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "mvn-calls"
    bin_dir.mkdir()
    script = bin_dir / "mvn"
    script.write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n'
        "echo '[ERROR] Could not transfer artifact: Network is unreachable'\nexit 1\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


def test_unreachable_maven_is_one_line_and_no_error(jar_folder, fake_mvn):
    message = fetch()
    assert fake_mvn.exists()
    assert "not fetched" in message and "Network is unreachable" in message
    assert "\n" not in message
    assert not delta_jars.jars_present()


def test_jars_already_there_are_checked_without_mvn(jar_folder, fake_mvn):
    real = os.path.join(os.path.dirname(os.path.dirname(delta_jars.__file__)), ".jars", "delta")
    if not all(os.path.exists(os.path.join(real, name)) for name in JARS):
        pytest.skip("set-up did not fetch Delta's jars on this machine")
    shutil.copytree(real, jar_folder)
    assert "present" in fetch()
    assert not fake_mvn.exists()


def test_delta_session_conf_names_the_jars_extension_and_catalog(jar_folder):
    conf = spark_config(master="local[1]", lake_engine="delta-spark")
    # Delta's jars, then raw's plain-line reader once set-up has built it (every session's)
    plain = plain_line_jar.session_jars()
    delta = [str(jar_folder / name) for name in sorted(JARS)]
    assert conf["spark.jars"].split(",") == delta + plain
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"].endswith("DeltaCatalog")
    for engine in ("auto", "delta-rs"):
        other = spark_config(master="local[1]", lake_engine=engine)
        assert other.get("spark.jars", "").split(",") == (plain or [""])


def test_missing_or_corrupt_jar_stops_the_session_naming_the_fix(jar_folder):
    conf = spark_config(master="local[1]", lake_engine="delta-spark")
    with pytest.raises(DeltaJarsError, match=r"missing.*make setup"):
        build_session(conf)
    jar_folder.mkdir()
    for name in JARS:
        (jar_folder / name).write_bytes(b"not a jar")
    with pytest.raises(DeltaJarsError, match=r"corrupt.*make setup"):
        check_delta_jars(conf)


def test_a_pyspark_the_jars_were_not_built_for_is_refused(jar_folder, monkeypatch):
    monkeypatch.setattr(sys.modules["pyspark"], "__version__", "4.1.0")
    with pytest.raises(DeltaJarsError, match=r"built for Spark 4\.2, this is pyspark 4\.1\.0"):
        checked_jars()


@pytest.mark.parametrize(
    ("args", "lake_dir", "fetches_s3a"),
    [
        ([], "data/lake", False),
        ([], "s3://bucket/lake", True),
        (["--s3a"], "data/lake", True),
    ],
)
def test_set_up_fetches_the_s3a_jars_only_when_s3_is_used(
    jar_folder, fake_mvn, tmp_path, monkeypatch, args, lake_dir, fetches_s3a
):
    monkeypatch.setenv("BACKFILL_S3A_JARS", str(tmp_path / "s3a"))
    monkeypatch.setenv("BACKFILL_LAKE_DIR", lake_dir)
    monkeypatch.setenv("BACKFILL_LANDING_DIR", str(tmp_path / "landing"))
    assert delta_jars.main(args) == 0  # Maven unreachable: said, set-up goes on
    asked = fake_mvn.read_text()
    assert "io.delta:delta-spark" in asked
    first_s3a = S3A_JARS[min(S3A_JARS)][0]  # the first fetched; an unreachable Maven stops it
    assert (first_s3a in asked) is fetches_s3a


def test_a_delta_spark_session_on_s3_gets_the_s3a_jars_and_checks_them(
    jar_folder, tmp_path, monkeypatch
):
    monkeypatch.setenv("BACKFILL_S3A_JARS", str(tmp_path / "s3a"))
    monkeypatch.setenv("BACKFILL_LAKE_DIR", "s3://bucket/lake")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-secret-never-in-the-conf")
    conf = spark_config(master="local[1]", lake_engine="delta-spark")
    jars = conf["spark.jars"].split(",")
    assert jars[: len(JARS)] == [str(jar_folder / name) for name in sorted(JARS)]
    s3a = [str(tmp_path / "s3a" / name) for name in sorted(S3A_JARS)]
    assert jars[len(JARS) :] == plain_line_jar.session_jars() + s3a
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert conf["spark.delta.logStore.s3.impl"] == "io.delta.storage.S3SingleDriverLogStore"
    assert "the-secret-never-in-the-conf" not in repr(conf)
    with pytest.raises(DeltaJarsError, match=r"s3a .*missing.*delta_jars --s3a"):
        delta_jars.S3A.checked()
    monkeypatch.setenv("BACKFILL_LAKE_DIR", str(tmp_path / "lake"))
    assert "spark.hadoop.fs.s3.impl" not in spark_config(
        master="local[1]", lake_engine="delta-spark"
    )
