"""One whole step each of the pipeline (raw, the event days, LTV, a correction) failed by an I/O
error at one point where it matters most, a different kind of point for each: the manifest
write that confirms raw's commit, the event days' commit that raises after it landed, LTV's
last cleanup, and the correction record's first save (``iofault_steps.py``;
``bench/iofault.py --steps`` sweeps every point of every step, on both engines)."""

from __future__ import annotations

import pytest

from backfill_assets_testkit import iofault_steps as h
from backfill_assets_testkit.pipeline_env import pipeline_env

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("iofault-steps")
    with pipeline_env(root, start_date=h.FIRST.isoformat()) as penv:
        yield penv, h.prepare(penv)


def point(step: h.Step, names: list[str]) -> int:
    """The one operation (1-based) failed in ``step``, whose operations are ``names``."""
    if step.correction:  # nothing is committed: the days are kept into the correction's version
        assert "commit" not in names
        return names.index("record.write") + 1
    landed = names.index("commit.landed") + 1
    confirm = names.index("manifest.write", landed) + 1
    assert names[landed - 2] == "commit" and confirm > landed
    return {h.RAW: confirm, h.EVENT_DAYS: landed, h.LTV: len(names)}[step]


@pytest.mark.parametrize("step", h.STEPS, ids=lambda s: s.name)
def test_a_step_failed_at_its_commit_its_confirmation_or_its_cleanup_converges(env, step, tmp_path):
    penv, before = env
    template = h.step_template(penv, before, step)
    names = h.operations(penv, template, step, tmp_path / "ops.log")
    assert names[-1] == "manifest.delete"  # leaving the step closes what it staged
    problems = h.run_point(penv, template, step, point(step, names))
    assert not problems, "\n".join(problems)
