"""Versioned corrections: rebuild history beside production, diff it, cut over, roll back.

The life of a correction (``registry.State``):

1. **staged**: a run of the event-days step tagged with the correction's id
   (``backfill-assets correct``, or ``correction_job`` in the UI) builds staging and fact for
   a range and runs every check, but publishes nothing: the passing days stay in one staged
   version per table, named by the correction's id (``lake/manifests.py``). Production readers
   see nothing of it.
2. **diffed**: ``diff`` compares each staged partition with production's, row by row by key,
   and the fact's totals before and after (``diff.py``).
3. **cut over**: ``cutover`` publishes the passing days, one commit per table, staging before
   fact: a metadata swap, no data copied (``lifecycle.py``, as are rollback and discard).
4. **rolled back**: ``rollback`` points exactly those partitions back at their pre-cutover
   files, one commit per table. A rolled-back correction can be cut over again.
5. **discarded** / **decommissioned**: its staged files are deleted, by hand or by maintenance
   after ``BACKFILL_RETENTION_DAYS``; after that, no rollback.

Each correction's record is one JSON file under ``<lake>/_corrections/`` (``registry.py``),
saved as a compare-and-swap. A run keeps its days into the correction after saving the record
back to staged (``keeping.py``); a cutover publishes only the files its diff compared.
Cutover, rollback and discard record their intent there first, with a lease, and recover when
interrupted (``journal.py``, ``lease.py``, ``recovery.py``); ``forget`` sets aside a record
that cannot be read (``repair.py``).
"""
