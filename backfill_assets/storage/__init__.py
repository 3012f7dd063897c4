"""Where the project's files live, a local folder or an S3 bucket, behind one small interface
(``stores.py``): the lake's own files beside Delta, the landing zone, the late-data scan, the
corrections' records and the demo's feed all go through it. ``s3_preflight.py`` is the check a
location on S3 passes before anything is written there."""


class StorageError(ValueError):
    """A location the storage cannot serve: a missing bucket, bad credentials or endpoint, a
    store that ignores conditional puts. The message names the setting to fix."""
