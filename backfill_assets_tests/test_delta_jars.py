"""Delta's jars: set-up fetches once and then works offline; a bad jar stops a Delta session before
it starts."""

from __future__ import annotations

import os
import shutil
import stat
import sys

import pytest

from backfill_assets import delta_jars
from backfill_assets.delta_jars import JARS, DeltaJarsError, checked_jars, fetch
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
    assert conf["spark.jars"].split(",") == [str(jar_folder / name) for name in sorted(JARS)]
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"].endswith("DeltaCatalog")
    for engine in ("auto", "delta-rs"):
        assert "spark.jars" not in spark_config(master="local[1]", lake_engine=engine)


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
