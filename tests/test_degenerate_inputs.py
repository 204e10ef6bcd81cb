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


def _one_exchange(prompt: str, steps: list[tuple[str, str, bool, str]]) -> str:
    """A Claude Code transcript: one prompt, then (command, output, is_error, reply) steps: a
    Bash call, its result, the assistant's words (none when empty), and no user message."""
    return _tool_exchange(prompt, [("Bash", {"command": command}, output, is_error, reply)
                                   for command, output, is_error, reply in steps])


def _tool_exchange(prompt: str, steps: list[tuple[str, dict, str, bool, str]]) -> str:
    """``_one_exchange`` with any tool: (tool, input, output, is_error, reply) steps."""
    lines, parent, n = [], None, 0

    def emit(kind: str, content: object) -> None:
        nonlocal parent, n
        n += 1
        uid = f"{SESSION[:8]}-0000-4000-8000-{n:012d}"
        rec = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/w",
               "sessionId": SESSION, "version": "2.1.63", "uuid": uid, "type": kind,
               "timestamp": f"2026-01-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
               "message": {"role": kind, "content": content}}
        if kind == "assistant":
            rec["message"].update(id=f"msg_{n}", model="claude-x", type="message")
        lines.append(json.dumps(rec))
        parent = uid

    emit("user", prompt)
    for tool, given, output, is_error, reply in steps:
        call = f"toolu_{n + 1}"
        emit("assistant", [{"type": "tool_use", "id": call, "name": tool, "input": given}])
        emit("user", [{"type": "tool_result", "tool_use_id": call, "content": output,
                       "is_error": is_error}])
        if reply:
            emit("assistant", [{"type": "text", "text": reply}])
    return "\n".join(lines) + "\n"


def _relaunch_loop(launches: int) -> str:
    """The same server launched ``launches`` times in the background, nothing stopping it."""
    return _one_exchange("start the api", [
        ("nohup uvicorn app:api --port 8000 > api.log 2>&1 &", "", False, "Started it again.")
    ] * launches)


def test_a_relaunch_loop_names_a_few_earlier_launches_and_counts_the_rest(tmp_path: Path) -> None:
    """Every relaunch of a server that was never stopped is flagged, over the one just before it;
    its evidence names at most six earlier launches (each finding named every one before it:
    quadratic in the loop, 204 s and gigabytes of JSON for 4,000 relaunches)."""
    from forensics.rules.fx002_duplicate_launch import EARLIER_LISTED

    launches = 1500
    path = tmp_path / "relaunch.jsonl"
    path.write_text(_relaunch_loop(launches))
    found = [f for f in _scan(path) if f["code"] == "FX002"]
    assert [f["line"] for f in found] == [2 + 3 * i for i in range(1, launches)]
    assert {f["severity"] for f in found} == {"medium"}
    last = found[-1]
    listed = [f for f in last["facts"] if f["role"] in ("earlier launch", "earlier launch (ended)")]
    counted = [f for f in last["facts"] if f["role"] == "earlier launches not listed"]
    assert len(listed) == EARLIER_LISTED
    # the first of all, then the latest: the newest four, three turns apart
    assert [f["turn"] for f in listed[:2]] == [2, 3 * launches - 4 - 3 * (EARLIER_LISTED - 2)]
    assert listed[-1]["turn"] == 3 * launches - 4  # the one it relaunched over, just before
    assert counted[0]["quote"] == (f"{launches - 1 - EARLIER_LISTED} more equivalent launches, "
                                   f"turns 5 to {3 * launches - 4 - 3 * (EARLIER_LISTED - 1)}")
    assert last["message"].startswith("Relaunched `uvicorn app:api --port 8000` (port 8000) "
                                      f"while the launch at {SESSION[:8]}-0000-4000-8000-"
                                      f"{3 * launches - 4:012d} was still up")
    early = found[EARLIER_LISTED]  # six launches before it: every one named, none counted
    assert sum(f["role"] == "earlier launch" for f in early["facts"]) == EARLIER_LISTED + 1
    assert not any(f["role"] == "earlier launches not listed" for f in early["facts"])


def test_a_relaunch_loops_case_study_names_the_count_of_the_launches_it_leaves_out(
        tmp_path: Path) -> None:
    """The chain of earlier launches in the case study reads the counted fact as one link."""
    path = tmp_path / "relaunch.jsonl"
    path.write_text(_relaunch_loop(12))
    done = subprocess.run([sys.executable, "-m", "forensics.cli", "report", str(path), "-o",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    pages = "\n".join(p.read_text() for p in (tmp_path / "out").rglob("*.md"))
    assert ("At **turn 35** the assistant sent the launch of `uvicorn` from **turn 32** again, "
            "unchanged. It came after many launches of `uvicorn` in the session: **turn 2** (no "
            "kill or exit recorded before the relaunch); **turn 5** (6 more equivalent launches, "
            "turns 5 to 20); **turn 23**") in pages
    assert "It was launch number 7 of `uvicorn` in the session" in pages  # six before: all named


def test_a_loop_of_failures_in_one_exchange_is_judged_per_failure(tmp_path: Path) -> None:
    """1,500 failing steps before the user writes again, each retried with other arguments, then
    a claim that all is well: every failure but the last was dealt with (its retry), the last is
    flagged high with the claim. Each failure read every reply after it (and the claims among
    them): 1,000 such steps took 38 s."""
    steps = 1500
    path = tmp_path / "failures.jsonl"
    path.write_text(_one_exchange("make the build green", [
        (f"python scripts/step_{i}.py --fast", f"Exit code 1\nValueError: bad input {i}", True,
         "Continuing with the next one.") for i in range(steps)]
        + [("true", "", False, "Everything works now, all done successfully.")]))
    found = [f for f in _scan(path) if f["code"] == "FX003"]
    assert [(f["line"], f["severity"]) for f in found] == [(2 + 3 * (steps - 1), "high")]
    assert found[0]["message"] == (
        f"`python scripts/step_{steps - 1}.py --fast` exited with status 1; the assistant went "
        "on to say \"Everything works now, all done successfully.\".")


def test_a_loop_of_failures_nothing_answers_is_judged_per_failure(tmp_path: Path) -> None:
    """1,500 failing steps in one exchange, each a program of its own that nothing answers, save
    one whose file the last reply names, far down: every other failure is flagged medium. Each
    failure was read against every reply after it: 1,000 such steps took 45 s."""
    steps = 1500
    path = tmp_path / "failures.jsonl"
    path.write_text(_one_exchange("convert the data", [
        (f"tool{i} input_{i}.csv", f"Exit code 1\nValueError: bad input_{i}.csv", True,
         "Continuing with the next one.") for i in range(steps)]
        + [("true", "", False, "Back to input_7.csv: it needs a header row.")]))
    found = [f for f in _scan(path) if f["code"] == "FX003"]
    assert [(f["line"], f["severity"]) for f in found] == [
        (2 + 3 * i, "medium") for i in range(steps) if i != 7]
    assert found[0]["message"] == ("`tool0 input_0.csv` exited with status 1; the assistant "
                                   "moved on without mentioning it.")


def test_a_loop_of_failures_each_claimed_fixed_is_judged_per_failure(tmp_path: Path) -> None:
    """1,500 test runs in one exchange, each failing and each followed by a claim that the tests
    pass: every failure is flagged high, with its claim. Each failure was read against every
    reply after it, all of them runs of the same program: 4,000 such steps took 136 s."""
    steps = 1500
    path = tmp_path / "claimed.jsonl"
    path.write_text(_one_exchange("make the tests pass", [
        (f"pytest tests/test_{i}.py", "1 failed", True, f"All tests pass now in test_{i}.")
        for i in range(steps)]))
    found = [f for f in _scan(path) if f["code"] == "FX003"]
    assert [(f["line"], f["severity"]) for f in found] == [
        (2 + 3 * i, "high") for i in range(steps)]
    assert found[-1]["message"] == (f"`pytest tests/test_{steps - 1}.py` failed: 1 failed; the "
                                    f"assistant went on to say \"All tests pass now in "
                                    f"test_{steps - 1}.\".")


def test_a_long_run_of_claims_no_check_backs_is_judged_per_claim(tmp_path: Path) -> None:
    """4,000 edits in one exchange, each followed by a claim that the build succeeds, and no
    build ever run: every claim is flagged. Each claim looked back over every turn before it
    for the user's own report: 8,000 such claims took 10.7 s."""
    steps = 4000
    path = tmp_path / "claims.jsonl"
    path.write_text(_tool_exchange("make it build", [
        ("Edit", {"file_path": f"/w/m{i}.py", "old_string": "a", "new_string": "b"}, "ok", False,
         "Done, and the build succeeds now.") for i in range(steps)]))
    found = [f for f in _scan(path) if f["code"] == "FX005"]
    assert [(f["line"], f["severity"]) for f in found] == [
        (4 + 3 * i, "medium") for i in range(steps)]
    assert found[0]["message"] == ("The assistant claims \"Done, and the build succeeds now.\" "
                                   "but no build check ran before the claim.")
