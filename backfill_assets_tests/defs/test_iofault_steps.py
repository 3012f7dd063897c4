"""One whole step each of the pipeline (raw, the event days, LTV) failed by an I/O error where
it matters most: the commit that raises after it landed, the manifest write that confirms it,
and the step's last cleanup; and a correction's run of the event days (its record's first
save, its cleanup) (``iofault_steps.py``; ``bench/iofault.py --steps`` sweeps every
point)."""

from __future__ import annotations

import pytest

from backfill_assets_tests import iofault_steps as h
from backfill_assets_tests.pipeline_env import pipeline_env

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("iofault-steps")
    with pipeline_env(root, start_date=h.FIRST.isoformat()) as penv:
        yield penv, h.prepare(penv)


@pytest.mark.parametrize("step", h.STEPS, ids=lambda s: s.name)
def test_a_step_failed_at_its_commit_its_confirmation_or_its_cleanup_converges(env, step, tmp_path):
    penv, before = env
    template = h.step_template(penv, before, step)
    names = h.operations(penv, template, step, tmp_path / "ops.log")
    assert names[-1] == "manifest.delete"  # leaving the step closes what it staged
    if step.correction:  # nothing is committed: the days are kept into the correction's version
        assert "commit" not in names
        points = [names.index("record.write") + 1, len(names)]
    else:
        landed = names.index("commit.landed") + 1
        confirm = names.index("manifest.write", landed) + 1
        assert names[landed - 2] == "commit" and confirm > landed
        # The commit that raises after landing on the event days only: the suite's time.
        points = [landed, confirm, len(names)] if step is h.EVENT_DAYS else [confirm, len(names)]
    problems = []
    for n in points:
        problems += h.run_point(penv, template, step, n)
    assert not problems, "\n".join(problems)
