"""Open a page in headless Chromium and collect what its console reports as errors.

Talks the DevTools protocol over ``--remote-debugging-pipe`` (fds 3 and 4), so no port, no
websocket library and no browser download: the system ``chromium`` is enough. Errors are
exceptions, ``console.error`` calls, and log entries of level ``error`` (failed resource loads,
CSP violations).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class _Pipe:
    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.write_fd, self.read_fd = write_fd, read_fd
        self.buf = b""
        self.next_id = 0

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.write_fd, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def read(self, deadline: float) -> dict | None:
        while b"\0" not in self.buf:
            if time.monotonic() > deadline:
                return None
            import select

            ready, _, _ = select.select([self.read_fd], [], [], 0.2)
            if ready:
                chunk = os.read(self.read_fd, 1 << 16)
                if not chunk:
                    return None
                self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)


def console_errors(page: Path, *, timeout: float = 90.0) -> list[str]:
    """Every error the page's console shows while loading ``page`` (a local file)."""
    return inspect(page, timeout=timeout).errors


class PageReport:
    """What one load of a page showed: console errors, the value of a script, a screenshot."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.value: object = None
        self.screenshot: bytes | None = None


def inspect(page: Path, *, width: int = 1280, height: int = 900, script: str | None = None,
            screenshot: bool = False, timeout: float = 90.0) -> PageReport:
    """Load ``page`` in a ``width`` x ``height`` viewport, collect console errors, evaluate
    ``script`` (its JSON-serialisable value comes back) and take a full-page screenshot."""
    exe = find_chromium()
    if exe is None:
        raise RuntimeError("chromium is not installed")
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()
    profile = tempfile.mkdtemp(prefix="forensics-chromium-")
    # The child sees the pipes as fds 3 (commands in) and 4 (replies out).
    proc = subprocess.Popen(
        [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-extensions", "--hide-scrollbars", "--remote-debugging-pipe",
         f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        pass_fds=(3, 4),
        preexec_fn=lambda: _to_3_and_4(to_browser_r, from_browser_w),
    )
    os.close(to_browser_r)
    os.close(from_browser_w)
    pipe = _Pipe(to_browser_w, from_browser_r)
    out = PageReport()
    deadline = time.monotonic() + timeout
    try:
        pipe.send("Target.createTarget", {"url": "about:blank"})
        target = _reply(pipe, deadline, out)["result"]["targetId"]
        pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        session = _reply(pipe, deadline, out)["result"]["sessionId"]
        for method in ("Runtime.enable", "Log.enable", "Page.enable"):
            pipe.send(method, session=session)
            _reply(pipe, deadline, out)  # enabled before navigating, or early events are lost
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        pipe.send("Emulation.setDeviceMetricsOverride", metrics, session=session)
        _reply(pipe, deadline, out)
        pipe.send("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
        loaded = False
        settle = None
        while time.monotonic() < deadline:
            msg = pipe.read(min(deadline, settle or deadline))
            if msg is None:
                if loaded:
                    break
                raise TimeoutError(f"{page} did not load in {timeout:.0f}s")
            if msg.get("method") in ("Page.loadEventFired", "Page.frameStoppedLoading"):
                loaded = True
                settle = time.monotonic() + 0.5  # late errors (deferred loads) still count
            _event(msg, out)
            if settle and time.monotonic() > settle:
                break
        if script is not None:
            pipe.send("Runtime.evaluate", {"expression": script, "returnByValue": True},
                      session=session)
            result = _reply(pipe, deadline, out)["result"]
            if "exceptionDetails" in result:
                raise RuntimeError(f"script failed: {result['exceptionDetails']}")
            out.value = result["result"].get("value")
        if screenshot:
            pipe.send("Page.getLayoutMetrics", session=session)
            size = _reply(pipe, deadline, out)["result"]["cssContentSize"]
            full = dict(metrics, height=min(12000, max(height, int(size["height"]))))
            pipe.send("Emulation.setDeviceMetricsOverride", full, session=session)
            _reply(pipe, deadline, out)
            pipe.send("Page.captureScreenshot", {"format": "png"}, session=session)
            import base64

            out.screenshot = base64.b64decode(_reply(pipe, deadline, out)["result"]["data"])
    finally:
        try:
            pipe.send("Browser.close")
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(to_browser_w)
        os.close(from_browser_r)
        shutil.rmtree(profile, ignore_errors=True)
    return out


def _event(msg: dict, out: PageReport) -> None:
    method, params = msg.get("method"), msg.get("params", {})
    if method == "Runtime.exceptionThrown":
        d = params["exceptionDetails"]
        out.errors.append(d.get("exception", {}).get("description") or d.get("text", ""))
    elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
        out.errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                   for a in params.get("args", [])))
    elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
        out.errors.append(f"{params['entry'].get('text')} {params['entry'].get('url', '')}")


def _to_3_and_4(read_fd: int, write_fd: int) -> None:
    """In the child: put the pipe ends on fds 3 and 4 without one clobbering the other."""
    high_r, high_w = os.dup(read_fd), os.dup(write_fd)
    os.dup2(high_r, 3)
    os.dup2(high_w, 4)


def _reply(pipe: _Pipe, deadline: float, out: PageReport | None = None) -> dict:
    want = pipe.next_id
    while True:
        msg = pipe.read(deadline)
        if msg is None:
            raise TimeoutError("chromium did not answer")
        if out is not None and "method" in msg:
            _event(msg, out)  # events that arrive while waiting still count
        if msg.get("id") == want:
            if "error" in msg:
                raise RuntimeError(msg["error"])
            return msg
