"""Open a local HTML file in headless chromium over the DevTools protocol: collect console
errors, exceptions and network requests, read values from the page, save a screenshot."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "headless_shell")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
    "--hide-scrollbars",
)


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageVisit:
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    values: Any = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _page_socket_url(port: int, deadline: float) -> str:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                pages = [t for t in json.load(r) if t.get("type") == "page"]
            if pages:
                return str(pages[0]["webSocketDebuggerUrl"])
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError("chromium did not open its DevTools port")


class _Session:
    def __init__(self, url: str) -> None:
        import websocket  # websocket-client, in the test extra

        self.ws = websocket.create_connection(url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self.events.append(message)

    def wait_for(self, method: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} event")
            self.events.append(json.loads(self.ws.recv()))


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            out.append(str(params.get("exceptionDetails", {}).get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append(json.dumps(params.get("args")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            out.append(str(params["entry"].get("text")))
    return out


def visit(
    browser: str, page: Path, shots: dict[str, Path], expression: str, pdf: Path | None = None
) -> PageVisit:
    """Load `page`, evaluate `expression` (JSON-returning JS) once per CSS media type in `shots`
    ({'screen': png, 'print': png}), save a full-page PNG for each. Values: {media: result}.
    With `pdf`, also print the page to that PDF file as the browser's print dialog would (the
    page's own @page size and margins, backgrounds on)."""
    port = _free_port()
    # The browser's helper processes may still write to the profile for a moment after the
    # browser exits: they are stopped with it (own process group), and what they leave behind
    # in the temporary profile does not fail the test.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen(
            [
                browser,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--remote-debugging-port={port}",
                "--window-size=1280,900",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            session = _Session(_page_socket_url(port, time.monotonic() + 30))
            return _drive(session, page, shots, expression, pdf)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)


def _screenshot(session: _Session, path: Path) -> None:
    size = session.call("Page.getLayoutMetrics")["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = session.call(
        "Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))


def _drive(
    session: _Session, page: Path, shots: dict[str, Path], expression: str, pdf: Path | None = None
) -> PageVisit:
    for domain in ("Page", "Runtime", "Log", "Network"):
        session.call(f"{domain}.enable")
    session.events.clear()
    target = page.resolve().as_uri()
    session.call("Page.navigate", url=target)
    session.wait_for("Page.loadEventFired", 30)
    time.sleep(0.3)  # let late console messages and requests arrive
    values = {}
    for media, path in shots.items():
        session.call("Emulation.setEmulatedMedia", media=media)
        result = session.call("Runtime.evaluate", expression=expression, returnByValue=True)
        values[media] = json.loads(result["result"]["value"])
        _screenshot(session, path)
    if pdf is not None:
        printed = session.call("Page.printToPDF", printBackground=True, preferCSSPageSize=True)
        pdf.parent.mkdir(parents=True, exist_ok=True)
        pdf.write_bytes(base64.b64decode(printed["data"]))
    session.ws.close()
    requests = [
        str(e["params"]["request"]["url"])
        for e in session.events
        if e.get("method") == "Network.requestWillBeSent"
    ]
    return PageVisit(_errors(session.events), [u for u in requests if u != target], values)
