"""The one place the environment is read: every ``BACKFILL_*`` variable, ``DAGSTER_HOME``, and
the standard AWS variables a lake on S3 is reached with (``S3Settings``).

Nothing is read at import. Each group of settings is a frozen dataclass with a loader, run when
the part that needs it runs, so that a bad value fails that part and nothing else, with the
error naming the variable: ``Settings.from_env`` when Dagster loads the definitions or the CLI
starts (with the first partition `make demo` recorded under ``DAGSTER_HOME``: see
``first_partition``); ``AutomationSettings.from_env`` when the automation is declared or
``catch-up`` runs; ``retention_days`` when maintenance runs or a ``Lake`` is opened (the
retention its tables are created with); ``SparkSettings.from_env`` when a Spark conf is
built; ``RunSettings.from_env`` when a commit records its code version, a correction its
author, or the CLI starts a run; ``pg_url`` and ``dagster_home`` when the
Dagster instance is set up; ``fault_settings`` at a test's pause point; ``S3Settings.from_env``
when a lake on S3 is opened. Every loader takes an ``env`` mapping (default: the process's
environment), for tests.

Each variable is documented here, next to where it is read; docs/configuration.md's table
lists them all with their defaults (``test_settings.py`` keeps the table complete, and keeps
every other module from reading the environment). Only this module reads it: code that starts
another process still writes the variables that process's settings are read from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TypeVar

Env = Mapping[str, str]

# The warning checks' names (event_days/quality.py) that BACKFILL_BLOCKING_QUALITY_CHECKS
# may name; spelled here so a typo in the variable is an error, not a silently warning check.
QUALITY_CHECK_NAMES = (
    "row_count_band",
    "status_share_band",
    "currency_share_band",
    "revenue_per_order_band",
)
SKEW_MODES = ("auto", "on", "off")


def _environ(env: Env | None) -> Env:
    return os.environ if env is None else env


def environment_key() -> frozenset[tuple[str, str]]:
    """This process's whole environment, hashable: what every setting is read from, so a key
    for what is built from them (``definitions.defs``)."""
    return frozenset(os.environ.items())


def dagster_home(env: Env | None = None) -> Path:
    """``DAGSTER_HOME``, the Dagster instance's folder (default ``.dagster_home``)."""
    return Path(_environ(env).get("DAGSTER_HOME", ".dagster_home"))


@dataclass(frozen=True)
class QualitySettings:
    """The warning checks' bands (docs/contract.md, "Warning checks")."""

    band_k: float = 4.0  # BACKFILL_BAND_K: half-width in robust standard deviations (1.4826 * MAD)
    trailing_days: int = 28  # BACKFILL_BAND_TRAILING_DAYS
    # BACKFILL_BAND_MIN_HISTORY: fewer trailing days with figures: "not enough history", passes
    min_history: int = 7
    # BACKFILL_BLOCKING_QUALITY_CHECKS (comma-separated): checks that hold the day, not warn
    blocking: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SkewSettings:
    """Partition-key skew: when a key is hot, and whether staging salts its write."""

    hot_key_share: float = 0.2  # BACKFILL_HOT_KEY_SHARE, below 1
    mitigation: str = "auto"  # BACKFILL_SKEW_MITIGATION; auto: when a key is hot; on; off
    salt_buckets: int = 8  # BACKFILL_SALT_BUCKETS


@dataclass(frozen=True)
class Settings:
    """The pipeline's settings, read when the definitions load or the CLI starts."""

    # BACKFILL_LANDING_DIR (data/landing), the input, only read; BACKFILL_LAKE_DIR (data/lake),
    # the Delta tables: each a local folder (made absolute) or s3://bucket/prefix (``location``)
    landing_dir: Path | str
    lake_dir: Path | str
    start_date: date  # the first daily partition: see ``first_partition``
    max_lateness_days: int  # BACKFILL_MAX_LATENESS_DAYS (7): how late an order may still count
    rate_max_age_days: int = 7  # the contract's fixed as-of window for FX rates
    segments: SegmentSettings | None = None  # the segment service; None: not configured
    quality: QualitySettings = field(default_factory=QualitySettings)
    skew: SkewSettings = field(default_factory=SkewSettings)
    start_date_configured: bool = False  # BACKFILL_START_DATE is set (the demo keeps to it)

    @classmethod
    def from_env(cls, env: Env | None = None) -> Settings:
        env = _environ(env)
        lake = lake_location(env.get("BACKFILL_LAKE_DIR", "data/lake"))
        try:
            start = first_partition(env, lake)
            lateness = int(env.get("BACKFILL_MAX_LATENESS_DAYS", "7"))
        except ValueError as exc:
            raise ValueError(
                f"bad BACKFILL_START_DATE or BACKFILL_MAX_LATENESS_DAYS: {exc}"
            ) from exc
        if lateness < 0:
            raise ValueError("BACKFILL_MAX_LATENESS_DAYS must be >= 0")
        return cls(
            landing_dir=location(
                "BACKFILL_LANDING_DIR", env.get("BACKFILL_LANDING_DIR", "data/landing")
            ),
            lake_dir=lake,
            start_date=start,
            max_lateness_days=lateness,
            segments=SegmentSettings.from_env(env),
            quality=quality_from_env(env),
            skew=skew_from_env(env),
            start_date_configured=bool(env.get("BACKFILL_START_DATE")),
        )


def lake_location(text: str) -> Path | str:
    """``BACKFILL_LAKE_DIR`` as ``location`` reads it. ValueError for a path with a folder named
    with a percent escape (``a%20b``): delta-rs decodes it, even from a URL's own escape, and
    looks for every table under ``a b``."""
    lake = location("BACKFILL_LAKE_DIR", text)
    parts = lake.split("/") if isinstance(lake, str) else lake.parts
    for part in parts:
        if re.search(r"%[0-9A-Fa-f]{2}", part):
            raise ValueError(
                f"BACKFILL_LAKE_DIR has a folder named with a percent escape, {part!r}, which "
                "the Delta reader decodes (it would look for every table elsewhere): rename it"
            )
    return lake


def location(name: str, text: str) -> Path | str:
    """A folder setting's value: a local folder, made absolute, or ``s3://bucket/prefix`` as a
    string without a trailing or doubled slash. ValueError, naming the setting, for an S3
    location without a bucket or of another scheme than ``s3://``."""
    text = text.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        return Path(text).resolve()
    if scheme != "s3":
        raise ValueError(f"{name} must be a local folder or s3://bucket/prefix, got {text!r}")
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValueError(f"{name} names no bucket: s3://<bucket>/<prefix>, got {text!r}")
    key = "/".join(part for part in key.split("/") if part)
    return f"s3://{bucket}/{key}" if key else f"s3://{bucket}"


def s3_in_use(env: Env | None = None) -> bool:
    """Whether ``BACKFILL_LAKE_DIR`` or ``BACKFILL_LANDING_DIR`` is an ``s3://`` location (set-up
    then fetches the s3a jars as well)."""
    env = _environ(env)
    return any(
        env.get(name, "").strip().startswith("s3://")
        for name in ("BACKFILL_LAKE_DIR", "BACKFILL_LANDING_DIR")
    )


# In the demo's lake: the first partition `make demo` recorded (``cli/demo.py`` writes it). "_":
# no table's name, and a name Delta's readers and vacuum skip.
FIRST_PARTITION_FILE = "_demo_first_partition"
DEFAULT_START_DATE = date(2024, 1, 1)


def first_partition(env: Env, lake: Path | str) -> date:
    """The first daily partition, one rule for every process (the CLI, `make ui`'s webserver and
    daemon, the runs): ``BACKFILL_START_DATE`` when set; else the date `make demo` recorded in
    the local ``lake`` it built (``<lake>/_demo_first_partition``), so a lake of other data, or the
    demo's folder emptied, starts where the contract says; else 2024-01-01."""
    configured = env.get("BACKFILL_START_DATE")
    if configured:
        return date.fromisoformat(configured)
    if isinstance(lake, str):  # on S3: the demo's own server is gone once it ends
        return DEFAULT_START_DATE
    recorded = lake / FIRST_PARTITION_FILE
    try:
        text = recorded.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return DEFAULT_START_DATE
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{recorded} (the demo's first partition) holds {text!r}, not a date: "
            "delete it or set BACKFILL_START_DATE"
        ) from None


@dataclass(frozen=True)
class SegmentSettings:
    """How ``stg_orders_enriched`` reaches the customer-segment service (``enrichment.client``)."""

    url: str  # BACKFILL_SEGMENTS_URL; unset: not configured, the enrichment's days are held
    rps: int = 20  # BACKFILL_SEGMENTS_RPS: the service's limit, which the shared bucket keeps to
    live_share: float = 0.4  # BACKFILL_SEGMENTS_LIVE_SHARE: of the bucket, for the live lane
    batch_size: int = 50  # BACKFILL_SEGMENTS_BATCH: customers per request
    # BACKFILL_SEGMENTS_BUCKET: the shared bucket's state ($DAGSTER_HOME/segments_bucket.json)
    bucket_path: Path = Path(".dagster_home/segments_bucket.json")

    @classmethod
    def from_env(cls, env: Env | None = None) -> SegmentSettings | None:
        """None when ``BACKFILL_SEGMENTS_URL`` is unset: the enrichment's days are then held."""
        env = _environ(env)
        url = env.get("BACKFILL_SEGMENTS_URL", "").strip()
        if not url:
            return None
        try:
            rps = int(env.get("BACKFILL_SEGMENTS_RPS", "20"))
            share = float(env.get("BACKFILL_SEGMENTS_LIVE_SHARE", "0.4"))
            batch = int(env.get("BACKFILL_SEGMENTS_BATCH", "50"))
        except ValueError as exc:
            raise ValueError(f"bad BACKFILL_SEGMENTS_RPS, _LIVE_SHARE or _BATCH: {exc}") from exc
        if rps < 2 or not 0 <= share < 1 or batch < 1:
            raise ValueError(
                "need BACKFILL_SEGMENTS_RPS >= 2, 0 <= BACKFILL_SEGMENTS_LIVE_SHARE < 1, "
                "BACKFILL_SEGMENTS_BATCH >= 1"
            )
        bucket = Path(
            env.get("BACKFILL_SEGMENTS_BUCKET", str(dagster_home(env) / "segments_bucket.json"))
        ).resolve()
        return cls(url=url, rps=rps, live_share=share, batch_size=batch, bucket_path=bucket)

    @classmethod
    def service_rps(cls, env: Env | None = None) -> int:
        """The rate a service started here (the demo's, before it has a URL) allows."""
        return int(_environ(env).get("BACKFILL_SEGMENTS_RPS", str(cls.rps)))


_N = TypeVar("_N", int, float)


def _number(
    env: Env,
    name: str,
    default: str,
    kind: Callable[[str], _N],
    low: float = 0.0,
) -> _N:
    try:
        value = kind(env.get(name, default))
    except ValueError as exc:
        raise ValueError(f"bad {name}: {exc}") from exc
    if value < low:
        raise ValueError(f"{name} must be >= {low}")
    return value


def quality_from_env(env: Env) -> QualitySettings:
    names = frozenset(
        n.strip() for n in env.get("BACKFILL_BLOCKING_QUALITY_CHECKS", "").split(",") if n.strip()
    )
    unknown = sorted(names - set(QUALITY_CHECK_NAMES))
    if unknown:
        raise ValueError(
            f"BACKFILL_BLOCKING_QUALITY_CHECKS names unknown checks {unknown}; "
            f"known: {', '.join(QUALITY_CHECK_NAMES)}"
        )
    return QualitySettings(
        band_k=_number(env, "BACKFILL_BAND_K", "4", float, 0.0),
        trailing_days=_number(env, "BACKFILL_BAND_TRAILING_DAYS", "28", int, 1),
        min_history=_number(env, "BACKFILL_BAND_MIN_HISTORY", "7", int, 1),
        blocking=names,
    )


def skew_from_env(env: Env) -> SkewSettings:
    mode = env.get("BACKFILL_SKEW_MITIGATION", "auto")
    if mode not in SKEW_MODES:
        raise ValueError(
            f"BACKFILL_SKEW_MITIGATION must be one of {', '.join(SKEW_MODES)}, not {mode!r}"
        )
    share = _number(env, "BACKFILL_HOT_KEY_SHARE", "0.2", float, 0.0)
    if share >= 1:
        raise ValueError("BACKFILL_HOT_KEY_SHARE must be below 1")
    return SkewSettings(
        hot_key_share=share,
        mitigation=mode,
        salt_buckets=_number(env, "BACKFILL_SALT_BUCKETS", "8", int, 1),
    )


RECOUNT_MINUTES = 10.0  # how often the late-data scan counts every folder's files, by default


@dataclass(frozen=True)
class AutomationSettings:
    """How the late-data automation runs (``defs/automation``, ``backfill-assets catch-up``).

    ``BACKFILL_AUTOMATION=on`` (or ``1``, ``true``) starts the sensor and the schedules as
    RUNNING. Off by default: switching on a sensor that rebuilds history is an operator's
    decision (in the UI, or with this variable in a deployment), not a side effect of loading
    the code in a laptop's ``dagster dev`` or a test.
    """

    running: bool = False  # BACKFILL_AUTOMATION
    sensor_interval_seconds: int = 5  # BACKFILL_SENSOR_INTERVAL_SECONDS, >= 1
    # BACKFILL_LANDING_SETTLE_SECONDS, >= 0: a landing folder changed this recently is left alone
    settle_seconds: float = 2.0
    rerun_days: int = 3  # BACKFILL_RERUN_DAYS, >= 1: the days daily_refresh rebuilds
    # BACKFILL_LANDING_RECOUNT_MINUTES, >= 0 (0: every tick): how often the sensor counts every
    # landing folder's files, whatever the folder's change time (late_data/scan.py)
    recount_minutes: float = RECOUNT_MINUTES
    daily_cron: str = "0 2 * * *"  # BACKFILL_DAILY_CRON, UTC: when daily_refresh ticks

    @classmethod
    def from_env(cls, env: Env | None = None) -> AutomationSettings:
        env = _environ(env)
        try:
            settings = cls(
                running=env.get("BACKFILL_AUTOMATION", "off").strip().lower()
                in ("on", "1", "true"),
                sensor_interval_seconds=int(
                    env.get("BACKFILL_SENSOR_INTERVAL_SECONDS", str(cls.sensor_interval_seconds))
                ),
                settle_seconds=float(env.get("BACKFILL_LANDING_SETTLE_SECONDS", "2")),
                rerun_days=int(env.get("BACKFILL_RERUN_DAYS", "3")),
                recount_minutes=float(
                    env.get("BACKFILL_LANDING_RECOUNT_MINUTES", str(RECOUNT_MINUTES))
                ),
                daily_cron=env.get("BACKFILL_DAILY_CRON", cls.daily_cron).strip(),
            )
        except ValueError as exc:
            raise ValueError(f"bad late-data automation setting: {exc}") from exc
        if (
            settings.sensor_interval_seconds < 1
            or settings.settle_seconds < 0
            or settings.rerun_days < 1
            or not settings.recount_minutes >= 0
        ):
            raise ValueError(
                "need BACKFILL_SENSOR_INTERVAL_SECONDS >= 1, "
                "BACKFILL_LANDING_SETTLE_SECONDS >= 0, BACKFILL_RERUN_DAYS >= 1, "
                "BACKFILL_LANDING_RECOUNT_MINUTES >= 0"
            )
        # Imported here: cli/instance.py reads this module before Dagster may be imported.
        from backfill_assets.dagster_private import is_valid_cron_string

        if not is_valid_cron_string(settings.daily_cron):
            raise ValueError(
                f"BACKFILL_DAILY_CRON is not a cron expression: {settings.daily_cron!r}"
            )
        return settings

    @property
    def settle_ns(self) -> int:
        return int(self.settle_seconds * 1e9)

    @property
    def recount_ns(self) -> int:
        return int(self.recount_minutes * 60e9)


DEFAULT_MASTER = "local[*]"
# The serial collector, growing the heap when a full collection leaves less than 20% of it free
# (Java's default is 40%): the heap follows the live data more closely.
DRIVER_GC = "-XX:+UseSerialGC -XX:MinHeapFreeRatio=20"


@dataclass(frozen=True)
class SparkSettings:
    """The Spark session the pipeline runs with and the lake engine on it (``spark/session.py``).

    Read each time a Spark conf is built; no checks here: Spark and ``Lake`` name a bad value.
    """

    master: str = DEFAULT_MASTER  # BACKFILL_SPARK_MASTER, e.g. spark://host:7077
    remote: str | None = None  # BACKFILL_SPARK_REMOTE, a Spark Connect URL (sc://host:15002)
    driver_memory: str = "2g"  # BACKFILL_SPARK_DRIVER_MEMORY, the local driver's fixed heap
    driver_gc: str = DRIVER_GC  # BACKFILL_SPARK_DRIVER_GC, the driver JVM's collector option
    shuffle_partitions: str = "8"  # BACKFILL_SPARK_SHUFFLE_PARTITIONS
    lake_engine: str = "auto"  # BACKFILL_LAKE_ENGINE: auto, delta-rs or delta-spark
    delta_jars: Path | None = None  # BACKFILL_DELTA_JARS; None: the project's .jars/delta
    s3a_jars: Path | None = None  # BACKFILL_S3A_JARS; None: the project's .jars/s3a
    # BACKFILL_MAVEN_REPO: the Maven repository set-up downloads the jars from, a mirror with
    # Maven Central's layout; None: Maven Central (delta_jars.MAVEN_CENTRAL)
    maven_repo: str | None = None
    lake_on_s3: bool = False  # BACKFILL_LAKE_DIR is s3://...: delta-spark needs the s3a jars
    # BACKFILL_SPARK_CLASS_ARCHIVE: the driver JVM's class-data archive, a file or "off";
    # None: the project's .jars/spark-classes.jsa (spark/class_archive.py)
    class_archive: str | None = None
    java: str = "java"  # the java that runs Spark's driver: $JAVA_HOME/bin/java, else the PATH's
    # spark-submit's own sources of a session's conf, read only to know whether they may put
    # Delta into it (session.engine_without_session): PYSPARK_SUBMIT_ARGS, and where
    # spark-defaults.conf may be (SPARK_CONF_DIR; SPARK_HOME's conf)
    submit_args: str = ""
    conf_dir: str | None = None
    spark_home: str | None = None

    @classmethod
    def from_env(cls, env: Env | None = None) -> SparkSettings:
        env = _environ(env)
        jars = env.get("BACKFILL_DELTA_JARS")
        s3a = env.get("BACKFILL_S3A_JARS")
        return cls(
            master=env.get("BACKFILL_SPARK_MASTER", DEFAULT_MASTER),
            remote=env.get("BACKFILL_SPARK_REMOTE") or None,
            driver_memory=env.get("BACKFILL_SPARK_DRIVER_MEMORY", "2g"),
            driver_gc=env.get("BACKFILL_SPARK_DRIVER_GC", DRIVER_GC),
            shuffle_partitions=env.get("BACKFILL_SPARK_SHUFFLE_PARTITIONS", "8"),
            lake_engine=env.get("BACKFILL_LAKE_ENGINE", "auto"),
            delta_jars=Path(jars).absolute() if jars else None,
            s3a_jars=Path(s3a).absolute() if s3a else None,
            maven_repo=env.get("BACKFILL_MAVEN_REPO") or None,
            lake_on_s3=env.get("BACKFILL_LAKE_DIR", "").strip().startswith("s3://"),
            class_archive=env.get("BACKFILL_SPARK_CLASS_ARCHIVE") or None,
            java=str(Path(env["JAVA_HOME"], "bin", "java")) if env.get("JAVA_HOME") else "java",
            submit_args=env.get("PYSPARK_SUBMIT_ARGS", ""),
            conf_dir=env.get("SPARK_CONF_DIR") or None,
            spark_home=env.get("SPARK_HOME") or None,
        )


UTF8_CTYPE = "C.UTF-8"  # glibc's own UTF-8 locale, there without any locale installed


def jvm_locale(env: Env | None = None) -> dict[str, str]:
    """The locale variable to give the JVM this process starts, so that it reads file names as
    UTF-8: the JVM takes their charset (``sun.jnu.encoding``) from the character type, and no
    JVM option overrides it; under ``LC_ALL=C`` a landed ``é.jsonl`` is ``??.jsonl`` to it.
    {} when the character type in effect (LC_ALL, else LC_CTYPE, else LANG) is UTF-8; else
    C.UTF-8, in LC_ALL when that is the one set (it overrides the others), else in LC_CTYPE."""
    env = _environ(env)
    name, value = next(
        ((n, env[n]) for n in ("LC_ALL", "LC_CTYPE", "LANG") if env.get(n)), ("LANG", "")
    )
    if re.search(r"utf-?8", value, re.IGNORECASE):
        return {}
    return {"LC_ALL" if name == "LC_ALL" else "LC_CTYPE": UTF8_CTYPE}


RETENTION_ENV = "BACKFILL_RETENTION_DAYS"
DEFAULT_RETENTION_DAYS = 14.0
RETENTION_FLOOR_DAYS = 7.0
FLOOR_REASON = (
    "the floor protects in-flight writers' files: vacuum deletes files no version "
    "names once they are older than the retention, and that includes the files a "
    "running or retried backfill has written but not committed yet"
)


def retention_days(env: Env | None = None) -> float:
    """``BACKFILL_RETENTION_DAYS`` (default 14): how long vacuum keeps files no current version
    needs, and after which a correction is decommissioned; ValueError below the floor or not a
    number (``lake/maintenance.py``)."""
    text = _environ(env).get(RETENTION_ENV, str(DEFAULT_RETENTION_DAYS))
    try:
        days = float(text)
    except ValueError:
        raise ValueError(f"{RETENTION_ENV} must be a number of days, got {text!r}") from None
    check_retention(days)
    return days


def check_retention(days: float) -> None:
    if not days >= RETENTION_FLOOR_DAYS:  # also refuses NaN
        raise ValueError(
            f"refusing a retention of {days:g} days: {RETENTION_ENV} must be at "
            f"least {RETENTION_FLOOR_DAYS:g} days; {FLOOR_REASON}"
        )


@dataclass(frozen=True)
class RunSettings:
    """Who and what a run records, and how much the CLI shows of it; read where they are used."""

    code_version: str | None = None  # BACKFILL_CODE_VERSION; None: the checkout's git sha
    user: str | None = None  # BACKFILL_USER; None: the login name (a correction's author)
    log_level: str = "WARNING"  # BACKFILL_LOG_LEVEL: the CLI's console log of its runs
    # BACKFILL_RETRY_DELAY_SECONDS: a failed step's first retry waits this long, its second
    # three times as long (Dagster's exponential backoff)
    retry_delay_seconds: float = 5.0

    @classmethod
    def from_env(cls, env: Env | None = None) -> RunSettings:
        env = _environ(env)
        text = env.get(RETRY_DELAY_ENV, "5")
        try:
            delay = float(text)
        except ValueError:
            delay = float("nan")
        if not delay >= 0:  # also refuses NaN
            raise ValueError(f"{RETRY_DELAY_ENV} must be a number of seconds >= 0, got {text!r}")
        return cls(
            code_version=env.get("BACKFILL_CODE_VERSION") or None,
            user=env.get("BACKFILL_USER") or None,
            log_level=env.get("BACKFILL_LOG_LEVEL", "WARNING"),
            retry_delay_seconds=delay,
        )


RETRY_DELAY_ENV = "BACKFILL_RETRY_DELAY_SECONDS"


@dataclass(frozen=True)
class S3Settings:
    """How the lake reaches an ``s3://`` location (``storage/stores.py``): the standard AWS
    variables, and only them (no profile file, no instance role), read when a lake on S3 is
    opened. The keys never show in a repr, and so in no log or error that prints these."""

    endpoint: str | None = None  # AWS_ENDPOINT_URL; None: AWS's own for the region
    access_key_id: str | None = field(default=None, repr=False)  # AWS_ACCESS_KEY_ID
    secret_access_key: str | None = field(default=None, repr=False)  # AWS_SECRET_ACCESS_KEY
    region: str = "us-east-1"  # AWS_REGION
    allow_http: bool = False  # AWS_ALLOW_HTTP: true lets the endpoint be http://

    @classmethod
    def from_env(cls, env: Env | None = None) -> S3Settings:
        env = _environ(env)
        allow = env.get("AWS_ALLOW_HTTP", "false").strip().lower()
        if allow not in ("true", "false", "1", "0", ""):
            raise ValueError(f"AWS_ALLOW_HTTP must be true or false, got {allow!r}")
        return cls(
            endpoint=env.get("AWS_ENDPOINT_URL", "").strip().rstrip("/") or None,
            access_key_id=env.get("AWS_ACCESS_KEY_ID") or None,
            secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
            region=env.get("AWS_REGION", "").strip() or "us-east-1",
            allow_http=allow in ("true", "1"),
        )


PG_URL_ENV = "BACKFILL_DAGSTER_PG_URL"


def pg_url(env: Env | None = None) -> str | None:
    """``BACKFILL_DAGSTER_PG_URL``: the PostgreSQL URL of the Dagster instance's storage, or None
    for the embedded SQLite storage (``cli/instance.py``)."""
    url = _environ(env).get(PG_URL_ENV, "").strip()
    if not url:
        return None
    if not url.startswith(("postgresql://", "postgres://")):
        raise ValueError(f"{PG_URL_ENV} must be a postgresql://user@host:port/db URL")
    return url


@dataclass(frozen=True)
class FaultSettings:
    """A test's pause and failure points in the lake's write path (``testing/faults.py``)."""

    pause_dir: str  # BACKFILL_LAKE_PAUSE_DIR: unset, the points are inert
    pause_at: tuple[str, ...] = ()  # BACKFILL_LAKE_PAUSE_AT, comma-separated points
    fail_at: tuple[str, ...] = ()  # BACKFILL_LAKE_FAIL_AT, comma-separated points
    fail_times_text: str = "1"  # BACKFILL_LAKE_FAIL_TIMES: failures per point, over processes

    @property
    def fail_times(self) -> int:
        return int(self.fail_times_text)


def fault_settings(env: Env | None = None) -> FaultSettings | None:
    """None (after one look-up) unless a test set ``BACKFILL_LAKE_PAUSE_DIR``."""
    env = _environ(env)
    folder = env.get("BACKFILL_LAKE_PAUSE_DIR")
    if not folder:
        return None
    return FaultSettings(
        pause_dir=folder,
        pause_at=tuple(env.get("BACKFILL_LAKE_PAUSE_AT", "").split(",")),
        fail_at=tuple(env.get("BACKFILL_LAKE_FAIL_AT", "").split(",")),
        fail_times_text=env.get("BACKFILL_LAKE_FAIL_TIMES", "1"),
    )


def seam_armed(env: Env | None = None) -> bool:
    """True when a test armed the seam's hook for this process (``seam.py``): pause points
    (``BACKFILL_LAKE_PAUSE_DIR``) or an I/O-fault plan (``BACKFILL_IOFAULT``)."""
    return fault_settings(env) is not None or bool(iofault_plan(env))


def iofault_plan(env: Env | None = None) -> str:
    """``BACKFILL_IOFAULT``: the I/O seam's plan for this process (``testing/iofault.py``):
    ``count``, ``error:N`` or ``kill:N``; unset or empty, the seam is inert."""
    return _environ(env).get("BACKFILL_IOFAULT", "")


def iofault_log(env: Env | None = None) -> str:
    """``BACKFILL_IOFAULT_LOG``: a file the seam appends each operation's name to, when armed."""
    return _environ(env).get("BACKFILL_IOFAULT_LOG", "")
