"""Lake test fixtures: engine-parametrised ``lake`` and ``engine``, and the native delta-spark
delegation.

The native engine needs a Spark session with Delta's jars, which the shared
session has not. When set-up fetched them, every selected ``delta-spark`` test of
the lake directory (and the cross-engine ones) is run for real in one child pytest
(``BACKFILL_LAKE_NATIVE_SESSION=1``), whose ``spark`` is the pipeline's own
delta-spark session: one JVM with Delta's jars for the whole directory instead of
one per module. The child starts as soon as the parent has collected, at a lower priority, and
runs beside the parent's other tests (much of whose time is spent waiting on servers and
daemons); the first native test in the parent waits for it. Each parent test passes or fails
with its own case's outcome there. Without the jars they fail, naming the set-up step that
downloads them.

A module that sets ``ON_S3 = True`` also runs each ``lake`` test on ``delta-rs-s3``: a lake at
``s3://<bucket>/lake`` on the session's SeaweedFS server (``demo/local_s3.py``), a bucket per test.
One that also sets ``ON_S3_SPARK`` (True, or a frozenset of test names: the suite's time is
counted) runs them on ``delta-spark-s3`` too: the same lake on the delta-spark engine, in the
native child (whose session has the s3a jars `make test` downloads; without them those cases
fail, saying so).
"""

from __future__ import annotations

import os

import pytest

from backfill_assets.spark.delta_jars import S3A, jars_present
from backfill_assets_testkit.child_pytest import ChildPytest, Outcomes
from backfill_assets_tests.lake.lake_support import NATIVE_ENV, NO_JARS, native_spark_conf

ENGINES = ["delta-rs", "delta-spark"]
ON_S3 = "delta-rs-s3"  # the delta-rs engine on a lake in S3, for the modules that ask for it
ON_S3_SPARK = "delta-spark-s3"  # delta-spark on a lake in S3, for the modules that ask for it
NO_S3A_JARS = (
    "the s3a jars are not in their folder (BACKFILL_S3A_JARS, else .jars/s3a): run `make "
    "test`, or `.venv/bin/python -m backfill_assets.spark.delta_jars --s3a`, which downloads them"
)
IN_NATIVE_CHILD = os.environ.get(NATIVE_ENV) == "1"
# pytest-xdist's workers each collect every test: a child of each would run the native cases once
# more, so none starts one, and those cases fail there
IN_XDIST_WORKER = bool(os.environ.get("PYTEST_XDIST_WORKER"))
IN_XDIST = (
    "the lake's delta-spark cases run in one child pytest of their own, which pytest-xdist's "
    "workers do not start: run them without -n (`make test` does)"
)
# fixtures whose tests need Delta's jars whatever the params
NATIVE_FIXTURES = {"two_engines", "s3a_spark"}
_SELECTED = pytest.StashKey[list]()
CHILD_TIMEOUT = 2400  # seconds for the one native run of the whole directory


if IN_NATIVE_CHILD:

    @pytest.fixture(scope="session")
    def spark():
        """In the native child, every lake test runs on a session with Delta's jars."""
        from backfill_assets.spark.session import build_session

        session = build_session(native_spark_conf())
        session.sparkContext.setLogLevel("ERROR")
        yield session
        session.stop()


def _needs_native(item) -> bool:
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    return (
        "delta-spark" in params
        or ON_S3_SPARK in params
        or bool(NATIVE_FIXTURES & set(item.fixturenames))
    )


def pytest_itemcollected(item) -> None:
    """A case that needs Delta's jars runs in the native child, another process: it is ``slow``,
    so ``make test-fast`` leaves it (and the child's JVM) to ``make test``."""
    if _needs_native(item):
        item.add_marker(pytest.mark.slow)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Remember the selected tests that must run in the native child.

    In the parent, the first of them waits for the whole child run, so each may take as
    long as that run (its own assertions ran in the child, under the usual timeout).
    """
    _drop_same_cases(config, items)
    _drop_s3_cases(config, items)
    selected = [item.nodeid for item in items if _needs_native(item)]
    config.stash[_SELECTED] = selected
    if not IN_NATIVE_CHILD:
        for item in items:
            if _needs_native(item):
                item.add_marker(pytest.mark.timeout(CHILD_TIMEOUT + 120))
        if selected and jars_present() and not IN_XDIST_WORKER:
            _child.append(_start_child(selected))


def pytest_unconfigure(config) -> None:
    """A child still running when the parent stops (interrupted, or no native test reached)
    is stopped with its JVM; its folder goes."""
    for child in _child:
        child.stop()


def _drop_same_cases(config, items) -> None:
    """Deselect a case marked ``same_case_as(engine, case)`` or ``left_to_bench(engine, bench)``
    on that engine: it would repeat the other case, or the other engine's case of shared code
    that the benchmark sweeps there, so it is not run (nor reported skipped) on that engine."""
    dropped = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        for name in ("same_case_as", "left_to_bench"):
            mark = item.get_closest_marker(name)
            if mark and callspec is not None and mark.args[0] in callspec.params.values():
                dropped.append(item)
                break
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]


def _drop_s3_cases(config, items) -> None:
    """Deselect the ``delta-rs-s3`` case of a test whose module did not set ``ON_S3 = True``
    (its body reaches into the lake's local folder), and the ``delta-spark-s3`` case of one
    whose module did not set ``ON_S3_SPARK`` to True or to a frozenset naming the test."""

    def params(item) -> list:  # a list: a param value may be unhashable
        return list(getattr(getattr(item, "callspec", None), "params", {}).values())

    def spark_wanted(item) -> bool:
        wanted = getattr(item.module, "ON_S3_SPARK", False)
        return item.originalname in wanted if isinstance(wanted, frozenset) else bool(wanted)

    dropped = [
        item
        for item in items
        if (ON_S3 in params(item) and not getattr(item.module, "ON_S3", False))
        or (ON_S3_SPARK in params(item) and not spark_wanted(item))
    ]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]


_child: list[ChildPytest] = []


def _start_child(node_ids: list[str]) -> ChildPytest:
    # niced: the parent's tests, some of which wait on timed events, keep the CPU first
    return ChildPytest.start("native", node_ids, {NATIVE_ENV: "1"}, CHILD_TIMEOUT, nice=10)


def _native_twin(request) -> Outcomes:
    """The outcomes of every selected native test in the child (started at collection)."""
    if not _child:  # not started at collection: only when the jars arrived during the run
        _child.append(_start_child(request.config.stash.get(_SELECTED, [])))
    return _child[0].result()


def engine_or_twin(request, name: str):
    """``name`` where it can run here; a twin of the child's run for delta-spark in the parent."""
    if name == "delta-rs" or (IN_NATIVE_CHILD and name in ("delta-spark", ON_S3_SPARK)):
        if name == ON_S3_SPARK and not S3A.present():
            pytest.fail(NO_S3A_JARS, pytrace=False)
        return name
    if IN_XDIST_WORKER:
        pytest.fail(IN_XDIST, pytrace=False)
    if not jars_present():
        pytest.fail(NO_JARS, pytrace=False)
    if name == ON_S3_SPARK and not S3A.present():
        pytest.fail(NO_S3A_JARS, pytrace=False)
    return _native_twin(request)


@pytest.fixture(params=[*ENGINES, ON_S3, ON_S3_SPARK])
def lake(request, tmp_path):
    from backfill_assets.lake import Lake

    if request.param == ON_S3:
        bucket = request.getfixturevalue("s3_bucket")
        return Lake(f"s3://{bucket}/lake", request.getfixturevalue("spark"), engine="delta-rs")
    engine = engine_or_twin(request, request.param)
    if engine == ON_S3_SPARK:
        bucket = request.getfixturevalue("s3_bucket")
        spark = request.getfixturevalue("spark")
        return Lake(f"s3://{bucket}/lake", spark, engine="delta-spark")
    if isinstance(engine, Outcomes):
        return engine
    return Lake(tmp_path / "lake", request.getfixturevalue("spark"), engine=engine)


@pytest.fixture(scope="module", params=ENGINES)
def engine(request):
    """The engine a module's multi-process tests write with (delta-spark: a twin in the parent)."""
    return engine_or_twin(request, request.param)


@pytest.fixture
def two_engines(request, tmp_path):
    """(delta-rs Lake, delta-spark Lake) on one root and one session with Delta's jars."""
    from backfill_assets.lake import Lake

    twin = engine_or_twin(request, "delta-spark")
    if isinstance(twin, Outcomes):
        return twin
    spark = request.getfixturevalue("spark")
    return (
        Lake(tmp_path / "lake", spark, engine="delta-rs"),
        Lake(tmp_path / "lake", spark, engine="delta-spark"),
    )


@pytest.fixture
def s3a_spark(request):
    """The native child's session, which has the s3a jars (a twin in the parent)."""
    twin = engine_or_twin(request, ON_S3_SPARK)
    if isinstance(twin, Outcomes):
        return twin
    return request.getfixturevalue("spark")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """In the parent, a native test takes the outcome its twin had in the child."""
    twin = next((v for v in pyfuncitem.funcargs.values() if isinstance(v, Outcomes)), None)
    if twin is None:
        return None
    outcome = twin.of(pyfuncitem.nodeid)
    if outcome.status == "failed":
        pytest.fail(f"native delta-spark run failed:\n{outcome.text}", pytrace=False)
    if outcome.status == "skipped":
        pytest.skip(outcome.text)
    return True
