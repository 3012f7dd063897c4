"""The small two-table lake of ``small_lake.py``, built once per module: with the correction
staged and diffed (``template``), and cut over (``cut_over``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill_assets.corrections import lifecycle
from backfill_assets_testkit.small_lake import CID, build, copy


@pytest.fixture(scope="module")
def template(tmp_path_factory, spark) -> Path:
    root = tmp_path_factory.mktemp("template") / "lake"
    build(root, spark)
    return root


@pytest.fixture(scope="module")
def cut_over(tmp_path_factory, template) -> Path:
    """The template with the correction cut over, cleanly."""
    root = tmp_path_factory.mktemp("cut") / "lake"
    lifecycle.cutover(copy(template, root), CID)
    return root
