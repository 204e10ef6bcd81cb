"""``forensics scan`` end to end, as a user runs it: output, JSON contract, exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from conftest import FIXTURES, REPO
from forensics.resources import sample_session

SEED_000 = FIXTURES / "seeds" / "seed_000_duplicate_launch.json"
ANCHORS = orjson.loads((FIXTURES / "seeds" / "anchors.json").read_bytes())


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "forensics.cli", *args], capture_output=True,
                          text=True, cwd=cwd or REPO, env=env, timeout=120)


def test_text_output_names_rule_anchor_and_severity() -> None:
    proc = run("scan", str(SEED_000))
    assert proc.returncode == 1
    relaunch = ANCHORS["seed_000_duplicate_launch"]["relaunch"]
    lines = [l for l in proc.stdout.splitlines() if relaunch in l]
    # ruff's shape: the place first, then code, slug, severity and the message
    assert any(l.startswith(f"{SEED_000}: FX002 duplicate-launch (high) Relaunched")
               for l in lines)
    assert any("FX003" in l for l in lines)
    assert proc.stdout.splitlines()[-1] == (
        "Found 3 incidents in 1 session (FX001 empty-response: 1, FX002 duplicate-launch: 1, "
        "FX003 ignored-tool-error: 1).")
    assert "\x1b[" not in proc.stdout  # no colour into a pipe
    assert proc.stderr == ""


def test_json_contract() -> None:
    proc = run("scan", str(SEED_000), "--format", "json")
    assert proc.returncode == 1
    doc = orjson.loads(proc.stdout)
    assert set(doc) >= {"schema_version", "sessions", "findings"}
    assert doc["schema_version"] == 1
    (session,) = doc["sessions"]
    assert {"id", "source", "agent", "turns", "issues"} <= set(session)
    assert session["agent"] == "opencode" and session["turns"] == 52
    for finding in doc["findings"]:
        assert {"rule", "code", "severity", "session_id", "source", "turn", "anchor",
                "evidence", "message"} <= set(finding)
        assert isinstance(finding["evidence"], list)
    assert sorted((f["code"], f["anchor"]) for f in doc["findings"]) == sorted([
        ("FX001", ANCHORS["seed_000_duplicate_launch"]["empty"]),
        ("FX002", ANCHORS["seed_000_duplicate_launch"]["relaunch"]),
        ("FX003", ANCHORS["seed_000_duplicate_launch"]["relaunch"]),
    ])


def test_select_and_ignore() -> None:
    proc = run("scan", str(SEED_000), "--format", "json", "--select", "duplicate-launch")
    assert [f["code"] for f in orjson.loads(proc.stdout)["findings"]] == ["FX002"]
    proc = run("scan", str(SEED_000), "--format", "json", "--ignore", "FX002",
               "--ignore", "FX003")
    assert [f["code"] for f in orjson.loads(proc.stdout)["findings"]] == ["FX001"]


def test_clean_session_exits_zero(tmp_path: Path) -> None:
    proc = run("scan", str(SEED_000), "--select", "user-resend")
    assert proc.returncode == 0
    assert proc.stdout == "No incidents in 1 session.\n"  # clean sessions only with -v
    verbose = run("scan", str(SEED_000), "--select", "user-resend", "-v")
    assert verbose.stdout.splitlines()[0].startswith(
        f"{SEED_000}: clean [ses_333486f13ffeFEHPjlCibDfuOg] (opencode, 52 turns")


def test_config_file_is_discovered_and_checked(tmp_path: Path) -> None:
    (tmp_path / "forensics.toml").write_text('select = ["FX001"]\n', encoding="utf-8")
    proc = run("scan", str(SEED_000), "--format", "json", cwd=tmp_path)
    assert [f["code"] for f in orjson.loads(proc.stdout)["findings"]] == ["FX001"]
    (tmp_path / "forensics.toml").write_text(
        '[rules.user-resend]\nsimilarty = 0.5\n', encoding="utf-8")
    proc = run("scan", str(SEED_000), cwd=tmp_path)
    assert proc.returncode == 2
    assert "forensics.toml" in proc.stderr and "similarty" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--select", "FX042"], "unknown rule 'FX042'"),
    (["--input-format", "nonsense"], "unknown format"),
])
def test_bad_options_exit_two_without_traceback(args: list[str], message: str) -> None:
    proc = run("scan", str(SEED_000), *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_and_unknown_inputs(tmp_path: Path) -> None:
    proc = run("scan", str(tmp_path / "nope.jsonl"))
    assert proc.returncode == 2 and "nope.jsonl: no such file" in proc.stderr
    other = tmp_path / "package.json"
    other.write_text('{"name": "x", "version": "1.0.0"}', encoding="utf-8")
    proc = run("scan", str(other))
    assert proc.returncode == 2 and "package.json" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_partly_bad_file_is_still_analysed(tmp_path: Path) -> None:
    lines = (FIXTURES / "ingest" / "claude_basic.jsonl").read_bytes().splitlines()
    bad = tmp_path / "session.jsonl"
    bad.write_bytes(b"\n".join(lines[:3] + [b"{not json"] + lines[3:]) + b"\n")
    proc = run("scan", str(bad), "--format", "json")
    assert proc.returncode in (0, 1)
    doc = orjson.loads(proc.stdout)
    (session,) = doc["sessions"]
    assert any("session.jsonl:4" in issue for issue in session["issues"])
    strict = run("scan", str(bad), "--strict")
    assert strict.returncode == 2


def test_folder_with_one_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "good.json").write_bytes(SEED_000.read_bytes())
    (tmp_path / "broken.jsonl").write_bytes(b'{"type":"session_meta","payload":{}}\n\xff\xfe')
    proc = run("scan", str(tmp_path), "--format", "json")
    assert proc.returncode == 1
    doc = orjson.loads(proc.stdout)
    assert len(doc["findings"]) == 3


def test_scan_of_the_sample_from_another_folder(tmp_path: Path) -> None:
    proc = run("scan", str(sample_session()), cwd=tmp_path)
    assert proc.returncode == 1
    for code in ("FX001", "FX002", "FX003", "FX004"):
        assert code in proc.stdout


def test_rules_command_documents_a_rule() -> None:
    proc = run("rules", "FX003")
    assert proc.returncode == 0
    assert "ignored-tool-error" in proc.stdout and "probe_commands" in proc.stdout
    listing = run("rules")
    assert [l.split()[0] for l in listing.stdout.splitlines()] == [
        "FX001", "FX002", "FX003", "FX004"]


def test_folder_without_sessions_exits_two(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing here", encoding="utf-8")
    proc = run("scan", str(tmp_path))
    assert proc.returncode == 2
    assert str(tmp_path) in proc.stderr and "no agent sessions" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_internal_error_is_one_line_and_exit_two(tmp_path: Path) -> None:
    code = ("import sys, forensics.cli as c, forensics.engine as e\n"
            "def boom(*a, **k): raise RuntimeError('token sk-secret in a local')\n"
            "e.scan_session = boom\n"
            "sys.argv = ['forensics', 'scan', sys.argv[1]]\n"
            "c.main()\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("FORENSICS_DEBUG", None)
    proc = subprocess.run([sys.executable, "-c", code, str(SEED_000)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert "internal error RuntimeError" in proc.stderr
    assert "Traceback" not in proc.stderr and "sk-secret" not in proc.stderr
