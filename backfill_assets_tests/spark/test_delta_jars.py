"""Delta's and Hadoop's jars: set-up downloads each from Maven Central with the standard library,
checks it against its recorded sha256 and renames it into place, with no mvn; it fails naming
the jar when one cannot be had; once they are there it works offline; a bad jar stops a Delta
session before it starts."""

from __future__ import annotations

import hashlib
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from backfill_assets.spark import delta_jars, plain_line_jar
from backfill_assets.spark.delta_jars import JARS, DeltaJarsError, checked_jars, fetch
from backfill_assets.spark.s3a_jars import S3A_JARS
from backfill_assets.spark.session import build_session, check_delta_jars, spark_config
from backfill_assets_testkit.processes import REPO, subprocess_env

CENTRAL = "https://repo1.maven.org/maven2"
SET_UP_JARS = REPO / ".jars" / "delta"  # where `make setup` put Delta's jars


@pytest.fixture
def jar_folder(tmp_path, monkeypatch):
    folder = tmp_path / "jars"
    monkeypatch.setenv("BACKFILL_DELTA_JARS", str(folder))
    return folder


class Mirror:
    """A Maven repository on 127.0.0.1: ``files`` maps a path under its root to the bytes it
    serves (any other path is a 404); ``stall`` makes it send half a file's bytes and then
    nothing; ``asked`` records every path asked for."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.asked: list[str] = []
        self.stall = threading.Event()
        self.release = threading.Event()
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.lstrip("/")
                mirror.asked.append(path)
                body = mirror.files.get(path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if mirror.stall.is_set():
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    mirror.release.wait(60)
                    return
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mirror(monkeypatch) -> Iterator[Mirror]:
    """A local Maven repository that set-up downloads from (``BACKFILL_MAVEN_REPO``)."""
    served = Mirror()
    monkeypatch.setenv("BACKFILL_MAVEN_REPO", served.url)
    yield served
    served.close()


def jar_url_path(coordinates: str) -> str:
    """A jar's path under a Maven repository's root, spelled out here as Maven's layout has it."""
    group, artifact, version = coordinates.split(":")
    return "/".join([*group.split("."), artifact, version, f"{artifact}-{version}.jar"])


def set_up_delta_jars() -> dict[str, bytes]:
    """The bytes of Delta's jars `make setup` put in .jars/delta; the test fails if it did not."""
    missing = [name for name in JARS if not (SET_UP_JARS / name).is_file()]
    if missing:
        pytest.fail(f"set-up did not put {missing} in {SET_UP_JARS}: run `make setup`")
    return {name: (SET_UP_JARS / name).read_bytes() for name in JARS}


def run_set_up(*args: str, path: str, **env: str) -> subprocess.CompletedProcess:
    """`python -m backfill_assets.spark.delta_jars` in a child process whose PATH is ``path``."""
    return subprocess.run(
        [sys.executable, "-m", "backfill_assets.spark.delta_jars", *args],
        env=subprocess_env(PATH=path, **env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture
def path_without_mvn(tmp_path) -> tuple[str, Path]:
    """A PATH whose only folder holds an ``mvn`` that records being called; (PATH, record)."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "mvn-calls"
    bin_dir.mkdir()
    script = bin_dir / "mvn"
    script.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexit 1\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(bin_dir), calls


@pytest.mark.slow
def test_set_up_with_no_mvn_downloads_every_jar_from_maven_central(tmp_path, path_without_mvn):
    """Into empty folders, with no mvn to call: every jar of both sets arrives, each with the
    sha256 the module records, which is the one Central publishes for it, and each a jar with
    the classes Spark loads from it."""
    path, mvn_calls = path_without_mvn
    delta, s3a = tmp_path / "delta", tmp_path / "s3a"
    done = run_set_up(
        "--s3a", path=path, BACKFILL_DELTA_JARS=str(delta), BACKFILL_S3A_JARS=str(s3a)
    )
    assert done.returncode == 0, done.stderr
    assert not mvn_calls.exists()
    for folder, table in ((delta, JARS), (s3a, S3A_JARS)):
        assert sorted(p.name for p in folder.iterdir()) == sorted(table)  # no partial file
        for name, (coordinates, recorded) in table.items():
            data = (folder / name).read_bytes()
            with urllib.request.urlopen(f"{CENTRAL}/{jar_url_path(coordinates)}.sha1") as sha1:
                published = sha1.read().decode().split()[0]
            assert hashlib.sha1(data).hexdigest() == published, name
            assert hashlib.sha256(data).hexdigest() == recorded, name
    with zipfile.ZipFile(delta / f"delta-spark_{delta_jars.SPARK_LINE}_2.13-4.4.0.jar") as jar:
        assert "io/delta/sql/DeltaSparkSessionExtension.class" in jar.namelist()
    with zipfile.ZipFile(s3a / "hadoop-aws-3.5.0.jar") as jar:
        assert "org/apache/hadoop/fs/s3a/S3AFileSystem.class" in jar.namelist()
    again = run_set_up(
        "--s3a",
        path=path,
        BACKFILL_DELTA_JARS=str(delta),
        BACKFILL_S3A_JARS=str(s3a),
        BACKFILL_MAVEN_REPO="http://127.0.0.1:9",  # nothing listens: offline
    )
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("jars present in") == 2


def test_a_jar_whose_bytes_differ_from_its_sha256_fails_set_up_naming_it(
    jar_folder, mirror, path_without_mvn
):
    for coordinates, _ in JARS.values():
        mirror.files[jar_url_path(coordinates)] = b"PK not the jar Central serves"
    done = run_set_up(path=path_without_mvn[0], BACKFILL_DELTA_JARS=str(jar_folder))
    first = min(JARS)
    assert done.returncode == 1
    assert f"jar {first} downloaded from {mirror.url}" in done.stderr
    expected = hashlib.sha256(b"PK not the jar Central serves").hexdigest()
    assert f"has sha256 {expected}, not the recorded {JARS[first][1]}" in done.stderr
    assert list(jar_folder.iterdir()) == []  # nothing that looks like a jar, nor a partial one


def test_a_jar_the_repository_does_not_have_fails_set_up_naming_it(jar_folder, mirror):
    with pytest.raises(DeltaJarsError, match=rf"jar {min(JARS)} could not be downloaded.*404"):
        fetch()
    assert mirror.asked == [jar_url_path(JARS[min(JARS)][0])]  # a 404 is not asked again
    assert list(jar_folder.iterdir()) == []


def test_set_up_fails_when_the_repository_cannot_be_reached(jar_folder, monkeypatch):
    monkeypatch.setattr(delta_jars, "DOWNLOAD_TRIES", 1)
    monkeypatch.setenv("BACKFILL_MAVEN_REPO", "http://127.0.0.1:9")  # nothing listens
    assert delta_jars.main([]) == 1
    with pytest.raises(DeltaJarsError, match=rf"jar {min(JARS)} could not be downloaded"):
        fetch()


def test_a_killed_download_leaves_no_jar_and_the_next_set_up_clears_it(
    jar_folder, mirror, path_without_mvn
):
    jars = set_up_delta_jars()
    for name, (coordinates, _) in JARS.items():
        mirror.files[jar_url_path(coordinates)] = jars[name]
    mirror.stall.set()
    env = subprocess_env(PATH=path_without_mvn[0], BACKFILL_DELTA_JARS=str(jar_folder))
    proc = subprocess.Popen(
        [sys.executable, "-m", "backfill_assets.spark.delta_jars"],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not any(p.stat().st_size for p in jar_folder.glob(".*")):
            assert proc.poll() is None and time.monotonic() < deadline, "no download began"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not any((jar_folder / name).exists() for name in JARS)
    assert not delta_jars.jars_present()
    with pytest.raises(DeltaJarsError, match="missing"):
        checked_jars()
    mirror.stall.clear()
    assert fetch() == f"downloaded 2 Delta 4.4.0 jars into {jar_folder}"
    assert sorted(p.name for p in jar_folder.iterdir()) == sorted(JARS)  # the partial went
    assert {n: (jar_folder / n).read_bytes() for n in JARS} == jars


def test_jars_already_there_are_checked_and_only_a_bad_one_downloaded_again(jar_folder, mirror):
    jars = set_up_delta_jars()
    shutil.copytree(SET_UP_JARS, jar_folder)
    assert fetch() == f"Delta 4.4.0 jars present in {jar_folder}"
    assert mirror.asked == []  # offline once they are there
    bad, good = sorted(JARS)
    (jar_folder / bad).write_bytes(b"altered")
    before = (jar_folder / good).stat().st_mtime_ns
    mirror.files[jar_url_path(JARS[bad][0])] = jars[bad]
    assert fetch() == f"downloaded 1 Delta 4.4.0 jars into {jar_folder}"
    assert mirror.asked == [jar_url_path(JARS[bad][0])]
    assert (jar_folder / bad).read_bytes() == jars[bad]
    assert (jar_folder / good).stat().st_mtime_ns == before


def test_delta_session_conf_names_the_jars_extension_and_catalog(jar_folder):
    conf = spark_config(master="local[1]", lake_engine="delta-spark")
    # Delta's jars, then raw's plain-line reader once set-up has built it (every session's)
    plain = plain_line_jar.session_jars()
    delta = [str(jar_folder / name) for name in sorted(JARS)]
    assert conf["spark.jars"].split(",") == delta + plain
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"].endswith("DeltaCatalog")
    for engine in ("auto", "delta-rs"):
        other = spark_config(master="local[1]", lake_engine=engine)
        assert other.get("spark.jars", "").split(",") == (plain or [""])


def test_missing_or_corrupt_jar_stops_the_session_naming_the_fix(jar_folder):
    conf = spark_config(master="local[1]", lake_engine="delta-spark")
    with pytest.raises(DeltaJarsError, match=r"missing.*make setup"):
        build_session(conf)
    jar_folder.mkdir()
    for name in JARS:
        (jar_folder / name).write_bytes(b"not a jar")
    with pytest.raises(DeltaJarsError, match=r"corrupt.*make setup"):
        check_delta_jars(conf)


def test_a_pyspark_the_jars_were_not_built_for_is_refused(jar_folder, monkeypatch):
    monkeypatch.setattr(sys.modules["pyspark"], "__version__", "4.1.0")
    with pytest.raises(DeltaJarsError, match=r"built for Spark 4\.2, this is pyspark 4\.1\.0"):
        checked_jars()


@pytest.mark.parametrize(
    ("args", "lake_dir", "fetches_s3a"),
    [
        ([], "data/lake", False),
        ([], "s3://bucket/lake", True),
        (["--s3a"], "data/lake", True),
    ],
)
def test_set_up_fetches_the_s3a_jars_only_when_s3_is_used(
    jar_folder, mirror, tmp_path, monkeypatch, args, lake_dir, fetches_s3a
):
    set_up_delta_jars()
    shutil.copytree(SET_UP_JARS, jar_folder)
    monkeypatch.setenv("BACKFILL_S3A_JARS", str(tmp_path / "s3a"))
    monkeypatch.setenv("BACKFILL_LAKE_DIR", lake_dir)
    monkeypatch.setenv("BACKFILL_LANDING_DIR", str(tmp_path / "landing"))
    # the mirror has none of the s3a jars: asked for one, set-up fails naming it
    assert delta_jars.main(args) == (1 if fetches_s3a else 0)
    first_s3a = jar_url_path(S3A_JARS[min(S3A_JARS)][0])
    assert mirror.asked == ([first_s3a] if fetches_s3a else [])


def test_a_delta_spark_session_on_s3_gets_the_s3a_jars_and_checks_them(
    jar_folder, tmp_path, monkeypatch
):
    monkeypatch.setenv("BACKFILL_S3A_JARS", str(tmp_path / "s3a"))
    monkeypatch.setenv("BACKFILL_LAKE_DIR", "s3://bucket/lake")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-secret-never-in-the-conf")
    conf = spark_config(master="local[1]", lake_engine="delta-spark")
    jars = conf["spark.jars"].split(",")
    assert jars[: len(JARS)] == [str(jar_folder / name) for name in sorted(JARS)]
    s3a = [str(tmp_path / "s3a" / name) for name in sorted(S3A_JARS)]
    assert jars[len(JARS) :] == plain_line_jar.session_jars() + s3a
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert conf["spark.delta.logStore.s3.impl"] == "io.delta.storage.S3SingleDriverLogStore"
    assert "the-secret-never-in-the-conf" not in repr(conf)
    with pytest.raises(DeltaJarsError, match=r"s3a .*missing.*delta_jars --s3a"):
        delta_jars.S3A.checked()
    monkeypatch.setenv("BACKFILL_LAKE_DIR", str(tmp_path / "lake"))
    assert "spark.hadoop.fs.s3.impl" not in spark_config(
        master="local[1]", lake_engine="delta-spark"
    )


@pytest.mark.slow
def test_a_delta_spark_case_without_the_jars_fails_naming_the_set_up_step(tmp_path):
    """The lake's delta-spark cases with an empty folder for Delta's jars, and with Delta's but
    an empty one for the s3a jars: each fails saying which step downloads them; none skips."""
    contract = "backfill_assets_tests/lake/test_lake_contract.py"
    case = "test_lake_rewrite_replaces_partition_not_appends"
    (tmp_path / "none").mkdir()
    for param, env, fix in (
        ("delta-spark", {"BACKFILL_DELTA_JARS": str(tmp_path / "none")}, "run `make setup`"),
        ("delta-spark-s3", {"BACKFILL_S3A_JARS": str(tmp_path / "none")}, "run `make test`"),
    ):
        node = f"{contract}::{case}[{param}]"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", node],
            env=subprocess_env(**env),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 1, done.stdout + done.stderr
        assert re.search(r"\b1 (failed|error)\b", done.stdout), done.stdout
        assert "skipped" not in done.stdout, done.stdout
        assert fix in done.stdout, done.stdout


@pytest.mark.slow
def test_set_up_fails_when_a_jar_cannot_be_downloaded(tmp_path):
    """`make setup`'s script stops at the jar it could not get, exits non-zero, and goes no
    further (raw's plain-line reader is built after the jars)."""
    (tmp_path / "none").mkdir()
    done = subprocess.run(
        ["bash", "scripts/bootstrap.sh"],
        env=subprocess_env(
            BACKFILL_DELTA_JARS=str(tmp_path / "none"),
            BACKFILL_MAVEN_REPO="http://127.0.0.1:9",  # nothing listens
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode != 0, done.stdout + done.stderr
    assert f"jar {min(JARS)} could not be downloaded" in done.stderr
    assert "plain-line fields" not in done.stdout + done.stderr
    assert list((tmp_path / "none").iterdir()) == []
