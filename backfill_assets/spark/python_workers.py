"""What each of the project's tasks does first in Spark's Python workers.

Spark's Python daemon forks one worker per task slot and reuses it for task after task, and
after each task it collects the worker's garbage in full (``gc.collect()``): a walk over every
object the worker holds, most of them the modules it imported (pyspark, pyarrow, pandas, the
project's) and never garbage. A backfill runs hundreds of such tasks where the lake's files
are read and written through pyarrow (``lake/parquet_writer.py``, and on S3
``lake/s3_files.py`` and ``landing/s3_texts.py``), so those walks added up to more CPU than
the tasks' own work (docs/benchmarks.md, "The lake on S3").

``freeze_worker_heap`` moves what the worker holds when a task starts into the collector's
permanent generation (``gc.freeze``): the collection after the task walks only what the task
left. Objects frozen are still freed when nothing refers to them; a reference cycle among them
(the task's own unpickled function is alive when it starts) stays until the worker exits: a
few objects per task, against a walk of the whole heap per task.
"""

from __future__ import annotations

import gc


def freeze_worker_heap() -> None:
    """Spare the objects the worker holds now from every later collection's walk."""
    gc.freeze()
