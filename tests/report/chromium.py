"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
commands on fd 3, answers on fd 4, one JSON message per NUL-terminated record).

Used to load a page and learn what only a browser knows: every request the page made
(`Network.requestWillBeSent` of the page's own session, so the browser's background
traffic does not count), whether the images decoded, how many tables rendered, and a
screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_S = 30.0


@dataclass
class PageVisit:
    requests: list[str] = field(default_factory=list)  # URLs the page asked for
    facts: dict[str, Any] = field(default_factory=dict)  # from the page's own DOM
    screenshot: bytes = b""


class Browser:
    def __init__(self, process: subprocess.Popen[bytes], commands: int, answers: int) -> None:
        self.process = process
        self._out = os.fdopen(commands, "wb", buffering=0)
        self._in = os.fdopen(answers, "rb", buffering=0)
        self._next = 0
        self._messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self._events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = self._in.read(65536)
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                record, buffer = buffer.split(b"\0", 1)
                self._messages.put(json.loads(record))

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._out.write(json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            answer = self._messages.get(timeout=max(0.01, deadline - time.monotonic()))
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self._events.append(answer)
        raise TimeoutError(f"{method}: no answer within {TIMEOUT_S} s")

    def wait_event(self, method: str, session: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            if any(e.get("method") == method and e.get("sessionId") == session for e in self._events):
                return
            with contextlib.suppress(queue.Empty):
                self._events.append(self._messages.get(timeout=0.1))
        raise TimeoutError(f"no {method} within {TIMEOUT_S} s")

    def events(self, method: str, session: str) -> list[dict[str, Any]]:
        with contextlib.suppress(queue.Empty):
            while True:
                self._events.append(self._messages.get_nowait())
        return [e for e in self._events if e.get("method") == method and e.get("sessionId") == session]


@contextlib.contextmanager
def browser(profile: Path) -> Iterator[Browser]:
    commands_r, commands_w = os.pipe()
    answers_r, answers_w = os.pipe()

    def wire_fds() -> None:
        # In the child: the protocol's fds 3 and 4 (dup2 makes them inheritable; every
        # other descriptor Python opened is close-on-exec, so close_fds is not needed).
        high_r, high_w = os.dup(commands_r), os.dup(answers_w)
        os.dup2(high_r, 3)
        os.dup2(high_w, 4)

    argv = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
    process = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=wire_fds, close_fds=False
    )
    os.close(commands_r)
    os.close(answers_w)
    try:
        yield Browser(process, commands_w, answers_r)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


PAGE_FACTS = """JSON.stringify({
  tables: document.querySelectorAll('table').length,
  rows: document.querySelectorAll('tbody tr').length,
  images: Array.from(document.images).map(i => ({complete: i.complete, width: i.naturalWidth,
                                               height: i.naturalHeight, data: i.src.startsWith('data:')})),
  headings: Array.from(document.querySelectorAll('h2')).map(h => h.textContent),
  captions: Array.from(document.querySelectorAll('caption')).map(c => c.textContent),
  // elements wider than the page: a table or a plot the reader would have to scroll sideways
  overflowing: Array.from(document.querySelectorAll('.table-wrap, figure')).filter(e => e.scrollWidth > e.clientWidth + 1).length,
  width: document.documentElement.scrollWidth,
  height: document.documentElement.scrollHeight,
})"""


def visit(url: str, profile: Path, *, width: int = 1400, height: int = 2200, full_page: bool = False) -> PageVisit:
    """Load `url` in a fresh tab; what it requested, what it shows, and a screenshot (of the
    first `height` pixels, or of the whole page with `full_page`)."""
    with browser(profile) as chrome:
        target = chrome.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = chrome.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        chrome.send("Network.enable", session=session)
        chrome.send("Page.enable", session=session)
        chrome.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        chrome.send("Page.navigate", {"url": url}, session)
        chrome.wait_event("Page.loadEventFired", session)
        value = chrome.send("Runtime.evaluate", {"expression": PAGE_FACTS, "returnByValue": True}, session)
        facts = json.loads(value["result"]["value"])
        if full_page:
            chrome.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": facts["height"], "deviceScaleFactor": 1, "mobile": False}, session)
        shot = chrome.send("Page.captureScreenshot", {"format": "png"}, session)
        requests = [e["params"]["request"]["url"] for e in chrome.events("Network.requestWillBeSent", session)]
        return PageVisit(requests, facts, base64.b64decode(shot["data"]))
