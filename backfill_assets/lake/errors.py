"""Every error the lake layer raises: one family under ``LakeError``, so a caller can tell a
refusal of the lake (a request it will not serve, a table it cannot serve correctly, a race it
lost) from any other failure, and which of them no retry changes (``LakeUnsupported``)."""

from __future__ import annotations


class LakeError(ValueError):
    """A request the lake layer refuses, or a table it cannot serve correctly."""


class LakeTableMissing(LakeError):
    """The table does not exist (no Delta log at its path)."""


class LakeUnsupported(LakeError):
    """A table in a state this engine cannot serve correctly (a reader feature, column mapping):
    no retry changes that; another engine, or the table's own rewrite, does."""

    def __init__(self, table: str, engine: str, features: list[str]) -> None:
        super().__init__(
            f"table {table} needs reader features {features} that the {engine} engine cannot "
            "honour: read it with Delta's own reader (BACKFILL_LAKE_ENGINE=delta-spark)"
        )
        self.table, self.engine, self.features = table, engine, features


class LakeConflict(LakeError):
    """A staged version's partitions changed in the table after it was staged: publishing it
    would replace data its audit never compared with. Stage and audit again."""


class TornCommit(LakeError):
    """The newest commit file of a table on local disk is not whole (a crash cut it short)."""


class ManifestChanged(LakeError):
    """A save or close of a manifest that another writer changed or closed after it was read."""


class BrokenManifest(LakeError):
    """A manifest on disk that is not a whole one (truncated, not JSON, keys missing)."""
