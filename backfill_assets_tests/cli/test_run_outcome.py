"""A run's outcome as the CLI reads it back from the event log: a page of events at a time, so a
year's run (thousands of check evaluations and materializations) is never held at once."""

from __future__ import annotations

from datetime import date

import dagster as dg
import pytest

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.cli.runner import outcome_of_run
from backfill_assets_tests.test_event_log import KEYS, ranged_run

PROBE = dg.AssetKey("probe")


@pytest.mark.parametrize("page", [1, 3, 1000])
def test_the_outcome_is_read_whole_whatever_the_page_size(tmp_path, page):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        run_id = ranged_run(instance)
        plan = RunPlan((PROBE,), date(2024, 1, 1), date(2024, 1, 10))
        outcome = outcome_of_run(instance, plan, run_id, False, page=page)  # a check failed

    days = [date.fromisoformat(k) for k in KEYS]
    assert outcome.published == {PROBE: dict.fromkeys(days, 0)}  # no row counts in its metadata
    assert outcome.failed_checks == {PROBE: {date(2024, 1, 5): ["probe_check"]}}
    assert outcome.warnings == {} and outcome.held == {}
    # Dagster fails the step on the blocking check: its STEP_FAILURE, among the run's last events,
    # is read too.
    assert (
        "1 blocking asset check failed" in outcome.error and "probe: probe_check" in outcome.error
    )


def test_a_step_that_failed_after_its_retries_is_summed_up_by_its_cause(tmp_path):
    @dg.asset(retry_policy=dg.RetryPolicy(max_retries=2))
    def probe():
        raise RuntimeError("hadoop-aws is not on the class path")

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = dg.materialize([probe], instance=instance, raise_on_error=False)
        plan = RunPlan((PROBE,), date(2024, 1, 1), date(2024, 1, 1))
        outcome = outcome_of_run(instance, plan, result.run_id, result.success)

    assert not result.success
    # Dagster's own message for the last attempt is "Exceeded max_retries of 2": the summary
    # names what failed instead
    assert "hadoop-aws is not on the class path" in outcome.error
    assert "max_retries" not in outcome.error
