"""One way to name inputs in every command: files, folders, archives, several, ``-``, ``~``;
and the filters (``--since/--until``, ``--project``, ``--agent``)."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import orjson
import pytest
import zstandard
from typer.testing import CliRunner

from conftest import FIXTURES
from forensics.cli import app
from forensics.inputs import SessionFilter, parse_when

CLAUDE = FIXTURES / "ingest" / "claude_basic.jsonl"
CODEX = FIXTURES / "ingest" / "codex_basic.jsonl"
SEED_000 = FIXTURES / "seeds" / "seed_000_duplicate_launch.json"


def cli(*args, env=None, input=None):
    return CliRunner().invoke(app, [str(a) for a in args], env=env, input=input)


def findings(*args, **kw) -> list[tuple[str, str, str]]:
    out = cli("scan", *args, "-f", "json", **kw)
    assert out.exit_code in (0, 1), out.stderr
    return sorted((f["session_id"], f["code"], f["anchor"])
                  for f in orjson.loads(out.stdout)["findings"])


def make_archive(kind: str, tmp: Path) -> Path:
    members = {"logs/claude/basic.jsonl": CLAUDE.read_bytes(),
               "logs/seed.json": SEED_000.read_bytes()}
    if kind == "zip":
        path = tmp / "sessions.zip"
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in members.items():
                zf.writestr(name, data)
        return path
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    if kind == "tar":
        path = tmp / "sessions.tar"
        path.write_bytes(raw)
    elif kind == "tar.gz":
        import gzip

        path = tmp / "sessions.tar.gz"
        path.write_bytes(gzip.compress(raw))
    else:
        path = tmp / "sessions.tar.zst"
        path.write_bytes(zstandard.ZstdCompressor().compress(raw))
    return path


EXPECTED = None


def direct() -> list[tuple[str, str, str]]:
    global EXPECTED
    if EXPECTED is None:
        EXPECTED = findings(CLAUDE, SEED_000)
    return EXPECTED


@pytest.mark.parametrize("kind", ["zip", "tar", "tar.gz", "tar.zst"])
def test_scan_reads_the_archives_batch_reads(tmp_path: Path, kind: str) -> None:
    archive = make_archive(kind, tmp_path)
    assert findings(archive) == direct()
    out = cli("scan", archive, "-f", "jsonl")
    sources = {orjson.loads(l)["source"] for l in out.stdout.splitlines()}
    assert sources == {f"{archive}!logs/claude/basic.jsonl", f"{archive}!logs/seed.json"}
    assert findings(f"{archive}!logs/seed.json") == [f for f in direct() if f[0].startswith("ses_")]


def test_report_and_turns_read_archives_and_several_paths(tmp_path: Path) -> None:
    archive = make_archive("tar.gz", tmp_path)
    out = cli("report", archive, CODEX, "-o", tmp_path / "reports")
    assert out.exit_code == 1, out.stderr
    assert "in 3 sessions" in out.stdout
    turns = cli("turns", make_archive("zip", tmp_path), CODEX)
    assert turns.exit_code == 0
    heads = [l for l in turns.stdout.splitlines() if l.startswith("session ")]
    assert len(heads) == 3


def test_standard_input_in_scan_and_turns() -> None:
    assert findings("-", input=CLAUDE.read_bytes()) == findings(CLAUDE)
    out = cli("scan", "-", "-f", "jsonl", input=CLAUDE.read_bytes())
    assert {orjson.loads(l)["source"] for l in out.stdout.splitlines()} == {"<stdin>"}
    assert {orjson.loads(l)["line"] for l in out.stdout.splitlines()} == {22, 23, 26}
    turns = cli("turns", "-", input=CODEX.read_bytes())
    assert turns.exit_code == 0 and "019ba2f2-5f36-7eb1-a791-e8b7d5a45da1" in turns.stdout
    empty = cli("scan", "-", input=b"")
    assert empty.exit_code == 2 and "<stdin>: empty file" in empty.stderr


def test_quoted_tilde_is_expanded(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "s.jsonl").write_bytes(CLAUDE.read_bytes())
    assert findings("~/logs/s.jsonl", env={"HOME": str(tmp_path)}) == findings(CLAUDE)
    assert findings("~/logs", env={"HOME": str(tmp_path)}) == findings(CLAUDE)


def test_one_unreadable_input_among_several(tmp_path: Path) -> None:
    out = cli("scan", CLAUDE, tmp_path / "missing.jsonl", "-f", "json")
    assert out.exit_code == 1
    assert "missing.jsonl: no such file" in out.stderr
    assert len(orjson.loads(out.stdout)["errors"]) == 1


def test_batch_reads_standard_input(tmp_path: Path) -> None:
    out = cli("batch", "-", "-o", tmp_path / "triage", "-j", "1", "--no-progress",
              input=CODEX.read_bytes())
    assert out.exit_code == 1, out.stderr
    assert "1 sessions from 1 sources, 2 incidents" in out.stdout


# -- filters ------------------------------------------------------------------------------------


def test_agent_and_project_filters() -> None:
    both = [CLAUDE, CODEX, SEED_000]
    assert {f[0] for f in findings(*both, "--agent", "codex")} == {
        "019ba2f2-5f36-7eb1-a791-e8b7d5a45da1"}
    assert {f[0] for f in findings(*both, "--agent", "claude")} == {
        "5d2e8f41-7c3a-4b9e-a1d6-3f8c2e9b7a10"}
    assert {f[0] for f in findings(*both, "--project", "/home/dev/shop")} == {
        "5d2e8f41-7c3a-4b9e-a1d6-3f8c2e9b7a10", "019ba2f2-5f36-7eb1-a791-e8b7d5a45da1"}
    assert {f[0] for f in findings(*both, "--project", "/root")} == {
        "ses_333486f13ffeFEHPjlCibDfuOg"}
    none = cli("scan", *both, "--agent", "opencode", "--project", "nowhere-at-all")
    assert none.exit_code == 0 and "no session matches" in none.stderr
    assert none.stdout == "No incidents in 0 sessions.\n"


def test_since_and_until() -> None:
    # claude_basic runs on 2026-03-14 (UTC)
    assert findings(CLAUDE, "--since", "2026-03-01", "--until", "2026-03-31")
    assert findings(CLAUDE, "--since", "2026-04-01") == []
    assert findings(CLAUDE, "--until", "20260301") == []
    assert findings(CLAUDE, "--until", "20260314") == findings(CLAUDE)
    bad = cli("scan", CLAUDE, "--since", "last tuesday")
    assert bad.exit_code == 2 and "'last tuesday' is not a date" in bad.stderr


def test_parse_when_forms() -> None:
    import datetime as dt

    now = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
    assert parse_when("7d", now=now) == (now - dt.timedelta(days=7)).timestamp()
    assert parse_when("2026-11-30T10:00:00Z") == dt.datetime(
        2026, 11, 30, 10, tzinfo=dt.timezone.utc).timestamp()
    start = parse_when("2026-11-30")
    assert parse_when("2026-11-30", end_of_day=True) - start == 86400
    keep = SessionFilter(since=start)
    assert keep.active and not SessionFilter().active


def test_progress_on_stderr_for_long_runs(tmp_path: Path) -> None:
    for n in range(25):
        (tmp_path / f"r{n:02d}.jsonl").write_bytes(CODEX.read_bytes())
    out = cli("scan", tmp_path, "--statistics", env={"FORENSICS_PROGRESS": "1"})
    assert out.stdout.splitlines()[0] == "50\tFX001\tempty-response"
    assert "\r25 sessions · 50 incidents · " in out.stderr and out.stderr.endswith("\n")
    quiet = cli("scan", tmp_path, "--statistics")  # not a terminal: no progress
    assert quiet.stderr == ""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_batch_filters(tmp_path: Path, workers: str) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "c.jsonl").write_bytes(CLAUDE.read_bytes())
    (logs / "x.jsonl").write_bytes(CODEX.read_bytes())
    out = cli("batch", logs, "-o", tmp_path / "t", "-j", workers, "--no-progress",
              "--agent", "codex")
    assert out.exit_code == 1, out.stderr
    assert out.stdout.startswith("1 sessions from 2 sources, 2 incidents")
    rows = [orjson.loads(l) for l in (tmp_path / "t" / "sessions.ndjson").read_bytes().split()]
    assert [r["agent"] for r in rows] == ["codex"]
    again = cli("batch", logs, "-o", tmp_path / "t", "-j", workers, "--no-progress")
    assert again.stdout.startswith("2 sessions from 2 sources, 5 incidents")  # filter changed


def test_archives_inside_a_folder_are_read_too(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    make_archive("tar.gz", folder)
    (folder / "codex.jsonl").write_bytes(CODEX.read_bytes())
    assert findings(folder) == sorted(direct() + findings(CODEX))
