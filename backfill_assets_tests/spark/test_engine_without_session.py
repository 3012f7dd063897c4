"""Which lake engine a session would take, known without starting one
(``session.engine_without_session``): the correction commands that only commit file references
start no Spark when it is delta-rs."""

from __future__ import annotations

import pytest

from backfill_assets.settings import SparkSettings
from backfill_assets.spark.session import engine_without_session

EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"


@pytest.fixture
def plain_spark_env(tmp_path):
    """No spark-submit source that could add Delta: no submit arguments, an empty conf folder
    and a Spark home without a conf folder; ``settings(**env)`` reads the variables with
    these."""
    (tmp_path / "conf").mkdir()
    return tmp_path


def settings(root, **env: str) -> SparkSettings:
    spark_env = {"SPARK_CONF_DIR": str(root / "conf"), "SPARK_HOME": str(root / "home")}
    return SparkSettings.from_env({**spark_env, **env})


@pytest.mark.parametrize(
    "env, engine",
    [
        ({"BACKFILL_LAKE_ENGINE": "delta-rs"}, "delta-rs"),
        ({}, "delta-rs"),  # auto, and nothing can add Delta to the session
        ({"BACKFILL_SPARK_REMOTE": "sc://127.0.0.1:15002"}, "delta-rs"),  # Connect: never Delta
        ({"BACKFILL_LAKE_ENGINE": "delta-spark"}, None),
    ],
)
def test_the_engine_known_from_the_settings(plain_spark_env, env, engine):
    assert engine_without_session(settings(plain_spark_env, **env)) == engine


@pytest.mark.parametrize(
    "submit",
    [
        f"--conf spark.sql.extensions={EXTENSION} pyspark-shell",
        "--properties-file /etc/spark/team.conf pyspark-shell",
    ],
)
def test_auto_asks_the_session_when_submit_arguments_may_add_delta(plain_spark_env, submit):
    found = settings(plain_spark_env, PYSPARK_SUBMIT_ARGS=submit)
    assert engine_without_session(found) is None


@pytest.mark.parametrize("folder", ["conf", "home/conf"])
def test_auto_asks_the_session_when_spark_defaults_add_delta(plain_spark_env, folder):
    (plain_spark_env / folder).mkdir(parents=True, exist_ok=True)
    (plain_spark_env / folder / "spark-defaults.conf").write_text(
        f"spark.sql.extensions  {EXTENSION}\n"
    )
    assert engine_without_session(settings(plain_spark_env)) is None


def test_spark_defaults_without_delta_leave_auto_on_delta_rs(plain_spark_env):
    (plain_spark_env / "conf" / "spark-defaults.conf").write_text("spark.driver.cores 2\n")
    assert engine_without_session(settings(plain_spark_env)) == "delta-rs"
