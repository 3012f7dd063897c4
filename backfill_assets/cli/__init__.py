"""The ``backfill-assets`` command and its machinery: planning ranged runs, executing them through
the Dagster instance in ``DAGSTER_HOME``, reporting, status and catch-up.

Nothing in ``defs/``, ``lake/``, ``transforms/``, ``landing/`` or ``late_data/`` imports this
package: it drives the definitions, the definitions never drive it.
"""
