"""The PostgreSQL tests' server: one throwaway PostgreSQL on 127.0.0.1 for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from backfill_assets_testkit.postgres_server import NO_SERVER, postgres_server, server_bin_dir


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URL of a database on a fresh server; a failure naming the set-up step where no server
    binaries exist."""
    if server_bin_dir() is None:
        pytest.fail(NO_SERVER, pytrace=False)
    with postgres_server() as url:
        yield url
