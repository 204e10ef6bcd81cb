"""The HTML report in a real headless browser: it loads, shows the incidents and the timeline,
logs nothing to the console, and renders to a PNG screenshot.

Uses the system Chromium through its command-line switches (``--dump-dom``, ``--screenshot``,
``--enable-logging=stderr``), which needs no extra Python dependency. ``.ci/run`` installs the
``chromium`` package; locally the test skips when no binary is found.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from conftest import FIXTURES
from forensics import report
from forensics.engine import scan_session
from rulecases import build_case

CHROMIUM = next((p for p in (os.environ.get("FORENSICS_CHROMIUM"), shutil.which("chromium"),
                             shutil.which("chromium-browser"), shutil.which("google-chrome"))
                 if p), None)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on this machine")

SCREENSHOT_DIR = Path(os.environ.get("FORENSICS_SCREENSHOT_DIR", ""))


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--disable-extensions", "--hide-scrollbars",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90)


def _console_errors(stderr: str) -> list[str]:
    """Console messages and uncaught errors the page produced (Chromium logs them as CONSOLE)."""
    return [ln for ln in stderr.splitlines()
            if ":CONSOLE" in ln or "Uncaught" in ln or "Failed to load resource" in ln]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[Path, object]:
    data = tomllib.loads((FIXTURES / "report_cases.toml").read_text(encoding="utf-8"))
    raw = next(c for c in data["case"] if c["name"] == "relaunch-after-ready")
    result = scan_session(build_case("REPORT", raw, source="report_cases.toml").session)
    out = tmp_path_factory.mktemp("html")
    written = report.write_reports([result], out)
    index = next(p for p in written if p.name == "index.html")
    return index, result


def test_report_loads_with_incidents_and_timeline(page, tmp_path: Path) -> None:
    index, result = page
    run = _chromium(tmp_path / "profile", "--dump-dom", index.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    assert re.search(r"<svg[^>]*class=\"timeline\"", dom)
    marks = re.findall(r'<circle[^>]*class="incident-mark"[^>]*><title>([^<]*)</title>', dom)
    assert len(marks) == len(result.incidents) >= 2
    for inc in result.incidents:
        assert f'id="incident-{inc.code}-{inc.turn}"' in dom
        assert any(inc.anchor in m and inc.code in m for m in marks)
    assert dom.count('<article class="case"') == len(result.incidents)
    assert _console_errors(run.stderr) == []


def test_report_screenshot(page, tmp_path: Path) -> None:
    index, _ = page
    shot = (SCREENSHOT_DIR if SCREENSHOT_DIR.parts else tmp_path) / "report.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    run = _chromium(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2000",
                    index.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a blank page compresses to a few KB
    assert _console_errors(run.stderr) == []


def test_console_errors_are_detected(tmp_path: Path) -> None:
    """The console check can fail: a page with a script error is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>nope();</script></body></html>", encoding="utf-8")
    run = _chromium(tmp_path / "profile", "--dump-dom", bad.as_uri())
    assert any("Uncaught" in ln for ln in _console_errors(run.stderr))
