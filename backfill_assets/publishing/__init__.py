"""The write-audit-publish protocol the asset steps walk.

- ``publication``: ``Publication``, one step's walk: stage, audit each day, publish the days that
  passed, report them to Dagster, fail naming the held days; and ``published_step``, the
  ``multi_asset`` of a one-asset step that walks it;
- ``correcting``: the same protocol for a correction run: checked, kept staged, not published;
- ``run_workers``: the process executing each run, and the release of runs whose process died.

The definitions in ``defs/`` call it; it never imports them.
"""
