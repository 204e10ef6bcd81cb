"""Every ingest fixture has a golden file of its normalised turns beside it.

Fixtures live in ``tests/fixtures/ingest/``: a file (``name.jsonl``, ``name.json``, ``name.sql``
loaded into a temporary SQLite database) or a folder (an opencode storage tree). The golden file
is ``name.golden.json``. Regenerate with ``FORENSICS_REGEN_GOLDEN=1 pytest tests/test_ingest_golden.py``
and review the diff.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import orjson
import pytest

from conftest import FIXTURES
from forensics.ingest import load

INGEST = FIXTURES / "ingest"
REGEN = os.environ.get("FORENSICS_REGEN_GOLDEN") == "1"


def _fixtures() -> list[Path]:
    if not INGEST.is_dir():
        return []
    return sorted(
        p for p in INGEST.iterdir()
        if not p.name.endswith(".golden.json") and not p.name.startswith(".")
    )


def normalise(sessions) -> list[dict]:
    """Sessions as plain data, with the machine-specific source path made relative."""
    docs = []
    for s in sessions:
        doc = s.dump()
        doc["source"] = Path(doc["source"]).name
        for issue in doc["issues"]:
            issue["path"] = Path(issue["path"]).name
        for turn in doc["turns"]:
            if turn.get("file"):
                turn["file"] = Path(turn["file"]).name
        docs.append(doc)
    return docs


def _load_fixture(path: Path, tmp_path: Path):
    if path.suffix == ".sql":
        db = tmp_path / (path.stem + ".db")
        con = sqlite3.connect(db)
        con.executescript(path.read_text())
        con.close()
        return load(db)
    return load(path)


@pytest.mark.parametrize("fixture", _fixtures(), ids=lambda p: p.name)
def test_golden_turns(fixture: Path, tmp_path: Path) -> None:
    got = normalise(_load_fixture(fixture, tmp_path))
    golden = fixture.with_name(fixture.name.split(".")[0] + ".golden.json")
    if REGEN or not golden.exists():
        golden.write_bytes(orjson.dumps(got, option=orjson.OPT_INDENT_2) + b"\n")
        if not REGEN:
            pytest.fail(f"wrote missing golden file {golden.name}; review it and rerun")
    assert got == orjson.loads(golden.read_bytes())
