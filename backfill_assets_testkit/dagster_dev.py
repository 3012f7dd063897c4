"""The real Dagster webserver and daemon (`dagster dev`) on 127.0.0.1, and a GraphQL client."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

PROJECT_DIR = Path(__file__).resolve().parents[1]
DAGSTER = Path(sys.executable).with_name("dagster")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GraphQLError(AssertionError):
    pass


@dataclass
class DagsterUI:
    """A running `dagster dev`: its URL, its log file, and a GraphQL client."""

    process: subprocess.Popen
    base_url: str
    log_path: Path

    def graphql(self, query: str, **variables) -> dict:
        response = requests.post(
            f"{self.base_url}/graphql", json={"query": query, "variables": variables}, timeout=60
        )
        response.raise_for_status()
        body = response.json()
        if body.get("errors"):
            raise GraphQLError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def wait_until_ready(self, timeout: float) -> None:
        """The webserver answers, the code location's assets are loaded, the backfill daemon is
        healthy."""
        deadline = time.monotonic() + timeout
        last = "nothing yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"dagster dev exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                requests.get(f"{self.base_url}/server_info", timeout=5).raise_for_status()
                nodes = self.graphql("{ assetNodes { id } }")["assetNodes"]
                daemons = self.graphql(DAEMON_HEALTH)["instance"]["daemonHealth"][
                    "allDaemonStatuses"
                ]
                healthy = {d["daemonType"] for d in daemons if d["healthy"]}
                last = f"{len(nodes)} asset nodes, healthy daemons {sorted(healthy)}"
                if nodes and {"BACKFILL", "QUEUED_RUN_COORDINATOR"} <= healthy:
                    return
            except (requests.RequestException, GraphQLError, KeyError, TypeError) as exc:
                last = repr(exc)
            time.sleep(2)
        raise TimeoutError(
            f"dagster dev not ready after {timeout:.0f}s ({last}):\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """SIGTERM to the whole process group (webserver, daemon, code server, run workers), then
        SIGKILL."""
        if self.process.poll() is None:
            _signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        # Run workers outlive their parent when it is killed: the group takes them too.
        _signal_group(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


DAEMON_HEALTH = "{ instance { daemonHealth { allDaemonStatuses { daemonType healthy } } } }"


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def start_dagster_dev(env: dict[str, str], log_path: Path) -> DagsterUI:
    """`dagster dev` bound to 127.0.0.1 in its own process group, as `make ui` starts it."""
    port = free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(DAGSTER), "dev", "-h", "127.0.0.1", "-p", str(port), "-w", "workspace.yaml"],
            cwd=PROJECT_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return DagsterUI(process, f"http://127.0.0.1:{port}", log_path)


@contextlib.contextmanager
def running_dagster_dev(
    env: dict[str, str],
    log_path: Path,
    ready_timeout: float,
    meanwhile: Callable[[], None] | None = None,
) -> Iterator[DagsterUI]:
    """`dagster dev` from start until it is ready, ``meanwhile`` done while it starts; stopped
    after."""
    ui = start_dagster_dev(env, log_path)
    try:
        if meanwhile is not None:
            meanwhile()
        ui.wait_until_ready(ready_timeout)
        print(f"dagster dev: {ui.base_url} (DAGSTER_HOME={env['DAGSTER_HOME']})")
        yield ui
    finally:
        ui.stop()


def server_env(home: Path, landing: Path, lake: Path, start_date: str | None) -> dict[str, str]:
    """The project's environment for the servers and the runs they launch: small local Spark.
    Without ``start_date``, BACKFILL_START_DATE is unset, as `make demo` leaves it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKFILL_", "DAGSTER_"))}
    env.update(
        {
            "DAGSTER_HOME": str(home),
            "BACKFILL_LANDING_DIR": str(landing),
            "BACKFILL_LAKE_DIR": str(lake),
            "BACKFILL_SPARK_MASTER": "local[2]",
            "BACKFILL_SPARK_DRIVER_MEMORY": "1g",
            "BACKFILL_SPARK_SHUFFLE_PARTITIONS": "2",
            "PYSPARK_PYTHON": sys.executable,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    if start_date is not None:
        env["BACKFILL_START_DATE"] = start_date
    return env
