"""The batch index tells, per rule, what is new, still there and resolved since the previous run
of the same output folder."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES
from forensics.batch import run_batch
from test_baseline import appended_exchange

CLAUDE = FIXTURES / "ingest" / "claude_basic.jsonl"
SEED_000 = FIXTURES / "seeds" / "seed_000_duplicate_launch.json"


def changes(summary) -> dict[str, tuple[int, int, int]]:
    return {r["code"]: (r["new"], r["still"], r["resolved"]) for r in summary.changes}


def test_new_still_resolved_per_rule(tmp_path: Path) -> None:
    logs, out = tmp_path / "logs", tmp_path / "triage"
    logs.mkdir()
    (logs / "s.jsonl").write_bytes(CLAUDE.read_bytes())
    (logs / "seed.json").write_bytes(SEED_000.read_bytes())
    first = run_batch([logs], out, workers=1, progress=False)
    assert first.changes is None
    assert "Since the previous run" not in (out / "index.md").read_text(encoding="utf-8")

    appended_exchange(logs / "s.jsonl")
    (logs / "seed.json").unlink()
    second = run_batch([logs], out, workers=1, progress=False)
    assert changes(second) == {"FX001": (1, 1, 1), "FX002": (0, 0, 1), "FX003": (0, 0, 1),
                               "FX004": (1, 2, 0)}
    md = (out / "index.md").read_text(encoding="utf-8")
    assert "## Since the previous run" in md
    assert "| FX004 | user-resend | 1 | 2 | 0 |" in md
    assert "<h2 id=\"changes\">Since the previous run</h2>" in (out / "index.html").read_text(
        encoding="utf-8")

    third = run_batch([logs], out, workers=1, progress=False)  # unchanged: all still there
    assert changes(third) == {"FX001": (0, 2, 0), "FX004": (0, 3, 0)}
