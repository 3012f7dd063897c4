"""A built correction's actions as Dagster jobs: diff, cutover, rollback and discard from the
launchpad, each a run tagged with the correction's id."""
