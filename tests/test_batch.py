"""Batch over folders and archives: same rows via every path, incremental reruns, the schema."""

from __future__ import annotations

import io
import re
import shutil
import sqlite3
import tarfile
import zipfile
from pathlib import Path

import orjson
import polars as pl
import pytest
from conftest import CORPUS, FIXTURES, REPO, needs_shared
from typer.testing import CliRunner

from forensics.batch import run_batch
from forensics.cli import app
from forensics.frame import (
    ERROR_COLUMNS,
    INCIDENT_COLUMNS,
    SCHEMA_VERSION,
    SESSION_COLUMNS,
    TURN_COLUMNS,
    schema,
)

CORRUPT = b"\x00\x9f\x12garbage\xff\xfe" * 64
CORRUPT_NAME = "claude/broken-session.jsonl"


def _session_fixtures() -> list[Path]:
    """Every session fixture the project has: ingest fixtures and seed fixtures."""
    out = []
    for sub in ("ingest", "seeds"):
        d = FIXTURES / sub
        if d.is_dir():
            out.extend(p for p in sorted(d.iterdir())
                       if ".golden." not in p.name and p.suffix in (".json", ".jsonl", ".sql")
                       or (p.is_dir() and (p / "storage").is_dir()))
    return out


def _not_sessions() -> list[Path]:
    """Fixture JSON files that are not sessions (anchor lists…): a batch ignores them."""
    from forensics.ingest.sniff import sniff_bytes

    return [p for p in _session_fixtures()
            if p.suffix == ".json" and sniff_bytes(p.read_bytes()[:65536]) is None]


def build_folder(root: Path) -> Path:
    """A mixed tree: every session fixture, an opencode data dir, a non-session JSON file and
    one corrupt JSONL file."""
    src = root / "sessions"
    src.mkdir()
    for p in _session_fixtures():
        sub = src / p.parent.name
        sub.mkdir(exist_ok=True)
        if p.is_dir():
            shutil.copytree(p, sub / p.name, dirs_exist_ok=True)
        elif p.suffix == ".sql":
            # Beside a storage tree when there is one: an opencode data dir with both.
            trees = [d for d in _session_fixtures() if d.is_dir() and d.parent == p.parent]
            data_dir = sub / (trees[0].name if trees else f"{p.stem}_data")
            data_dir.mkdir(exist_ok=True)
            con = sqlite3.connect(data_dir / "opencode.db")
            con.executescript(p.read_text(encoding="utf-8"))
            con.commit()
            con.close()
        else:
            shutil.copy(p, sub / p.name)
    (src / "claude").mkdir(exist_ok=True)
    (src / CORRUPT_NAME).write_bytes(CORRUPT)
    (src / "package.json").write_text('{"name": "not-a-session"}')
    return src


def _members(folder: Path) -> list[tuple[str, Path]]:
    return [(p.relative_to(folder).as_posix(), p) for p in sorted(folder.rglob("*"))
            if p.is_file()]


def build_archives(folder: Path, root: Path) -> dict[str, Path]:
    out = {}
    with tarfile.open(root / "sessions.tar.gz", "w:gz") as tf:
        tf.add(folder, arcname=".")
    out["tar.gz"] = root / "sessions.tar.gz"
    with tarfile.open(root / "sessions.tar", "w") as tf:
        tf.add(folder, arcname="sessions")
    out["tar"] = root / "sessions.tar"
    with zipfile.ZipFile(root / "sessions.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for name, p in _members(folder):
            zf.write(p, name)
    out["zip"] = root / "sessions.zip"
    import zstandard

    with open(root / "sessions.tar.zst", "wb") as raw:
        with zstandard.ZstdCompressor().stream_writer(raw) as zw:
            with tarfile.open(fileobj=zw, mode="w|") as tf:
                tf.add(folder, arcname=".")
    out["tar.zst"] = root / "sessions.tar.zst"
    return out


def build_inputs(root: Path) -> dict[str, Path]:
    """The session folder and its archives of every kind, by name ("folder", "zip", …)."""
    folder = build_folder(root)
    return {"folder": folder, **build_archives(folder, root)}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("batch-inputs"))


@pytest.fixture(scope="module")
def batches(inputs, tmp_path_factory):
    """One batch per input path; the folder with two workers, archives in-process."""
    out = {}
    for kind, path in inputs.items():
        dest = tmp_path_factory.mktemp(f"out-{kind.replace('.', '-')}")
        summary = run_batch([path], dest, workers=2 if kind in ("folder", "zip") else 1,
                            progress=False)
        out[kind] = (summary, dest)
    return out


def _strip(value: str | None) -> str | None:
    """A source or origin without the folder or archive it is in (`dir/x`, `a.zip!x`)."""
    if value is None:
        return None
    value = value.split("!", 1)[1] if "!" in value else value
    value = re.sub(r"^.*?/sessions/", "", value)
    return value.removeprefix("sessions/")


def _normal(df: pl.DataFrame) -> list[dict]:
    rows = df.with_columns(
        pl.col("origin").map_elements(_strip, return_dtype=pl.String),
        pl.col("source").map_elements(_strip, return_dtype=pl.String),
    ).drop("case").to_dicts()
    return sorted(rows, key=lambda r: orjson.dumps(r, default=str))


def test_every_path_gives_the_same_incidents(batches):
    folder_rows = _normal(pl.read_parquet(batches["folder"][1] / "incidents.parquet"))
    assert folder_rows, "the fixtures hold incidents of the core rules"
    for kind, (summary, out) in batches.items():
        assert _normal(pl.read_parquet(out / "incidents.parquet")) == folder_rows, kind
    sessions = {kind: sorted(_strip(s) for s in pl.read_parquet(out / "sessions.parquet")
                             ["source"]) for kind, (_s, out) in batches.items()}
    assert all(v == sessions["folder"] for v in sessions.values())


def test_every_path_reads_every_fixture_session(batches):
    summary, _out = batches["folder"]
    fixtures = _session_fixtures()
    assert summary.sessions >= len(fixtures)
    for kind, (s, _o) in batches.items():
        assert s.sessions == summary.sessions, kind
        assert s.incidents == summary.incidents, kind
        assert s.ignored == 1 + len(_not_sessions()), kind  # package.json and the like


def test_corrupt_file_is_listed_with_its_reason(batches):
    for kind, (summary, out) in batches.items():
        errors = [orjson.loads(line) for line in (out / "errors.ndjson").read_bytes().splitlines()]
        assert len(errors) == 1, (kind, errors)
        (err,) = errors
        assert err["path"].endswith(CORRUPT_NAME)
        assert err["kind"] == "unreadable"
        assert err["reason"] == "not a session log (binary content)"
        assert summary.errors == [(err["path"], err["reason"])]
        assert f"{CORRUPT_NAME}: not a session log (binary content)" in str(summary)


def test_zip_labels_name_the_member(batches, inputs):
    sessions = pl.read_parquet(batches["zip"][1] / "sessions.parquet")
    assert all(o.startswith(f"{inputs['zip']}!") for o in sessions["origin"])


def test_tables_have_exactly_the_documented_schema(batches):
    _summary, out = batches["folder"]
    incidents = pl.read_parquet(out / "incidents.parquet")
    sessions = pl.read_parquet(out / "sessions.parquet")
    assert incidents.schema == pl.Schema(schema(INCIDENT_COLUMNS))
    assert sessions.schema == pl.Schema(schema(SESSION_COLUMNS))
    for name in ("incidents", "sessions"):
        meta = pl.read_parquet_metadata(out / f"{name}.parquet")
        assert meta["forensics.schema_version"] == SCHEMA_VERSION
    errors = pl.read_ndjson(out / "errors.ndjson", schema=schema(ERROR_COLUMNS))
    assert errors.height == 1
    twin = pl.read_ndjson(out / "incidents.ndjson", schema=schema(INCIDENT_COLUMNS))
    assert twin.equals(incidents)
    # Per-session counts agree with the incident rows.
    per_session = incidents.group_by("origin", "session_id").len()
    joined = sessions.join(per_session, on=["origin", "session_id"], how="left")
    assert (joined["incidents"] == joined["len"].fill_null(0)).all()


def _documented(table: str) -> dict[str, str]:
    text = (REPO / "docs" / "schema.md").read_text(encoding="utf-8")
    section = text.split(f"## {table}", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\w+) \| ([^|]+) \|", section, flags=re.M)
    return {name: dtype.strip() for name, dtype in rows if name != "column"}


@pytest.mark.parametrize("table,columns", [("incidents", INCIDENT_COLUMNS),
                                           ("sessions", SESSION_COLUMNS),
                                           ("errors", ERROR_COLUMNS),
                                           ("turns", TURN_COLUMNS)])
def test_schema_doc_matches_the_code(table, columns):
    documented = _documented(table)
    assert list(documented) == list(columns)
    for name, dtype in schema(columns).items():
        shown = str(dtype).replace("time_unit='us', time_zone='UTC'", "us, UTC")
        shown = re.sub(r"Datetime\(.*\)", "Datetime(us, UTC)", shown)
        assert documented[name].replace(" ", "") == _doc_dtype(shown), name
    assert f"**schema_version: {SCHEMA_VERSION}.**" in (REPO / "docs" / "schema.md").read_text()


def _doc_dtype(shown: str) -> str:
    shown = shown.replace("{'code': String, 'count': Int64}", "{code:String,count:Int64}")
    return shown.replace(" ", "").replace("'", "")


def test_rerun_skips_unchanged_sources_and_full_rescans(inputs, tmp_path):
    folder = tmp_path / "tree"
    shutil.copytree(inputs["folder"], folder)
    out = tmp_path / "out"
    first = run_batch([folder], out, workers=1, progress=False)
    rows = pl.read_parquet(out / "incidents.parquet")
    readable = first.sources - len(first.errors)

    again = run_batch([folder], out, workers=1, progress=False)
    assert again.skipped == readable - first.ignored
    assert again.scanned == 0
    assert f"skipped {again.skipped} unchanged sources" in str(again)
    assert pl.read_parquet(out / "incidents.parquet").equals(rows)
    assert len(again.errors) == 1  # the corrupt file is retried and listed again

    # Same bytes, new mtime: read again, hash unchanged, still skipped.
    target = next(folder.rglob("claude_basic.jsonl"), None) or next(folder.rglob("*.jsonl"))
    target.write_bytes(target.read_bytes())
    assert run_batch([folder], out, workers=1, progress=False).skipped == again.skipped

    # Changed content: that source alone is scanned.
    target.write_bytes(target.read_bytes() + b"\n")
    changed = run_batch([folder], out, workers=1, progress=False)
    assert changed.scanned == 1 and changed.skipped == again.skipped - 1
    assert pl.read_parquet(out / "incidents.parquet").equals(rows)

    full = run_batch([folder], out, workers=1, full=True, progress=False)
    assert full.skipped == 0 and full.scanned == readable - first.ignored
    assert pl.read_parquet(out / "incidents.parquet").equals(rows)


def test_damaged_archive_keeps_what_was_read(inputs, tmp_path):
    data = inputs["tar.gz"].read_bytes()
    damaged = tmp_path / "damaged.tar.gz"
    damaged.write_bytes(data[: len(data) * 2 // 3])
    summary = run_batch([damaged, tmp_path / "missing"], tmp_path / "out", workers=1,
                        progress=False)
    reasons = dict(summary.errors)
    assert reasons[str(tmp_path / "missing")] == "no such file or folder"
    assert reasons[str(damaged)].startswith("archive damaged, later members not read")
    assert 0 < summary.sessions


def test_cli_batch_exit_codes(inputs, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["batch", str(inputs["zip"]), "-o", str(tmp_path / "a"),
                                 "--workers", "1", "--no-progress"])
    assert result.exit_code == 1, result.output
    assert "incidents" in result.output
    assert (tmp_path / "a" / "index.html").is_file()

    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "broken.jsonl").write_bytes(CORRUPT)
    result = runner.invoke(app, ["batch", str(junk), "-o", str(tmp_path / "b"),
                                 "--no-progress"])
    assert result.exit_code == 2
    assert "not a session log (binary content)" in result.output

    result = runner.invoke(app, ["batch", str(inputs["folder"]), "-o", str(tmp_path / "c"),
                                 "--select", "FX999", "--no-progress"])
    assert result.exit_code == 2


def test_index_pages_show_rules_and_worst_sessions(batches):
    summary, out = batches["folder"]
    md = (out / "index.md").read_text(encoding="utf-8")
    html = (out / "index.html").read_text(encoding="utf-8")
    for code in summary.by_rule:
        assert f"| {code} |" in md
        assert f"<td>{code}</td>" in html
    assert "## Worst sessions" in md and "Incidents per week" in html
    assert html.count("<svg") >= 4
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<script" not in html


@pytest.fixture(scope="module")
def corpus_batch(tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus")
    return run_batch([CORPUS], out, workers=2, progress=False), out


@needs_shared
def test_batch_over_the_shared_corpus(corpus_batch):
    summary, out = corpus_batch
    sessions = pl.read_parquet(out / "sessions.parquet")
    incidents = pl.read_parquet(out / "incidents.parquet")
    real = [p for sub in ("opencode", "claude", "codex") for p in (CORPUS / sub).iterdir()]
    assert set(sessions["origin"]) | {e for e, _r in summary.errors} >= {str(p) for p in real}
    assert summary.sessions == sessions.height >= len(real) - len(summary.errors)
    assert summary.incidents == incidents.height > 0
    assert summary.ignored >= 1  # the labeled Who&When JSON files are not agent sessions
    assert (out / "index.html").stat().st_size > 1000
    assert not [e for e in summary.errors if e[1].startswith("reader crashed")]


def test_index_html_has_no_console_errors(batches):
    from browser import console_errors, find_chromium

    if find_chromium() is None:
        pytest.skip("chromium is not installed")
    _summary, out = batches["folder"]
    assert console_errors(out / "index.html") == []


@needs_shared
def test_corpus_index_html_has_no_console_errors(corpus_batch):
    from browser import console_errors, find_chromium

    if find_chromium() is None:
        pytest.skip("chromium is not installed")
    assert console_errors(corpus_batch[1] / "index.html") == []


def test_progress_line(capsys):
    from forensics.batch import Progress

    buf = io.StringIO()
    bar = Progress(True, stream=buf)
    bar.update(5, 10, 7, 3, final=True)
    line = buf.getvalue()
    assert line.startswith("\r5/10 sources · 7 sessions · 3 incidents · ")
    assert line.endswith("sessions/s\n")


def test_output_folder_inside_the_input_is_not_scanned(inputs, tmp_path):
    folder = tmp_path / "tree"
    shutil.copytree(inputs["folder"], folder)
    first = run_batch([folder], folder / "report", workers=1, progress=False)
    again = run_batch([folder], folder / "report", workers=1, progress=False)
    assert again.sources == first.sources and len(again.errors) == len(first.errors) == 1


def test_incidents_link_to_their_case_studies(batches):
    from forensics import cases

    if not cases.available():
        pytest.skip("the case-study reporter is not installed")
    for kind, (_summary, out) in batches.items():
        incidents = pl.read_parquet(out / "incidents.parquet")
        assert incidents["case"].null_count() == 0, kind
        for row in incidents.iter_rows(named=True):
            page = out / row["case"]
            if row["kind"] == "harness":  # listed on the session page, no case study of its own
                assert page.is_file() and page.name == "index.html", row["case"]
                assert row["anchor"] in page.read_text(encoding="utf-8"), row["case"]
                continue
            assert page.is_file() and page.name.startswith(f"{row['code']}-"), row["case"]
        html = (out / "index.html").read_text(encoding="utf-8")
        assert f'href="{incidents["case"][0]}"' in html


def test_overlapping_paths_scan_each_source_once(inputs, tmp_path):
    folder = inputs["folder"]
    once = run_batch([folder], tmp_path / "a", workers=1, progress=False)
    twice = run_batch([folder, folder / "ingest", folder], tmp_path / "b", workers=1,
                      progress=False)
    assert (twice.sources, twice.sessions, twice.incidents) == \
        (once.sources, once.sessions, once.incidents)


def test_a_worker_that_dies_costs_only_its_own_source(inputs, tmp_path, monkeypatch):
    """A source that kills its worker (out of memory, a native crash) is reported as failed; the
    sources that were in flight with it are retried and scanned."""
    import multiprocessing
    import os

    import forensics.batch as batch

    healthy = run_batch([inputs["folder"]], tmp_path / "ok", workers=1, progress=False)
    real = batch._process

    def deadly(unit, known):
        if unit.label.endswith("codex_basic.jsonl"):
            os._exit(9)
        return real(unit, known)

    # Forked workers inherit the patched function (spawned ones would re-import the module).
    monkeypatch.setattr(batch, "_pool_context", lambda: multiprocessing.get_context("fork"))
    monkeypatch.setattr(batch, "_process", deadly)
    summary = run_batch([inputs["folder"]], tmp_path / "out", workers=2, progress=False)
    died = [(where, why) for where, why in summary.errors if "worker" in why]
    assert len(died) == 1 and died[0][0].endswith("codex_basic.jsonl")
    assert summary.sessions == healthy.sessions - 1


class _FakePool:
    def __init__(self, method: str, launched: int, workers: int = 2) -> None:
        import multiprocessing

        self._mp_context = multiprocessing.get_context(method)
        self._processes = dict.fromkeys(range(launched))
        self._max_workers = workers


@pytest.mark.parametrize(("method", "launched", "imports"), [
    ("fork", 2, True),    # every worker forked: polars may load beside them
    ("fork", 1, False),   # a worker still to fork: no thread may run then
    ("spawn", 2, False),  # spawned workers do not inherit anything; nothing to overlap
])
def test_polars_is_imported_aside_only_once_every_worker_is_forked(monkeypatch, method, launched,
                                                                    imports):
    import importlib
    import sys
    import threading

    import forensics.batch as batch

    asked: list[str] = []
    done = threading.Event()

    def fake_import(name):
        asked.append(name)
        if len(asked) == len(batch.END_IMPORTS):
            done.set()

    monkeypatch.delitem(sys.modules, "polars")  # restored after the test
    monkeypatch.setattr(importlib, "import_module", fake_import)
    batch._import_aside(_FakePool(method, launched))
    done.wait(5 if imports else 0.2)
    assert asked == (["polars", "jinja2", "forensics.charts"] if imports else [])


def test_a_failed_import_aside_prints_no_traceback(monkeypatch):
    """A broken install fails where the batch imports the module itself, with its message,
    never as a thread's traceback in the middle of the run."""
    import importlib
    import sys
    import threading

    import forensics.batch as batch

    tried = threading.Event()
    hooked: list = []

    def broken(name):
        tried.set()
        raise ImportError(f"no {name}")

    monkeypatch.delitem(sys.modules, "polars")
    monkeypatch.setattr(importlib, "import_module", broken)
    monkeypatch.setattr(threading, "excepthook", hooked.append)
    batch._import_aside(_FakePool("fork", 2))
    assert tried.wait(5)
    for thread in threading.enumerate():
        if thread.name == "forensics-end-imports":
            thread.join(5)
    assert hooked == []


def test_polars_already_loaded_starts_no_thread(monkeypatch):
    import importlib

    import forensics.batch as batch

    monkeypatch.setattr(importlib, "import_module",
                        lambda name: pytest.fail(f"imported {name} again"))
    batch._import_aside(_FakePool("fork", 2))


def test_incidents_carry_their_rule_kind(batches):
    incidents = pl.read_parquet(batches["folder"][1] / "incidents.parquet")
    from forensics.rules import registry

    kinds = {c: s.kind for c, s in registry().items()}
    assert incidents.height > 0
    for row in incidents.select("code", "kind").to_dicts():
        assert row["kind"] == kinds[row["code"]]


def _harness_incidents() -> pl.DataFrame:
    from forensics.frame import INCIDENT_COLUMNS, frame

    base = {"severity": "low", "kind": "harness", "started": 1_700_000_000.0}
    rows = [
        {**base, "code": "FX101", "rule": "interrupted-turn", "agent": "codex", "model": "m1"},
        {**base, "code": "FX101", "rule": "interrupted-turn", "agent": "codex", "model": "m1"},
        {**base, "code": "FX102", "rule": "provider-error", "agent": "claude-code", "model": None,
         "started": 1_700_000_000.0 + 8 * 86400},
        {**base, "code": "FX103", "rule": "context-compaction", "agent": "codex", "model": "m2"},
        {**base, "code": "FX002", "rule": "duplicate-launch", "agent": "codex", "model": "m1",
         "kind": "rule", "severity": "high"},
    ]
    return frame(rows, INCIDENT_COLUMNS)


def test_harness_events_are_counted_per_agent_model_and_week():
    import forensics

    incidents = _harness_incidents()
    by_agent = {r["agent"]: r for r in forensics.harness_counts(incidents, "agent").to_dicts()}
    assert by_agent["codex"] == {"agent": "codex", "interrupted-turn": 2, "provider-error": 0,
                                 "context-compaction": 1, "total": 3}
    assert by_agent["claude-code"]["provider-error"] == 1 and by_agent["claude-code"]["total"] == 1
    by_model = {r["model"]: r["total"] for r in forensics.harness_counts(incidents, "model")
                .to_dicts()}
    assert by_model == {"m1": 2, "m2": 1, "unknown": 1}, "the rule finding is not counted"
    weeks = forensics.harness_counts(incidents, "week").to_dicts()
    assert [(w["week"], w["total"]) for w in weeks] == [("2023-11-13", 3), ("2023-11-20", 1)]
    with pytest.raises(ValueError, match="by must be one of agent, model, week"):
        forensics.harness_counts(incidents, "project")


@needs_shared
def test_corpus_index_counts_harness_events(corpus_batch):
    summary, out = corpus_batch
    incidents = pl.read_parquet(out / "incidents.parquet")
    md = (out / "index.md").read_text(encoding="utf-8")
    html = (out / "index.html").read_text(encoding="utf-8")
    for key in ("agent", "model", "week"):
        assert f"## Harness events per {key}" in md and f'id="harness-{key}"' in html
    harness = incidents.filter(pl.col("kind") == "harness")
    assert set(harness["code"]) == {"FX101", "FX102", "FX103"}
    per_agent = harness.group_by("agent").len().to_dicts()
    for row in per_agent:
        assert f"| {row['agent']} |" in md.split("## Harness events per agent", 1)[1]
        line = next(l for l in md.split("## Harness events per agent", 1)[1].splitlines()
                    if l.startswith(f"| {row['agent']} |"))
        assert line.rstrip(" |").endswith(str(row["len"]))


def test_notebook_report_exposes_harness_events():
    from forensics.engine import scan_session
    from forensics.notebook import ScanReport
    from rulecases import load_cases

    case = next(c for c in load_cases("FX102") if c.name == "two-outages-two-findings")
    report = ScanReport(results=[scan_session(case.session)])
    events = report.harness_events
    assert events["code"].to_list() == ["FX102", "FX102"]
    assert set(report.incidents.filter(pl.col("kind") == "rule")["code"]) <= {"FX004"}
    assert report.harness_counts("agent").to_dicts() == [
        {"agent": "claude-code", "interrupted-turn": 0, "provider-error": 2,
         "context-compaction": 0, "total": 2}]


def test_worst_sessions_count_the_assistants_mistakes_not_harness_events():
    """A session full of user interrupts is not a "worst" session; one failure the assistant
    ignored is."""
    from forensics.index import worst_sessions

    incidents = pl.DataFrame({
        "session_id": ["noisy"] * 5 + ["bad"],
        "origin": ["a.jsonl"] * 5 + ["b.jsonl"],
        "kind": ["harness"] * 5 + ["rule"],
        "severity": ["low"] * 5 + ["high"],
    })
    sessions = pl.DataFrame({
        "session_id": ["noisy", "bad", "clean"], "origin": ["a.jsonl", "b.jsonl", "c.jsonl"],
        "incidents": [5, 1, 0], "high": [0, 1, 0], "turns": [400, 20, 10]})
    worst = worst_sessions(incidents, sessions)
    assert worst["session_id"].to_list() == ["bad"]
    assert worst.row(0, named=True)["incidents"] == 1 and worst.row(0, named=True)["high"] == 1


def _summary_facts(summary) -> tuple:
    return (str(summary).replace(str(summary.out), "OUT"), summary.changes, summary.findings, summary.by_rule, summary.sessions,
            summary.incidents, summary.read_issues, summary.errors)


def test_rerun_with_nothing_changed_keeps_the_tables_and_writes_the_same_index(tmp_path):
    """A rerun in which no source changed leaves the tables as they are (no rewrite) and
    renders the index from the figures kept beside them: the same pages and summary as a
    rerun that reads the tables back (no kept figures, or figures of other tables)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(FIXTURES / "ingest" / "claude_basic.jsonl", logs / "s.jsonl")
    shutil.copy(FIXTURES / "seeds" / "seed_000_duplicate_launch.json", logs / "seed.json")
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    run_batch([logs], fast, workers=1, progress=False)
    shutil.copytree(fast, slow)
    tables = ("incidents.parquet", "sessions.parquet", "incidents.ndjson", "sessions.ndjson",
              "errors.ndjson")
    written = {name: (fast / name).stat().st_mtime_ns for name in tables}

    kept = run_batch([logs], fast, workers=1, progress=False)
    assert {name: (fast / name).stat().st_mtime_ns for name in tables} == written
    (slow / ".index-view.json").unlink()
    read_back = run_batch([logs], slow, workers=1, progress=False)
    assert kept.skipped == 2 and kept.changes and all(r["new"] == 0 for r in kept.changes)
    assert _summary_facts(kept) == _summary_facts(read_back)
    for name in ("index.md", "index.html", "state.json", *tables):
        assert (fast / name).read_bytes() == (slow / name).read_bytes(), name

    # Figures kept for other tables are not used: the tables are read back.
    view = orjson.loads((fast / ".index-view.json").read_bytes())
    view["view"]["$dict"] = [[k, [] if isinstance(v, list) else v]
                             for k, v in view["view"]["$dict"]]
    (fast / ".index-view.json").write_bytes(orjson.dumps({**view, "tables": "other"}))
    again = run_batch([logs], fast, workers=1, progress=False)
    assert _summary_facts(again) == _summary_facts(read_back)
    assert (fast / "index.md").read_bytes() == (slow / "index.md").read_bytes()

    # A source gone: its rows leave the tables, as in any rerun.
    (logs / "seed.json").unlink()
    gone = run_batch([logs], fast, workers=1, progress=False)
    assert gone.sessions == read_back.sessions - 1
    assert pl.read_ndjson(fast / "sessions.ndjson").height == gone.sessions


def test_index_rows_read_first_renders_what_jinja_would(batches, tmp_path, monkeypatch):
    """The index's environment reads a dict row's item before its attribute (a speed-up):
    the pages must be what Jinja's own lookup order renders."""
    import jinja2

    import forensics.index as index

    summary, out = batches["folder"]
    view = index.cached_view(out)
    assert view is not None and view["incidents"]
    ours, stock = tmp_path / "ours", tmp_path / "stock"
    ours.mkdir(), stock.mkdir()
    index.write_index(None, summary, ours, view=view)
    monkeypatch.setattr(index, "_environment_class", lambda: jinja2.Environment)
    index.write_index(None, summary, stock, view=view)
    for name in ("index.html", "index.md"):
        assert (ours / name).read_text() == (stock / name).read_text()
        assert (ours / name).read_text() == (out / name).read_text()
