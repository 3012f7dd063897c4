"""The automation's state in the Dagster instance: the late-data cursor, what raw is built,
which pending groups may run, and the run requests (``state``). The sensors and schedules in
``defs/automation/`` and ``backfill-assets catch-up`` share it; it never imports ``defs/``."""
