"""``--reverse-order``: the selected tests run last to first; ``--reverse-module PATH`` (any
number of times): the tests of that module run last to first, where the module runs anyway. A
test that relies on an earlier one having run (state it left in a module's shared fixture)
fails so. ``make test`` reverses the modules that share expensive state within the whole run
(``ORDER_TESTS``), at no extra cost; ``make test-order`` runs them alone, reversed."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reverse-order",
        action="store_true",
        help="run the selected tests in reverse order (each must pass whatever ran before it)",
    )
    parser.addoption(
        "--reverse-module",
        action="append",
        default=[],
        metavar="PATH",
        help="run this test module's tests in reverse order, where the module runs",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--reverse-order"):
        items.reverse()
    for module in config.getoption("--reverse-module"):
        places = [i for i, item in enumerate(items) if item.nodeid.split("::")[0] == module]
        for place, item in zip(places, [items[i] for i in reversed(places)], strict=True):
            items[place] = item
