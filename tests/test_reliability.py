"""Hostile, broken and huge input: nothing crashes, hangs, leaks or is lost.

* every registered reader and renderer is total on a seeded stream of mutated inputs
  (``FORENSICS_FUZZ_N`` sets how many; a few hundred by default, ``.ci/run`` runs 10,000);
* a reader crash costs its source only, in every command, and names the file;
* special files are never opened, unreadable folders are reported and the rest is read;
* one exit decision: 0 nothing found, 1 incidents, 2 nothing read or bad option.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest
from typer.testing import CliRunner

import fuzz
from conftest import FIXTURES, REPO
from welltyped import assert_well_typed
from forensics import ingest, report
from forensics.cli import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, app, exit_code
from forensics.output import Format, Rendering, render
from forensics.engine import scan_session
from forensics.errors import IngestError, ReaderCrash
from forensics.frame import SESSION_COLUMNS, TURN_COLUMNS, frame, session_row, turn_rows
from forensics.ingest import opencode_sqlite
from forensics.ingest._opencode import SessionBuilder
from forensics.timeline import summarize

INGEST = FIXTURES / "ingest"
CODEX = INGEST / "codex_basic.jsonl"  # two incidents: high and medium FX001
FUZZ_N = int(os.environ.get("FORENSICS_FUZZ_N", "300"))
FUZZ_SEED = int(os.environ.get("FORENSICS_FUZZ_SEED", "20260101"))
runner = CliRunner()


# -- the fuzz pass --------------------------------------------------------------------------


class _MemoryTree:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.label = "mutated-storage"
        self._files = files

    def files(self):
        return iter(self._files)

    def read_bytes(self, rel: str) -> bytes:
        return self._files[rel]


def _read(fmt: str, label: str, payload) -> list:
    if fmt == "opencode-storage":
        return ingest.read_tree(_MemoryTree(payload))
    # Half sniffed, half forced: a forced reader must cope with content of another shape.
    return ingest.read_bytes(payload, source=label, format=fmt if len(label) % 2 else None)


def _render_everything(sessions) -> None:
    assert_well_typed(sessions)
    results = [scan_session(s) for s in sessions]
    for fmt in (Format.text, Format.jsonl, Format.github):
        render(fmt, results, Rendering(errors=[]))
    orjson.loads(render(Format.json, results, Rendering(errors=[])))
    orjson.loads(render(Format.sarif, results, Rendering(errors=[])))
    for s in sessions:
        orjson.dumps(s.dump())
        for t in s.turns:
            summarize(t)
        frame(list(turn_rows(s)), TURN_COLUMNS)
    frame([session_row(r) for r in results], SESSION_COLUMNS)
    report.render_sessions(results, fmt="markdown")
    report.render_sessions(results, fmt="html")


def test_every_registered_reader_has_a_fuzz_seed() -> None:
    seeds = fuzz.seeds()
    missing = sorted(fmt for fmt in ingest.FORMATS if not seeds.get(fmt))
    assert not missing, (f"readers without a fixture in tests/fixtures/ingest to mutate: "
                         f"{missing}")


def test_readers_and_renderers_are_total_on_mutated_input(capsys) -> None:
    """Only IngestError may leave a reader; nothing may leave a renderer."""
    failures: list[str] = []
    read = unreadable = 0
    per_format: dict[str, int] = {}
    for fmt, label, payload in fuzz.mutants(seed=FUZZ_SEED, n=FUZZ_N):
        per_format[fmt] = per_format.get(fmt, 0) + 1
        try:
            sessions = _read(fmt, label, payload)
        except ReaderCrash as exc:
            failures.append(f"{label}: {exc}")
            continue
        except IngestError:
            unreadable += 1
            continue
        try:
            _render_everything(sessions)
        except Exception as exc:  # noqa: BLE001 - the point is to catch everything
            failures.append(f"{label}: renderer: {type(exc).__name__}: {exc}"[:300])
        read += 1
    with capsys.disabled():
        print(f"\nfuzz: {FUZZ_N} mutated inputs (seed {FUZZ_SEED}) over {len(per_format)} formats "
              f"({read} read, {unreadable} refused with a message)")
    assert set(per_format) == {f for f, items in fuzz.seeds().items() if items}
    assert not failures, "\n".join(failures[:20])
    assert read > FUZZ_N // 4  # the mutator keeps most inputs readable: it tests the readers


@pytest.mark.parametrize("stamp", [253402300800000, 10**16, -5, 1.5e300])
def test_times_past_9999_or_nonsense_are_dropped_not_fatal(stamp) -> None:
    doc = orjson.loads((INGEST / "opencode_export_v1.json").read_bytes())
    doc["messages"][0]["info"]["time"] = {"created": stamp}
    doc["info"]["time"] = {"created": stamp, "updated": stamp}
    [s] = ingest.read_bytes(orjson.dumps(doc), source="t.json")
    assert s.turns[0].time is None and s.started is None or s.started < 253402300800
    _render_everything([s])


def test_unhashable_part_type_is_an_issue_not_a_crash() -> None:
    doc = orjson.loads((INGEST / "opencode_export_v1.json").read_bytes())
    doc["messages"][0]["parts"][0]["type"] = ["text"]
    [s] = ingest.read_bytes(orjson.dumps(doc), source="t.json")
    assert any("part type \"['text']\"" in str(i) or "['text']" in str(i) for i in s.issues)


# -- one bad record or row never costs the others ---------------------------------------------


def _db(tmp_path: Path) -> Path:
    db = tmp_path / "opencode.db"
    con = sqlite3.connect(db)
    con.executescript((INGEST / "opencode_db.sql").read_text())
    con.close()
    return db


def test_sqlite_bad_text_and_blob_ids_keep_every_session(tmp_path: Path) -> None:
    db = _db(tmp_path)
    good = {s.id: len(s.turns) for s in opencode_sqlite.read_sqlite(db)}
    con = sqlite3.connect(db)
    [(ses, msg)] = con.execute("SELECT session_id, id FROM message ORDER BY time_created "
                               "LIMIT 1").fetchall()
    con.execute("UPDATE session SET title = CAST(? AS TEXT) WHERE id = ?",
                (b"bad \xff\xfe title", ses))
    con.execute("UPDATE session SET id = ? WHERE id = ?", (ses.encode(), ses))  # a BLOB id
    con.commit()
    con.close()
    sessions = opencode_sqlite.read_sqlite(db)
    assert {s.id: len(s.turns) for s in sessions} == good
    issues = [str(i) for s in sessions for i in s.issues]
    assert any("not valid UTF-8" in i for i in issues), issues


def test_sqlite_row_the_reader_chokes_on_is_named_and_skipped(tmp_path: Path,
                                                              monkeypatch) -> None:
    db = _db(tmp_path)
    con = sqlite3.connect(db)
    [(bad,)] = con.execute("SELECT id FROM message ORDER BY time_created LIMIT 1").fetchall()
    total = con.execute("SELECT count(*) FROM message").fetchone()[0]
    con.close()
    real = SessionBuilder.add_message

    def choke(self, info, parts, **kw):
        if info.get("id") == bad:
            raise KeyError("simulated reader bug")
        return real(self, info, parts, **kw)

    monkeypatch.setattr(SessionBuilder, "add_message", choke)
    sessions = opencode_sqlite.read_sqlite(db)
    assert len(sessions) == 3
    issues = [str(i) for s in sessions for i in s.issues]
    assert any(f"table message row {bad}: reader crashed on this record: KeyError" in i
               for i in issues), issues
    anchors = {t.anchor for s in sessions for t in s.turns}
    assert bad not in anchors and len({a for a in anchors if a.startswith("msg_")}) >= \
        total - 1 - 2  # the others are all there (v2 session's rows are not msg_ rows)


def test_jsonl_line_the_reader_chokes_on_is_named_by_line(monkeypatch) -> None:
    from forensics.ingest import codex

    real = codex._Reader.add

    def choke(self, line_no, rec):
        if line_no == 3:
            raise ValueError("simulated")
        return real(self, line_no, rec)

    monkeypatch.setattr(codex._Reader, "add", choke)
    [s] = ingest.load(CODEX)
    assert any(i.line == 3 and "reader crashed on this record: ValueError" in i.message
               for i in s.issues)
    assert len(s.turns) > 10


# -- a reader crash is isolated per source, in every command ----------------------------------


@pytest.fixture()
def crashing_claude(monkeypatch):
    from forensics.ingest import claude_code

    def boom(stream, source):
        raise TypeError("unhashable type: 'list'")

    monkeypatch.setattr(claude_code, "read_stream", boom)


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "a_claude.jsonl").write_bytes((INGEST / "claude_basic.jsonl").read_bytes())
    (d / "b_codex.jsonl").write_bytes(CODEX.read_bytes())
    return d


@pytest.mark.parametrize("command", ["scan", "turns", "report"])
def test_a_reader_crash_costs_its_source_only(tmp_path: Path, crashing_claude,
                                              command: str) -> None:
    d = _folder(tmp_path)
    args = [command, str(d)] + (["-o", str(tmp_path / "out")] if command == "report" else [])
    res = runner.invoke(app, args)
    crashed = f"{d / 'a_claude.jsonl'}: reader crashed: TypeError: unhashable type: 'list'"
    assert crashed in res.output
    assert "019ba2f2" in res.output or "1 session" in res.output  # the codex session was read
    assert res.exit_code == (EXIT_CLEAN if command == "turns" else EXIT_FINDINGS), res.output
    strict = runner.invoke(app, [*args, "--strict"])
    assert strict.exit_code == EXIT_ERROR


def test_a_reader_crash_on_the_only_file_is_exit_two_with_its_name(tmp_path: Path,
                                                                  crashing_claude) -> None:
    src = tmp_path / "only.jsonl"
    src.write_bytes((INGEST / "claude_basic.jsonl").read_bytes())
    res = runner.invoke(app, ["scan", str(src)])
    assert res.exit_code == EXIT_ERROR
    assert f"{src}: reader crashed: TypeError" in res.output
    assert "Traceback" not in res.output


def test_internal_error_line_names_the_input_file() -> None:
    code = ("import sys, forensics.cli as c, forensics.engine as e\n"
            "def boom(*a, **k): raise RuntimeError('x')\n"
            "e.scan_session = boom\n"
            "sys.argv = ['forensics', 'scan', sys.argv[1]]\n"
            "c.main()\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("FORENSICS_DEBUG", None)
    proc = subprocess.run([sys.executable, "-c", code, str(CODEX)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == EXIT_ERROR
    assert f"while reading {CODEX}" in proc.stderr, proc.stderr


# -- special files and unreadable folders ------------------------------------------------------


def _specials(d: Path) -> list[Path]:
    fifo = d / "pipe.jsonl"
    os.mkfifo(fifo)
    sock_path = d / "sock.jsonl"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    sock.close()
    return [fifo, sock_path]


def test_fifo_argument_is_refused_without_opening_it(tmp_path: Path) -> None:
    [fifo, _sock] = _specials(tmp_path)
    res = runner.invoke(app, ["scan", str(fifo)])  # would block forever if opened
    assert res.exit_code == EXIT_ERROR
    assert f"{fifo}: is a FIFO (named pipe), not a regular file: skipped" in res.output


@pytest.mark.parametrize("command", ["scan", "batch"])
def test_special_files_in_a_folder_are_reported_and_the_rest_read(tmp_path: Path,
                                                                  command: str) -> None:
    d = _folder(tmp_path)
    fifo, sock = _specials(d)
    args = [command, str(d)] + (["-o", str(tmp_path / "out"), "-j", "1", "--no-progress"]
                                if command == "batch" else [])
    res = runner.invoke(app, args)
    assert res.exit_code == EXIT_FINDINGS, res.output
    assert f"{fifo}: is a FIFO" in res.output and f"{sock}: is a socket" in res.output
    assert runner.invoke(app, [*args, "--strict"]).exit_code == EXIT_ERROR


def test_fifo_inside_an_opencode_storage_tree_is_an_issue(tmp_path: Path) -> None:
    import shutil

    tree = tmp_path / "opencode"
    shutil.copytree(INGEST / "opencode_storage", tree)
    msg_dir = next((tree / "storage" / "message").iterdir())
    fifo = msg_dir / "msg_fifo.json"
    os.mkfifo(fifo)
    sessions = ingest.load(tree)
    assert len(sessions) == 2
    issues = [str(i) for s in sessions for i in s.issues]
    assert any("msg_fifo.json: is a FIFO" in i for i in issues), issues


def test_unreadable_folder_is_reported_and_the_rest_scanned(tmp_path: Path,
                                                           monkeypatch) -> None:
    d = _folder(tmp_path)
    locked = d / "locked"
    locked.mkdir()
    real = os.scandir

    def scandir(path="."):
        if not isinstance(path, int) and os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(locked))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)  # root reads everything: simulate the denial
    for args in (["scan", str(d)],
                 ["batch", str(d), "-o", str(tmp_path / "out"), "-j", "1", "--no-progress"]):
        res = runner.invoke(app, args)
        assert res.exit_code == EXIT_FINDINGS, res.output
        assert f"{locked}" in res.output and "Permission denied" in res.output


# -- exit codes: one decision ------------------------------------------------------------------


def test_exit_code_counts_only_rules_at_or_above_fail_on_and_never_harness() -> None:
    specs = {"FX001": SimpleNamespace(kind="rule"), "FX009": SimpleNamespace(kind="harness"),
             "FX002": object()}  # a spec without the field is a plain rule
    assert exit_code([], specs=specs) == EXIT_CLEAN
    assert exit_code([("FX001", "low")], specs=specs) == EXIT_FINDINGS
    assert exit_code([("FX002", "medium")], specs=specs) == EXIT_FINDINGS
    assert exit_code([("FX009", "high")], specs=specs) == EXIT_CLEAN
    assert exit_code([("FX001", "medium")], fail_on="high", specs=specs) == EXIT_CLEAN
    assert exit_code([("FX001", "high")], fail_on="high", specs=specs) == EXIT_FINDINGS
    assert exit_code([("FX001", "medium")], fail_on="medium", specs=specs) == EXIT_FINDINGS
    assert exit_code([], problems=3, specs=specs) == EXIT_CLEAN
    assert exit_code([("FX001", "low")], problems=3, specs=specs) == EXIT_FINDINGS
    assert exit_code([("FX001", "low")], problems=3, strict=True, specs=specs) == EXIT_ERROR
    assert exit_code([], read_any=False, specs=specs) == EXIT_ERROR


def test_fail_on_sets_the_lowest_severity_that_makes_one(tmp_path: Path) -> None:
    # codex_basic has one high and one medium FX001.
    assert runner.invoke(app, ["scan", str(CODEX)]).exit_code == EXIT_FINDINGS
    assert runner.invoke(app, ["scan", str(CODEX), "--fail-on", "high"]).exit_code == \
        EXIT_FINDINGS
    assert runner.invoke(app, ["scan", str(CODEX), "--select", "FX004"]).exit_code == EXIT_CLEAN
    out = tmp_path / "o"
    assert runner.invoke(app, ["batch", str(CODEX), "-o", str(out), "-j", "1", "--no-progress",
                               "--fail-on", "high"]).exit_code == EXIT_FINDINGS
    assert runner.invoke(app, ["scan", str(CODEX), "--fail-on", "severe"]).exit_code == \
        EXIT_ERROR


def test_read_issues_never_change_zero_or_one_unless_strict(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    src.write_bytes(CODEX.read_bytes() + b"{broken line\n")
    res = runner.invoke(app, ["scan", str(src)])
    assert res.exit_code == EXIT_FINDINGS and "not valid JSON" in res.output
    assert runner.invoke(app, ["scan", str(src), "--strict"]).exit_code == EXIT_ERROR
    assert runner.invoke(app, ["turns", str(src)]).exit_code == EXIT_CLEAN
    assert runner.invoke(app, ["turns", str(src), "--strict"]).exit_code == EXIT_ERROR
    doc = orjson.loads(runner.invoke(app, ["scan", str(src), "-f", "json"]).stdout)
    assert any("not valid JSON" in i for i in doc["sessions"][0]["issues"])


def test_nothing_readable_is_exit_two(tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_text("not a session\n", encoding="utf-8")
    assert runner.invoke(app, ["scan", str(tmp_path / "x.jsonl")]).exit_code == EXIT_ERROR
    res = runner.invoke(app, ["batch", str(tmp_path / "x.jsonl"), "-o", str(tmp_path / "o"),
                              "-j", "1", "--no-progress"])
    assert res.exit_code == EXIT_ERROR


@pytest.mark.parametrize("command", ["scan-html", "report"])
def test_a_renderer_crash_costs_its_session_only(tmp_path: Path, monkeypatch,
                                                 command: str) -> None:
    import forensics.report as rep

    real = rep.timeline_svg

    def choke(session, *a, **k):
        if session.agent == "claude-code":
            raise OverflowError("simulated renderer bug")
        return real(session, *a, **k)

    monkeypatch.setattr(rep, "timeline_svg", choke)
    d = _folder(tmp_path)
    out = tmp_path / "out"
    args = (["scan", str(d), "-f", "html"] if command == "scan-html"
            else ["report", str(d), "-o", str(out)])
    res = runner.invoke(app, args)
    assert f"{d / 'a_claude.jsonl'}: renderer crashed: OverflowError" in res.output
    assert res.exit_code == EXIT_FINDINGS, res.output
    if command == "report":
        codex = out / "019ba2f2-5f36-7eb1-a791-e8b7d5a45da1"
        assert (codex / "index.html").is_file() and list(codex.glob("FX001-*.md"))
        assert not list(out.glob("5d2e8f41-*/index.html"))  # the crashing session has none
    else:
        assert "019ba2f2" in res.output


def test_problems_are_on_stderr_whatever_the_format(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    src.write_bytes(CODEX.read_bytes() + b"{broken line\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "forensics.cli", "scan", str(src), "-f",
                           "json"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == EXIT_FINDINGS
    assert "1 unreadable record in 1 session" in proc.stderr
    orjson.loads(proc.stdout)  # stdout stays one JSON document
