"""Case-study reports: Markdown snapshots per incident, determinism, escaping and redaction.

Snapshots live in tests/fixtures/report_snapshots/, one file per incident of the sessions in
tests/fixtures/report_cases.toml (case DSL, see rulecases.py). After a deliberate change to the
report, a rule's message or a rule file's prose, regenerate and review the diff:

    FORENSICS_REGEN_SNAPSHOTS=1 pytest tests/test_report.py
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES
from forensics import report
from forensics.cli import app
from forensics.engine import ScanResult, scan_session
from forensics.model import AssistantTurn, ToolCall, ToolResultTurn, UserTurn, Session
from forensics.redact import redact, secret_kinds
from forensics.report._shell import (
    program,
    strip_env,
    telling_lines,
)
from forensics.rules import registry
from rulecases import build_case

CASES_FILE = FIXTURES / "report_cases.toml"
SNAPSHOTS = FIXTURES / "report_snapshots"
REGEN = os.environ.get("FORENSICS_REGEN_SNAPSHOTS") == "1"


def _results() -> dict[str, ScanResult]:
    data = tomllib.loads(CASES_FILE.read_text(encoding="utf-8"))
    out = {}
    for raw in data["case"]:
        case = build_case("REPORT", raw, source=f"report_cases.toml#{raw['name']}")
        out[raw["name"]] = scan_session(case.session)
    return out


RESULTS = _results()
INCIDENTS = [(name, inc) for name, r in RESULTS.items() for inc in r.incidents]


def _snapshot_name(case: str, inc) -> str:
    return f"{case}__{inc.code}-{inc.turn}.md"


@pytest.mark.parametrize(("case", "incident"), INCIDENTS,
                         ids=[f"{c}-{i.code}-{i.turn}" for c, i in INCIDENTS])
def test_markdown_snapshot(case, incident) -> None:
    text = report.render_incident(RESULTS[case], incident, fmt="markdown")
    path = SNAPSHOTS / _snapshot_name(case, incident)
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no snapshot {path.name}; run FORENSICS_REGEN_SNAPSHOTS=1 and review it"
    assert text == path.read_text(encoding="utf-8"), (
        f"{path.name} differs; if the change is intended, regenerate with "
        "FORENSICS_REGEN_SNAPSHOTS=1 pytest tests/test_report.py and review the diff")


def test_no_stale_snapshots() -> None:
    expected = {_snapshot_name(c, i) for c, i in INCIDENTS}
    present = {p.name for p in SNAPSHOTS.glob("*.md")}
    if REGEN:
        for name in present - expected:
            (SNAPSHOTS / name).unlink()
        present &= expected
    assert present == expected


def test_every_rule_has_several_snapshot_incidents() -> None:
    per_rule: dict[str, int] = {}
    for _, inc in INCIDENTS:
        per_rule[inc.code] = per_rule.get(inc.code, 0) + 1
    for code in registry():
        assert per_rule.get(code, 0) >= 2, f"{code}: add report cases that it flags"


def test_seed_like_stories_name_the_facts() -> None:
    """The seed-000 shape: the report tells the message, the kill, the user's correction."""
    result = RESULTS["relaunch-after-ready"]
    empty = next(i for i in result.incidents if i.rule == "empty-response")
    cs = report.case_study(result, empty)
    assert cs.incident.turn == 14 and cs.flagged_quote is None
    assert [s.ordinal for s in cs.timeline if s.flagged] == [14]
    labels = {s.ordinal: s.label for s in cs.timeline}
    assert labels[13] == "failed call" and labels[11] == "user" and labels[9] == "launch"
    assert max(labels) == 18  # the chain stops at the recovery: no padding after it
    text = report.render_incident(result, empty)
    assert "is empty: no text and no tool call" in text
    assert "“No the first launch already worked, it's still ready.”" in text
    assert "71.6 tok/s" in text  # the last figure the assistant reported
    assert "`30000 (default of sglang)`" in text
    # Sections with nothing to say are left out.
    resend = RESULTS["empty-then-verbatim-resend"]
    inc = next(i for i in resend.incidents if i.rule == "user-resend")
    md = report.render_incident(resend, inc)
    assert "## What you need to know" not in md  # no commands were involved
    assert "word for word" in md and "reasoning only" in md
    assert "14.8 Ktok/s" in md


def test_render_is_deterministic() -> None:
    for result in RESULTS.values():
        for fmt in ("markdown", "html"):
            assert report.render_session(result, fmt=fmt) == report.render_session(result, fmt=fmt)


def _hostile_session() -> ScanResult:
    key = "sk-ant-api03-" + "Zx9" * 12
    turns = [
        UserTurn(ordinal=1, anchor="msg_u1", text=f"deploy with <script>alert('pwn')</script> "
                 f"and ANTHROPIC key {key}"),
        AssistantTurn(ordinal=2, anchor="msg_a2", tool_calls=[ToolCall(
            call_id="c1", name="bash", anchor="msg_a2",
            command=f"curl -H 'Authorization: Bearer {key}' https://admin:hunter2@example.com/<b>",
            input={})]),
        ToolResultTurn(ordinal=3, anchor="msg_a2", call_id="c1", name="bash",
                       output="<img src=x onerror=alert(1)> failed", exit_code=1),
        AssistantTurn(ordinal=4, anchor="msg_a4", text=""),
        UserTurn(ordinal=5, anchor="msg_u5", text=f"deploy with <script>alert('pwn')</script> "
                 f"and ANTHROPIC key {key}"),
    ]
    session = Session(id="ses_hostile", agent="opencode", format="case", source="hostile.json",
                      turns=turns)
    result = scan_session(session)
    assert result.incidents, "the hostile session must produce incidents to render"
    return result, key


def test_html_escapes_and_redacts() -> None:
    result, key = _hostile_session()
    html = report.render_session(result, fmt="html")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x" in html
    assert key not in html and "hunter2" not in html
    assert "[REDACTED:anthropic-key]" in html and "[REDACTED:password]" in html
    for inc in result.incidents:
        one = report.render_incident(result, inc, fmt="html")
        assert "<script>" not in one and key not in one
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")  # nothing to fetch
    assert "<link" not in html and "src=" not in html.replace("&lt;img src=x", "")


def test_markdown_redacts_and_neutralises_html() -> None:
    result, key = _hostile_session()
    md = report.render_session(result, fmt="markdown")
    assert key not in md and "hunter2" not in md
    assert "[REDACTED:anthropic-key]" in md
    # Outside code blocks, transcript HTML is backslash-escaped so viewers show it as text.
    outside = md.split("```")[::2]
    assert not any("<script>" in part for part in outside)


def test_no_redact_keeps_the_text() -> None:
    result, key = _hostile_session()
    md = report.render_session(result, fmt="markdown", redact=False)
    html = report.render_session(result, fmt="html", redact=False)
    assert key in md and key in html
    assert "<script>" not in html  # escaping stays on: it is not optional


@pytest.mark.parametrize("text,kind", [
    ("export ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345", "anthropic-key"),
    ("OPENAI_API_KEY=sk-proj-abc123def456ghi789jkl012mno", "openai-key"),
    ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789AB", "github-token"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv", "github-token"),
    ("SLACK=xoxb-123456789012-abcdefghijkl", "slack-token"),
    ("aws AKIAIOSFODNN7EXAMPLE", "aws-access-key"),
    ("key=AIzaSyA-1234567890abcdefghijklmnopqrstu", "google-api-key"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "jwt"),
    ("Authorization: Bearer abcdef0123456789abcdef", "bearer-token"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "private-key"),
    ("postgres://admin:s3cretpass@db:5432/app", "password"),
    ("mysql --password=hunter22 -u root", "password"),
    ("curl 'https://x/api?api_key=abcdef123456'", "api-key"),
])
def test_redact_positives(text: str, kind: str) -> None:
    out = redact(text)
    assert f"[REDACTED:{kind}]" in out, out
    assert kind in secret_kinds(text)


@pytest.mark.parametrize("text", [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "request 123e4567-e89b-12d3-a456-426614174000",
    "msg_01HXQ4Z8K9J3M2N1P0R7S6T5V4 and prt_9ab3c1d2e3f4",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
    "the task-runner-with-a-long-kebab-name-2024 ran",
    "max_tokens=2048, tokens: 100, tokenizer=fast",
    "password: $DB_PASSWORD and api_key=${API_KEY}",
    "https://github.com/org/repo/pull/12 and git@github.com:org/repo.git",
    "risk-assessment-2024-v2-final-draft-approved",
])
def test_redact_negatives(text: str) -> None:
    assert redact(text) == text


def test_shell_knowledge() -> None:
    assert program("export CUDA_HOME=/usr/local/cuda && nohup /root/env/bin/python3 -m "
                   "sglang.launch_server --tp 8 &") == "sglang.launch_server"
    assert program("cd web && npm run dev") == "npm run dev"
    assert telling_lines("ok\nstarting\n/bin/bash: line 15: 54525 Killed  nohup x", 1) == [
        "/bin/bash: line 15: 54525 Killed nohup x"]
    assert program('$exe = "C:\\Apps\\Godot.exe"; Start-Process -FilePath $exe') == "Godot.exe"
    assert strip_env('export A=1 && cd web && npm run dev') == "npm run dev"
    assert telling_lines("real output\n<system-reminder>not the tool's words</system-reminder>",
                         1) == ["real output"]


def test_report_command_writes_files(tmp_path: Path) -> None:
    session_file = tmp_path / "hostile.json"
    result, key = _hostile_session()
    out = tmp_path / "out"
    written = report.write_reports([result, RESULTS["dev-server-twice"]], out)
    names = sorted(str(p.relative_to(out)) for p in written)
    assert "index.html" in names and "index.md" in names
    assert "ses_hostile/index.html" in names and "ses_hostile/timeline.svg" in names
    per_incident = [n for n in names if n.startswith("ses_hostile/FX")]
    assert len(per_incident) == 2 * len(result.incidents)
    for inc in result.incidents:
        assert f"ses_hostile/{inc.code}-{inc.anchor}.md" in names
    assert all(key not in p.read_text(encoding="utf-8") for p in written)
    del session_file


def test_report_cli_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["report", str(tmp_path / "missing.json"), "-o", str(tmp_path)])
    assert res.exit_code == 2
    clean = tmp_path / "clean.jsonl"
    clean.write_text("not a transcript\n", encoding="utf-8")
    res = runner.invoke(app, ["report", str(clean), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2
    taken = tmp_path / "a-file"
    taken.write_text("x", encoding="utf-8")
    noisy = FIXTURES / "ingest" / "opencode_export_v1.json"
    res = runner.invoke(app, ["report", str(noisy), "-o", str(taken)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert str(taken) in res.output


def test_report_cli_on_transcripts(tmp_path: Path) -> None:
    """Exit 1 and files for a transcript with incidents; exit 0 (index only) for a clean one."""
    runner = CliRunner()
    noisy = FIXTURES / "ingest" / "opencode_export_v1.json"
    res = runner.invoke(app, ["report", str(noisy), "-o", str(tmp_path / "a")])
    assert res.exit_code == 1, res.output
    folders = [p for p in (tmp_path / "a").iterdir() if p.is_dir()]
    assert len(folders) == 1 and (folders[0] / "index.html").is_file()
    assert any(p.name.startswith("FX") and p.suffix == ".md" for p in folders[0].iterdir())
    assert f"{folders[0]}/index.html" in res.output
    clean = tmp_path / "clean.jsonl"  # a question and its answer: nothing for any rule
    clean.write_text(CLEAN_CLAUDE_SESSION, encoding="utf-8")
    res = runner.invoke(app, ["report", str(clean), "-o", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    (folder,) = [p for p in (tmp_path / "b").iterdir() if p.is_dir()]
    assert sorted(p.name for p in folder.iterdir()) == ["index.html", "index.md", "timeline.svg"]
    res = runner.invoke(app, ["report", str(noisy), "-o", str(tmp_path / "c"), "--select",
                              "FX004", "--ignore", "FX004"])
    assert res.exit_code == 0


CLEAN_CLAUDE_SESSION = "\n".join([
    '{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s-clean","timestamp":'
    '"2026-01-01T00:00:00.000Z","cwd":"/tmp/p","version":"2.1.0","message":{"role":"user",'
    '"content":"What does this repo do?"}}',
    '{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s-clean","timestamp":'
    '"2026-01-01T00:00:02.000Z","cwd":"/tmp/p","version":"2.1.0","message":{"id":"msg_1",'
    '"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text",'
    '"text":"It parses agent transcripts."}],"stop_reason":"end_turn"}}',
]) + "\n"


def test_scan_markdown_and_html(tmp_path: Path) -> None:
    runner = CliRunner()
    noisy = FIXTURES / "ingest" / "opencode_export_v1.json"
    md = runner.invoke(app, ["scan", str(noisy), "--format", "markdown"])
    assert md.exit_code == 1 and md.output.startswith("# Session ")
    out = tmp_path / "r.html"
    clean = tmp_path / "clean.jsonl"
    clean.write_text(CLEAN_CLAUDE_SESSION, encoding="utf-8")
    html = runner.invoke(app, ["scan", str(noisy), str(clean), "--format", "html", "-o", str(out)])
    assert html.exit_code == 1
    page = out.read_text(encoding="utf-8")
    assert page.count("<html") == 1 and page.count('<section class="session">') == 2


# -- the checked-in examples: reports of the two seed fixtures --------------------------------

REPO = FIXTURES.parents[1]
EXAMPLES = REPO / "docs" / "examples"
SEEDS = ("seed_000_duplicate_launch", "seed_001_empty_resend")
CORPUS_LIKE = {"example_commit_timeout": "json", "example_dev_server": "jsonl"}
"""Real-corpus-like examples, written from scratch by tests/fixtures/examples/make_examples.py."""


def _seed_reports(name: str, out: Path) -> list[Path]:
    from forensics.engine import scan_sessions
    from forensics.ingest import load

    rel = Path("tests") / "fixtures" / "seeds" / f"{name}.json"
    if name in CORPUS_LIKE:
        rel = Path("tests") / "fixtures" / "examples" / f"{name}.{CORPUS_LIKE[name]}"
    if not (REPO / rel).is_file():
        pytest.skip(f"{rel} is not in this checkout")
    cwd = os.getcwd()
    os.chdir(REPO)  # the reports name their source relative to the repository, as in the docs
    try:
        results = scan_sessions(load(rel))
    finally:
        os.chdir(cwd)
    return report.write_reports(results, out)


@pytest.mark.parametrize("name", SEEDS + tuple(CORPUS_LIKE))
def test_examples_are_current(name: str, tmp_path: Path) -> None:
    """docs/examples/<seed>/ is exactly what ``forensics report`` writes for the seed fixture."""
    written = _seed_reports(name, tmp_path)
    target = EXAMPLES / name
    for path in written:
        rel = path.relative_to(tmp_path)
        if REGEN:
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            (target / rel).write_bytes(path.read_bytes())
        assert (target / rel).is_file(), f"{rel} missing; run FORENSICS_REGEN_SNAPSHOTS=1"
        assert (target / rel).read_bytes() == path.read_bytes(), (
            f"docs/examples/{name}/{rel} is stale; regenerate with FORENSICS_REGEN_SNAPSHOTS=1 "
            "pytest tests/test_report.py and read the diff")
    expected = {p.relative_to(tmp_path) for p in written}
    present = {p.relative_to(target) for p in target.rglob("*") if p.is_file()}
    assert present == expected


def test_seed_000_example_tells_the_story(tmp_path: Path) -> None:
    """A reader of the report alone learns what happened, where, why it was wrong, and what
    the user did (the arc of shared/seeds/000)."""
    written = _seed_reports("seed_000_duplicate_launch", tmp_path)
    index = next(p for p in written if p.name == "index.md").read_text(encoding="utf-8")
    for fact in [
        "## A second sglang.launch_server launched at turn 40 while the first was still running",
        "message 25 of the transcript",  # where
        "the assistant sent the launch of `sglang.launch_server` from **turn 36** again, unchanged",
        "It was launch number 4 of `sglang.launch_server` in the session",
        # the earlier launches ended before the relaunch, as the process ledger reads them
        "(ended: its output showed it crashed); **turn 28** (ended: its output showed it crashed)",
        "at **turn 39**, the transcript shows the first one was up (user said it was up): "
        "“Ready.”",
        "Killed",  # the relaunch died at once
        "port `30000` (default of sglang)",
        "The assistant's reply at **turn 42** is empty: no text and no tool call",  # message 42
        "at **turn 43**: “No the first launch already worked, it's still ready.”",  # correction
        "“HTTP 200”",  # the health check that confirmed the user
        "“Note be aggressive - we want minimal pcie roundtrips.”",  # standing instruction
        "71.6 tok/s",  # the last figure
    ]:
        assert fact in index, fact


def test_seed_001_example_tells_the_story(tmp_path: Path) -> None:
    written = _seed_reports("seed_001_empty_resend", tmp_path)
    index = next(p for p in written if p.name == "index.md").read_text(encoding="utf-8")
    for fact in [
        "holds 415 characters of reasoning the user never saw",
        "the user sent the same message again, word for word",
        "ending with “If a B200 machine is 3.4× more cost per GPU would the train be "
        "faster/cheaper with e.g. 4× B200 GPUs?”",
        "14.8 Ktok/s",
        "8.8 days",
        "replied “Short answer: yes, both.",
    ]:
        assert fact in index, fact


# -- the figure, odd inputs, properties -------------------------------------------------------

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from forensics.findings import Incident  # noqa: E402
from forensics.report.svg import timeline_svg  # noqa: E402


def _incident(session: Session, turn: int, anchor: str, severity: str = "high") -> Incident:
    return Incident(rule="empty-response", code="FX001", title="Assistant replied with nothing",
                    severity=severity, severity_reason="test", session_id=session.id,
                    source=session.source, agent=session.agent, turn=turn, anchor=anchor,
                    evidence=[], evidence_turns=[], message="An <b>empty</b> reply.",
                    fingerprint="f" * 16)


def test_svg_marks_titles_and_escaping() -> None:
    turns = [UserTurn(ordinal=1, anchor='u"<1>', text="hi"),
             AssistantTurn(ordinal=2, anchor="a&2", text=""),
             UserTurn(ordinal=3, anchor="u3", text="hello?")]
    session = Session(id="s", agent="opencode", format="case", source="s.json", turns=turns)
    svg = timeline_svg(session, [_incident(session, 2, "a&2")])
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "<title>FX001 empty-response (high) · turn 2 · a&amp;2</title>" in svg
    assert "turn 1 · u&quot;&lt;1&gt; · user" in svg and '"<1>' not in svg
    assert svg.count('class="incident-mark"') == 1
    assert "turn 1" in svg and "turn 3" in svg  # no times: the axis is the turn number


def test_svg_bounded_for_long_sessions() -> None:
    turns = [UserTurn(ordinal=i, anchor=f"m{i}", text="x", time=1000.0 + i)
             for i in range(1, 20001)]
    session = Session(id="s", agent="opencode", format="case", source="s.json", turns=turns)
    svg = timeline_svg(session, [])
    assert svg.count("<rect") <= 1000  # one mark per pixel column and kind


def test_odd_incidents_still_render() -> None:
    empty = Session(id="empty", agent="codex", format="case", source="e.jsonl", turns=[])
    result = ScanResult(session=empty)
    assert "No incidents" in report.render_session(result, fmt="markdown")
    assert "<svg" in report.render_session(result, fmt="html")
    turns = [UserTurn(ordinal=1, anchor="u1", text="hi")]
    session = Session(id="s", agent="opencode", format="case", source="s.json", turns=turns)
    stray = ScanResult(session=session, incidents=[_incident(session, 9, "nowhere")])
    md = report.render_session(stray, fmt="markdown")
    assert "cannot be placed" in md and "\\<b\\>empty\\</b\\>" in md


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_any_user_text_is_escaped(text: str) -> None:
    turns = [UserTurn(ordinal=1, anchor="u1", text=text + "<script>x</script>"),
             AssistantTurn(ordinal=2, anchor="a2", text=""),
             UserTurn(ordinal=3, anchor="u3", text="again")]
    session = Session(id="s", agent="opencode", format="case", source="s.json", turns=turns)
    result = ScanResult(session=session, incidents=[_incident(session, 2, "a2")])
    html = report.render_session(result, fmt="html")
    assert "<script>" not in html
    md = report.render_incident(result, result.incidents[0])
    assert "<script>" not in md.split("```")[0]


@given(st.text(max_size=200))
def test_redact_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


def test_write_reports_order_is_a_contract(tmp_path: Path) -> None:
    """forensics.cases links batch incidents to pages by this order: keep it."""
    result = RESULTS["relaunch-after-ready"]
    written = report.write_reports([result], tmp_path)
    names = [p.name for p in written]
    assert names[:3] == ["timeline.svg", "index.md", "index.html"]
    per_incident = names[3:]
    assert len(per_incident) == 2 * len(result.incidents)
    for i, inc in enumerate(result.incidents):
        assert per_incident[2 * i] == f"{inc.code}-{inc.anchor}.md"
        assert per_incident[2 * i + 1] == f"{inc.code}-{inc.anchor}.html"


def test_cli_redacts_unless_told_not_to(tmp_path: Path) -> None:
    """A secret typed into a real transcript is hidden by `report` and `scan --format html`,
    and kept with --no-redact."""
    import json

    key = "sk-ant-api03-" + "Qw7" * 12
    doc = json.loads((FIXTURES / "ingest" / "opencode_export_v1.json").read_text("utf-8"))
    user = next(m for m in doc["messages"] if m["info"]["role"] == "user")
    part = next(p for p in user["parts"] if p.get("type") == "text" and not p.get("synthetic"))
    part["text"] += f" my key is {key}"
    src = tmp_path / "with-secret.json"
    src.write_text(json.dumps(doc), encoding="utf-8")
    runner = CliRunner()
    res = runner.invoke(app, ["report", str(src), "-o", str(tmp_path / "red")])
    assert res.exit_code == 1, res.output
    pages = [p.read_text("utf-8") for p in (tmp_path / "red").rglob("*") if p.is_file()]
    assert pages and not any(key in page for page in pages)
    assert any("[REDACTED:anthropic-key]" in page for page in pages)
    res = runner.invoke(app, ["report", str(src), "-o", str(tmp_path / "raw"), "--no-redact"])
    assert res.exit_code == 1
    assert any(key in p.read_text("utf-8") for p in (tmp_path / "raw").rglob("*.md"))
    html = runner.invoke(app, ["scan", str(src), "--format", "html"])
    assert html.exit_code == 1 and key not in html.output
