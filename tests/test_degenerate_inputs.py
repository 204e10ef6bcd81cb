"""Sessions that went wrong write degenerate text: a model stuck in a loop repeats one sentence
thousands of times or writes blank lines by the ten thousand, a pasted error holds a URL of
thousands of characters. A scan must judge them in time linear in their size, never hang.

Each session is scanned by the CLI in a child process with a timeout, so that a regression
fails (on the timeout) instead of hanging the suite; the findings are asserted, not the time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_ledger import _claude_lines

SESSION = "7c0a1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"


def _with_assistant_text(steps, text: str, at: int) -> str:
    """A Claude Code transcript with an assistant text message inserted as line ``at``."""
    lines = _claude_lines(SESSION, steps, sidechain=False).splitlines()
    rec = json.loads(lines[1])
    rec.update(uuid=f"{SESSION[:8]}-0000-4000-8000-9999999999{at:02d}")
    rec["message"].update(id=f"msg_text_{at}", content=[{"type": "text", "text": text}])
    lines.insert(at, json.dumps(rec))
    return "\n".join(lines) + "\n"


def _scan(path: Path) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "forensics.cli", "scan", str(path), "--format",
                           "json"], capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)["findings"]


@pytest.mark.parametrize("filler", [
    "All tests pass. " * 60_000,  # one claim repeated: each hit searched the text before it
    "all tests pass " * 60_000,  # the same without a stop: one sentence of a megabyte
    "\n" * 600_000,  # blank lines: the blockquote pattern retried from every line start
])
def test_a_looping_assistant_message_is_judged_once(tmp_path: Path, filler: str) -> None:
    """The message claims the tests pass, and no test ran: FX005 flags it, on its line."""
    text = "I fixed the parser." + filler + "All tests pass now."
    path = tmp_path / "loop.jsonl"
    path.write_text(_with_assistant_text(
        [("user", "fix the parser and run the tests"), ("bash", "sed -i 's/a/b/' parser.py"),
         ("result", (1, "")), ("user", "thanks")], text, 3))
    found = [(f["code"], f["line"]) for f in _scan(path)]
    assert ("FX005", 4) in found


def test_a_re_pasted_error_with_a_long_url_is_judged_at_once(tmp_path: Path) -> None:
    """A long plain token in a re-sent error: FX004's identifier test was cubic in it."""
    error = "TypeError: failed to load https://cdn.example.com/" + "/".join(["assets"] * 20_000)
    path = tmp_path / "resend.jsonl"
    path.write_text(_claude_lines(SESSION, [
        ("user", error), ("bash", "npm run build"), ("result", (1, "failed")), ("user", error),
    ], sidechain=False))
    assert [(f["code"], f["line"]) for f in _scan(path)] == [("FX004", 4)]
