"""The config is the nearest forensics.toml / pyproject.toml with [tool.forensics], found from a
subfolder as ruff finds its settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from conftest import FIXTURES, REPO
from forensics.config import find_config

SEED_000 = FIXTURES / "seeds" / "seed_000_duplicate_launch.json"


def codes(cwd: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "forensics.cli", "scan", str(SEED_000), "-f",
                           "json"], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return sorted(f["code"] for f in orjson.loads(proc.stdout)["findings"])


def test_pyproject_tool_table_found_from_a_subfolder(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.forensics]\nselect = ["FX002"]\n', encoding="utf-8")
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    assert find_config(deep) == tmp_path / "pyproject.toml"
    assert codes(deep) == ["FX002"]


def test_nearest_wins_and_foreign_pyproject_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "forensics.toml").write_text('select = ["FX001"]\n', encoding="utf-8")
    sub = tmp_path / "app"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[project]\nname = "app"\n', encoding="utf-8")
    assert find_config(sub) == tmp_path / "forensics.toml"  # no [tool.forensics] in app/
    (sub / "forensics.toml").write_text('select = ["FX003"]\n', encoding="utf-8")
    assert find_config(sub) == sub / "forensics.toml"
    assert codes(sub) == ["FX003"]
