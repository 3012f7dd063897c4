"""A throwaway PostgreSQL server from Debian's server binaries, on 127.0.0.1 and a free port.

Used by the PostgreSQL tests' session fixture and by ``bench/backfill_bench.py``. PostgreSQL
refuses to run as root, so as root the server runs as the ``postgres`` user (``nobody`` when
there is none) through ``runuser``, in a data directory that user owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

BINARIES = ("initdb", "pg_ctl", "postgres")
NO_SERVER = (
    "PostgreSQL's server binaries (initdb, pg_ctl, postgres) are not on this machine: run "
    "`scripts/test-deps.sh` (`make test` does), which installs Debian's postgresql, or set "
    "BACKFILL_PG_BIN"
)


def server_bin_dir() -> Path | None:
    """$BACKFILL_PG_BIN, else the newest /usr/lib/postgresql/*/bin, else the PATH's."""
    candidates = [os.environ.get("BACKFILL_PG_BIN", "")]
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("initdb")
    candidates.append(os.path.dirname(on_path) if on_path else "")
    for folder in filter(None, candidates):
        if all(os.access(os.path.join(folder, b), os.X_OK) for b in BINARIES):
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_server_user(cmd: list[str]) -> tuple[list[str], str | None]:
    """The command as run by an unprivileged user when we are root, and that user's name."""
    if os.geteuid() != 0:
        return cmd, None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return ["runuser", "-u", name, "--", *cmd], name
    raise RuntimeError("running as root and neither a postgres nor a nobody user exists")


@contextlib.contextmanager
def postgres_server(database: str = "dagster", timeout: float = 60) -> Iterator[str]:
    """Start a server, create ``database``, yield its ``postgresql://`` URL, stop and remove it."""
    import psycopg2

    bin_dir = server_bin_dir()
    if bin_dir is None:
        raise FileNotFoundError(NO_SERVER)
    # Directly under the system temp dir: pytest's per-user tmp dirs are closed to other users.
    root = Path(tempfile.mkdtemp(prefix="backfill-pg-"))
    data, port = root / "data", _free_port()
    _, user = _as_server_user([])
    if user:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = None
    try:
        initdb, _ = _as_server_user(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "dagster",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-locale",
            ]
        )
        subprocess.run(initdb, check=True, capture_output=True, timeout=timeout)
        # No fsync and a small footprint: a test server whose data is thrown away.
        cmd, _ = _as_server_user(
            [
                str(bin_dir / "postgres"),
                "-D",
                str(data),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-k",
                str(root),
                "-F",
                "-c",
                "shared_buffers=32MB",
                "-c",
                "max_connections=100",
            ]
        )
        log = open(root / "server.log", "wb")
        server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        admin = f"postgresql://dagster@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + timeout
        while True:
            try:
                conn = psycopg2.connect(admin, connect_timeout=2)
                break
            except psycopg2.OperationalError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "PostgreSQL did not start:\n" + (root / "server.log").read_text()[-2000:]
                    ) from None
                time.sleep(0.2)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{database}"')
        conn.close()
        yield f"postgresql://dagster@127.0.0.1:{port}/{database}"
    finally:
        if server is not None:
            _stop(server)
        shutil.rmtree(root, ignore_errors=True)


def _stop(server: subprocess.Popen) -> None:
    """SIGINT is PostgreSQL's fast shutdown (clients disconnected); SIGKILL if it hangs."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGINT)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
