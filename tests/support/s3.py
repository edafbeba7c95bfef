"""A real S3 server on 127.0.0.1 (moto's, a process of its own speaking S3's HTTP API) and an
s3fs filesystem of it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.raycluster import free_port

BUCKET = "kvf-incident"
LEDGER = f"s3://{BUCKET}/ledger"
START_TIMEOUT_S = 30.0


def s3_env(port: int) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "kvf-test",
        "AWS_SECRET_ACCESS_KEY": "kvf-test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "1",  # a refused connection fails at once
    }


@contextmanager
def s3_server(log: Path, checks_credentials: bool = False) -> Iterator[dict[str, str]]:
    """A real S3 server on 127.0.0.1 (one that refuses unknown credentials when asked); yields
    the environment that points s3fs at it."""
    port = free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"} if checks_credentials else None
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        wait_for(f"http://127.0.0.1:{port}/", server, log)
        yield s3_env(port)
    finally:
        server.terminate()
        server.wait(timeout=10)


def wait_for(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and server.poll() is None:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:  # it answers (a server that checks credentials: 500)
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the S3 server did not start:\n{log.read_text(errors='replace')}")


def s3_store(env: dict[str, str]) -> Any:
    """An s3fs filesystem of the S3 server env points at."""
    import s3fs

    return s3fs.S3FileSystem(
        key=env["AWS_ACCESS_KEY_ID"],
        secret=env["AWS_SECRET_ACCESS_KEY"],
        endpoint_url=env["AWS_ENDPOINT_URL"],
    )
