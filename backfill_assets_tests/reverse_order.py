"""``--reverse-order``: the selected tests run last to first. A test that relies on an earlier
one having run (state it left in a module's shared fixture) fails so; ``make test-order`` runs
the modules that share expensive state that way."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reverse-order",
        action="store_true",
        help="run the selected tests in reverse order (each must pass whatever ran before it)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--reverse-order"):
        items.reverse()
