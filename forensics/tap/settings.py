"""What the tap is asked to do (Settings, read from KVFORENSICS_TAP_* variables) and the shape
of the rows it records: a leaf the recorder and the writer thread share."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Row = tuple[int, int, str, str, int, int, int | None, str | None, str | None]
EventIn = tuple[str, str, int, int, int | None, str | None, str | None]


@dataclass
class Settings:
    """What the environment asks of the tap (see `from_env`)."""

    out_dir: Path
    node: str
    contents: bool = False
    batch_events: int = 8192
    queue_batches: int = 16
    rotate_events: int = 1_000_000
    rotate_s: float = 60.0
    flush_s: float = 1.0
    idle_close_s: float = 2.0
    extra: dict[str, Any] = field(default_factory=dict)


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) <= 0:
        raise ValueError(f"{name}={raw!r}: give a whole number greater than 0, or unset it")
    return int(raw)


def default_node(port: str | None) -> str:
    """host:port of the serving endpoint (port from the command line or VLLM_PORT), else host."""
    host = socket.gethostname()
    return f"{host}:{port}" if port else host


def from_env(port: str | None = None) -> Settings | None:
    """Settings from KVFORENSICS_TAP_* variables; None when KVFORENSICS_TAP_DIR is not set."""
    out = os.environ.get("KVFORENSICS_TAP_DIR", "").strip()
    if not out:
        return None
    return Settings(
        out_dir=Path(out),
        node=os.environ.get("KVFORENSICS_TAP_NODE", "").strip() or default_node(port),
        contents=os.environ.get("KVFORENSICS_TAP_CONTENTS", "") not in ("", "0", "false"),
        batch_events=_int_env("KVFORENSICS_TAP_BATCH_EVENTS", 8192),
        queue_batches=_int_env("KVFORENSICS_TAP_QUEUE_BATCHES", 16),
        rotate_events=_int_env("KVFORENSICS_TAP_ROTATE_EVENTS", 1_000_000),
        rotate_s=float(_int_env("KVFORENSICS_TAP_ROTATE_S", 60)),
        idle_close_s=float(_int_env("KVFORENSICS_TAP_IDLE_CLOSE_S", 2)),
    )
