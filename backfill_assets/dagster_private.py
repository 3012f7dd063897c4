"""Every name of Dagster's private modules (``dagster._*``) the project uses, in one place: what
the public API does not give. A Dagster upgrade that moves one breaks this module's import, and
``test_structure`` pins that no other module reaches into ``dagster._``.

- run tags Dagster itself sets and reads (a retry's, a backfill's, a partition's): the command
  line's runner and the late-data lane tell runs apart by them;
- the SQLite event log the instance is configured with (``event_log.py`` subclasses it to keep
  each file's engine), with ``ConfigurableClassData`` and the engine factory it is built from;
- the records the instance's storage returns, typed: asset summaries, check statuses, sensor
  state, a backfill's status, a step failure's data and the error inside it;
- ``RawMetadataMapping``, the metadata a step's events carry; ``is_valid_cron_string``, which the
  schedules' setting is checked with.
"""

from dagster._core.definitions.metadata import RawMetadataMapping
from dagster._core.definitions.run_request import InstigatorType
from dagster._core.events import StepFailureData
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.scheduler.instigation import InstigatorState, SensorInstigatorData
from dagster._core.storage.asset_check_execution_record import (
    AssetCheckExecutionRecordStatus,
)
from dagster._core.storage.event_log.base import AssetEventSummaryRecord
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
)
from dagster._core.storage.sql import create_engine
from dagster._core.storage.tags import (
    BACKFILL_ID_TAG,
    BACKFILL_TAGS,
    PARENT_RUN_ID_TAG,
    PARTITION_NAME_TAG,
    RESUME_RETRY_TAG,
    ROOT_RUN_ID_TAG,
    TAGS_TO_MAYBE_OMIT_ON_RETRY,
    WILL_RETRY_TAG,
)
from dagster._serdes import ConfigurableClassData
from dagster._utils.error import SerializableErrorInfo
from dagster._utils.schedules import is_valid_cron_string
