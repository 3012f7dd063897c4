"""The event-day step: staging and fact of a range of event days, built as one Dagster step.

Why one step for two layers: a day that fails a staging check must be held in staging *and*
in the fact, while every other day of the range is published in both. As two steps, Dagster
would skip the whole downstream fact range when one staging day fails its blocking check.
So ``assets.py`` declares both assets in one multi-asset, the ``event_days`` package (beside
``defs/``) builds and audits each layer, and ``checks.py`` declares both layers' checks. The step is
subsettable: selecting only the fact rebuilds it from the published staging days.
"""
