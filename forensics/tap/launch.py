"""Run a serving engine's command with the ledger tap switched on.

The tap is configured through the environment the command inherits (KVFORENSICS_TAP_DIR,
KVFORENSICS_TAP_NODE, KVFORENSICS_TAP_CONTENTS). For SGLang, `forensics/tap/sglang_site` is
put first on PYTHONPATH so that its `sitecustomize` patches every Python process the server
starts; vLLM loads the tap itself through its plugin entry point."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SITE = Path(__file__).resolve().parent / "sglang_site"
CHECKOUT = Path(__file__).resolve().parents[2]


def tap_env(engine: str, out_dir: Path, node: str | None, contents: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["KVFORENSICS_TAP_DIR"] = str(out_dir.resolve())
    if node:
        env["KVFORENSICS_TAP_NODE"] = node
    if contents:
        env["KVFORENSICS_TAP_CONTENTS"] = "1"
    if engine == "sglang":
        # a source checkout also lends the server its code; an installed package must be
        # installed in the server's environment too (never put this one's site-packages there)
        source = (CHECKOUT / "pyproject.toml").is_file()
        paths = [str(SITE), str(CHECKOUT) if source else "", env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def launch(engine: str, command: list[str], out_dir: Path, node: str | None, contents: bool) -> int:
    """Run the command to its end and return its exit status."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.call(command, env=tap_env(engine, out_dir, node, contents))
