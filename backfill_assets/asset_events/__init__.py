"""What the pipeline records in Dagster about what it wrote, below every layer that records it
(the asset steps, the corrections' lifecycle):

- ``lineage``: what each partition write records about itself, in the Delta commit and in Dagster;
- ``fact_metadata``: a published fact day's figures and what changed against the version it
  replaced;
- ``event_times``: each materialization and observation stored in a millisecond of its own;
- ``materializations``: what Dagster has on record per partition (its latest materialization).
"""
