"""The pipeline on a Spark Connect server (started from the pyspark wheel on 127.0.0.1) via
BACKFILL_SPARK_REMOTE."""

from __future__ import annotations

import pytest

from backfill_assets_testkit.pipeline_env import pipeline_env
from backfill_assets_testkit.remote_backfill import (
    assert_held_day_backfill_matches_reference,
    backfill_in_child,
    write_held_day_feed,
)
from backfill_assets_testkit.spark_servers import connect_server

# a Connect server's start, mostly waited on: the side lane
pytestmark = [pytest.mark.slow, pytest.mark.beside]


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    with connect_server(tmp_path_factory.mktemp("connect")) as url:
        yield url


def test_backfill_through_spark_connect_with_a_held_day_matches_the_contract(connect_url, tmp_path):
    """delta-rs commits what the Connect server's executors computed; the held day stays out."""
    with pipeline_env(tmp_path) as env:
        reference = write_held_day_feed(env.settings.landing_dir)
        proc = backfill_in_child({"BACKFILL_SPARK_REMOTE": connect_url})
        assert_held_day_backfill_matches_reference(env, reference, proc)
