"""A correction started from the Dagster UI alone: ``correction_start_job``'s form (a range, a
reason, an optional id, the rebuild box) records the request, and the ``correction_requests``
sensor runs what ``backfill-assets correct`` runs: raw over the range first, then the correction's
build (``corrections/requests.py``). The sensor runs by default, whatever the automation
setting: it acts only on a request an engineer made.
"""

from datetime import date

import dagster as dg
from pydantic import Field

from backfill_assets.catalog import CORRECTION_REQUEST_SENSOR, CORRECTION_START_JOB
from backfill_assets.corrections import registry, requests
from backfill_assets.corrections.registry import CorrectionError
from backfill_assets.defs.automation.wiring import pipeline_sensor
from backfill_assets.settings import AutomationSettings, Settings


class CorrectionRequestForm(dg.Config):
    start: str = Field(description="The first event day to correct (YYYY-MM-DD).")
    end: str = Field(description="The last event day to correct (YYYY-MM-DD).")
    reason: str = Field(description="Why: shown to the people who read the numbers.")
    correction_id: str = Field(
        default="",
        description="Optional: the new correction's id (letters, digits, '-', '_'); left empty, "
        "one is made from the range's first day.",
    )
    rebuild: bool = Field(
        default=False,
        description="Tick to build days of the staged correction named by correction_id again "
        "(its held days, once their inputs are fixed).",
    )


def _day(name: str, text: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise CorrectionError(f"{name} is a day, YYYY-MM-DD; got {text!r}") from None


def build_correction_start_job(settings: Settings) -> dg.JobDefinition:
    # No postponed evaluation in this module: Dagster resolves an op's config class from its
    # annotation. The context stays unannotated, as in the other ops.
    @dg.op(name="request_correction")
    def request_correction(context, config: CorrectionRequestForm) -> dg.Output[None]:  # type: ignore[no-untyped-def]
        """Check the form as ``correct`` does, then record the request on this run's tags."""
        try:
            start, end = _day("start", config.start), _day("end", config.end)
            cid = config.correction_id.strip() or registry.new_id(start)
            reason = requests.check(settings, cid, config.reason, start, end, config.rebuild)
        except CorrectionError as exc:
            raise dg.Failure(
                description=f"{exc}. Nothing was built.", allow_retries=False
            ) from None
        request = requests.Request(context.run_id, cid, reason, start, end, config.rebuild)
        context.instance.add_run_tags(context.run_id, request.tags())
        context.log.info(
            f"correction {cid} of {start}..{end} requested: the {CORRECTION_REQUEST_SENSOR} "
            "sensor runs raw over the range, then builds the correction"
        )
        return dg.Output(None, metadata={"correction": cid, "range": f"{start}..{end}"})

    @dg.job(
        name=CORRECTION_START_JOB,
        description="Start a correction of staging and fact from a form: the range, a reason, an "
        "optional id, the rebuild box. The correction_requests sensor then runs raw over the "
        "range (the restated landing), then correction_job, as `backfill-assets correct` does; "
        "the runs are tagged backfill_assets/plan=<this run's id>.",
    )
    def correction_start_job() -> None:
        request_correction()

    return correction_start_job


def build_correction_request_sensor(
    settings: Settings, auto: AutomationSettings, jobs: list
) -> dg.SensorDefinition:
    """``jobs``: the backfill job (raw) and the correction job."""

    def correction_requests(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        """Carries out the corrections requested with correction_start_job: raw over the range,
        then the correction's build once every raw run succeeded."""
        runs, notes = [], []
        for request in requests.recent(context.instance):
            step = requests.next_step(context.instance, settings, request)
            runs += step.runs
            if step.note:
                notes.append(step.note)
        for note in notes:
            context.log.info(note)
        return dg.SensorResult(
            run_requests=runs,
            skip_reason=None if runs else ("; ".join(notes) or "no correction requested"),
        )

    return pipeline_sensor(
        auto, correction_requests, CORRECTION_REQUEST_SENSOR, dg.DefaultSensorStatus.RUNNING, jobs
    )
