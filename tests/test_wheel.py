"""The built wheel carries what lives outside the package (rules/, report templates, the sample).

Builds the wheel, installs it into an empty target folder (dependencies come from the running
environment) and runs a scan and a report from another folder, so nothing can be found by
accident in the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if shutil.which("pip") is None and subprocess.run(
            [sys.executable, "-m", "pip", "--version"], capture_output=True).returncode:
        pytest.skip("pip is not available")
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(REPO)],
        capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and "hatchling" in proc.stderr:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
            capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("forensics-*.whl")
    return built


def test_wheel_contains_rules_templates_and_sample(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for rule in ("FX001-empty-response", "FX002-duplicate-launch", "FX003-ignored-tool-error",
                 "FX004-user-resend"):
        assert f"forensics/_data/rules/{rule}.toml" in names
    assert any(n.startswith("forensics/_data/templates/") and n.endswith(".j2") for n in names)
    assert "forensics/_data/redaction/secrets.toml" in names  # one list of secret patterns
    assert "forensics/_data/knowledge/words.toml" in names
    assert "forensics/_data/knowledge/FX002-duplicate-launch.toml" in names
    assert "forensics/samples/sample-session.json" in names


def test_installed_wheel_scans_from_another_folder(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q",
                           "--target", str(target), str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = (
        "import sys, forensics.cli as c, forensics.resources as r;"
        "assert str(r.rules_dir()).startswith(sys.argv[1]), r.rules_dir();"
        "sys.argv = ['forensics', 'scan', str(r.sample_session()), '--format', 'json'];"
        "c.main()"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True,
                          text=True, cwd=work, env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert '"code": "FX002"' in proc.stdout
    report = subprocess.run(
        [sys.executable, "-c",
         "import sys, forensics.cli as c, forensics.resources as r;"
         "sys.argv = ['forensics', 'report', str(r.sample_session()), '-o', 'out'];"
         "c.main()"],
        capture_output=True, text=True, cwd=work, env=env, timeout=120)
    assert report.returncode in (0, 1), report.stderr
    assert list((work / "out").rglob("*.html")), "the report used the packaged templates"
