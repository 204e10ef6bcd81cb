"""Every ``scan --format``: what each one carries and where it points (file and line)."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import orjson
import pytest
from typer.testing import CliRunner

from conftest import FIXTURES
from forensics import __version__
from forensics.cli import app

CLAUDE = FIXTURES / "ingest" / "claude_basic.jsonl"
CODEX = FIXTURES / "ingest" / "codex_basic.jsonl"
SEED_000 = FIXTURES / "seeds" / "seed_000_duplicate_launch.json"
SARIF_SCHEMA = FIXTURES / "sarif" / "sarif-schema-2.1.0.json"


def cli(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def line_of(path: Path, n: int) -> str:
    return path.read_text(encoding="utf-8").splitlines()[n - 1]


def test_jsonl_is_one_finding_per_line_at_the_anchor_line() -> None:
    out = cli("scan", CLAUDE, "-f", "jsonl")
    assert out.exit_code == 1
    rows = [orjson.loads(line) for line in out.stdout.splitlines()]
    assert [(r["code"], r["line"]) for r in rows] == [
        ("FX101", 20), ("FX001", 22), ("FX004", 23), ("FX102", 25), ("FX004", 26), ("FX103", 34)]
    for r in rows:  # the line really is the flagged record
        assert f'"uuid":"{r["anchor"]}"' in line_of(CLAUDE, r["line"])
        assert r["path"] == str(CLAUDE)


def test_json_and_jsonl_carry_each_findings_facts() -> None:
    rows = [orjson.loads(line) for line in cli("scan", CLAUDE, "-f", "jsonl").stdout.splitlines()]
    doc = orjson.loads(cli("scan", CLAUDE, "-f", "json").stdout)
    assert [r["facts"] for r in rows] == [f["facts"] for f in doc["findings"]]
    resend = next(r for r in rows if r["code"] == "FX004")
    assert [(f["kind"], f["role"], f["turn"]) for f in resend["facts"]] == [
        ("message", "earlier message", 13), ("reply", "empty reply", 14),
        ("message", "repeat", 15)]
    assert {f["anchor"] for f in resend["facts"][:2]} == set(resend["evidence"])
    assert resend["facts"][2]["anchor"] == resend["anchor"]
    assert resend["facts"][0]["quote"] == resend["facts"][2]["quote"] == (
        "why is the discount applied twice?")
    for r in rows:
        for f in r["facts"]:
            assert set(f) == {"kind", "role", "turn", "anchor", "quote", "command", "port",
                              "status"}


def test_codex_lines_are_the_anchor_lines() -> None:
    rows = [orjson.loads(l) for l in cli("scan", CODEX, "-f", "jsonl").stdout.splitlines()]
    assert [(r["anchor"], r["line"]) for r in rows] == [("L26", 26), ("L33", 33), ("L39", 39)]


def sarif_of(*args: str) -> dict:
    out = cli("scan", *args, "-f", "sarif")
    assert out.exit_code == 1
    return orjson.loads(out.stdout)


def test_sarif_is_valid_against_the_official_schema(tmp_path: Path) -> None:
    import zipfile

    schema = orjson.loads(SARIF_SCHEMA.read_bytes())
    validator = jsonschema.Draft4Validator(schema)
    archive = tmp_path / "logs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(CLAUDE, "a b/s.jsonl")
    clean = orjson.loads(cli("scan", CLAUDE, "--select", "FX002", "-f", "sarif").stdout)
    assert clean["runs"][0]["results"] == []
    for doc in (sarif_of(CLAUDE), sarif_of(SEED_000), sarif_of(CLAUDE, SEED_000, CODEX),
                sarif_of(archive), clean):
        errors = sorted(validator.iter_errors(doc), key=str)
        assert errors == []
        assert doc["version"] == "2.1.0"
    broken = sarif_of(CLAUDE)
    broken["runs"][0]["results"][0]["level"] = "fatal"  # the check can fail
    assert list(validator.iter_errors(broken))


def test_sarif_locations_physical_for_lines_logical_for_json() -> None:
    doc = sarif_of(CLAUDE, SEED_000)
    run = doc["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == [
        "FX001", "FX002", "FX003", "FX004", "FX008", "FX101", "FX102", "FX103"]
    by_rule = {}
    for res in run["results"]:
        assert run["tool"]["driver"]["rules"][res["ruleIndex"]]["id"] == res["ruleId"]
        by_rule.setdefault(res["ruleId"], []).append(res)
    first = by_rule["FX004"][0]["locations"][0]
    assert first["physicalLocation"]["region"] == {"startLine": 23}
    assert first["physicalLocation"]["artifactLocation"]["uri"].endswith(
        "tests/fixtures/ingest/claude_basic.jsonl")
    assert first["logicalLocations"][0]["fullyQualifiedName"] == (
        "5d2e8f41-7c3a-4b9e-a1d6-3f8c2e9b7a10/0a1b2c3d-0000-4000-8000-000000000020")
    (relaunch,) = by_rule["FX002"]  # an opencode export: a JSON document, no lines
    loc = relaunch["locations"][0]
    assert "region" not in loc["physicalLocation"]
    assert loc["logicalLocations"][0]["fullyQualifiedName"] == (
        "ses_333486f13ffeFEHPjlCibDfuOg/msg_ccd055476001EThMd3R3q7S5oV")
    assert relaunch["level"] == "error"
    json_doc = orjson.loads(cli("scan", CLAUDE, SEED_000, "-f", "json").stdout)
    assert sorted(r["partialFingerprints"]["forensics/v1"] for r in run["results"]) == sorted(
        f["fingerprint"] for f in json_doc["findings"])


def test_github_annotations() -> None:
    out = cli("scan", CLAUDE, "-f", "github")
    lines = out.stdout.splitlines()
    assert len(lines) == 6
    assert [l.split(" ", 1)[0] for l in lines] == [
        "::notice", "::error", "::error", "::notice", "::error", "::notice"]  # harness: low
    assert lines[2] == (
        f"::error file={CLAUDE},line=23,title=FX004 user-resend::The user re-sent turn 13 "
        'verbatim ("why is the discount applied twice?") after an empty reply. (session '
        "5d2e8f41-7c3a-4b9e-a1d6-3f8c2e9b7a10, 0a1b2c3d-0000-4000-8000-000000000020)")
    seed = cli("scan", SEED_000, "-f", "github").stdout.splitlines()
    assert all(",line=" not in l for l in seed)  # a JSON export has no lines to point at


def test_markdown_and_html_are_case_studies() -> None:
    md = cli("scan", CLAUDE, "-f", "markdown").stdout
    assert "0a1b2c3d-0000-4000-8000-000000000020" in md and "FX004" in md
    html = cli("scan", CLAUDE, "-f", "html").stdout
    assert html.lstrip().lower().startswith("<!doctype html") and "FX004" in html


def test_statistics_count_per_rule() -> None:
    out = cli("scan", CLAUDE, CODEX, "--statistics")
    assert out.stdout.splitlines()[:3] == ["3\tFX001\tempty-response", "2\tFX004\tuser-resend",
                                           "2\tFX101\tinterrupted-turn"]
    assert out.exit_code == 1
    as_json = orjson.loads(cli("scan", CLAUDE, CODEX, "--statistics", "-f", "json").stdout)
    assert as_json == [{"code": "FX001", "rule": "empty-response", "count": 3},
                       {"code": "FX004", "rule": "user-resend", "count": 2},
                       {"code": "FX101", "rule": "interrupted-turn", "count": 2},
                       {"code": "FX102", "rule": "provider-error", "count": 1},
                       {"code": "FX103", "rule": "context-compaction", "count": 1}]


def test_exit_zero_only_forgives_findings(tmp_path: Path) -> None:
    assert cli("scan", CLAUDE, "--exit-zero").exit_code == 0
    assert cli("scan", tmp_path / "missing.jsonl", "--exit-zero").exit_code == 2


def test_version() -> None:
    out = cli("--version")
    assert out.exit_code == 0 and out.stdout == f"forensics {__version__}\n"


def test_help_is_plain_and_completion_is_on() -> None:
    # a fixed width: help text wraps to the terminal, which an earlier test may have narrowed
    wide = {"COLUMNS": "200"}
    top = cli("--help", env=wide).stdout
    assert "--install-completion" in top and "--show-completion" in top
    # the script --show-completion prints, asked for by shell name: --show-completion itself
    # detects the shell from the parent processes, and there is none when pytest runs detached
    # (reparented to init: "Shell  not supported", this test's rare failure)
    shown = CliRunner().invoke(app, [], env={"_FORENSICS_COMPLETE": "source_bash"},
                               prog_name="forensics")
    script = shown.stdout.strip()
    assert shown.exit_code == 0, shown.output
    assert script.startswith("_forensics_completion()") and "_FORENSICS_COMPLETE" in script
    for command in ("scan", "report", "turns", "batch", "baseline"):
        text = cli(command, "--help", env={"COLUMNS": "200"}).stdout
        assert "<list[" not in text and "{paths}" not in text, command
        assert "[PATH]..." in text
    assert cli("hook", "--help", env=wide).stdout.startswith(
        "Usage: forensics hook [OPTIONS] AGENT [PAYLOAD]\n")
    assert cli("rules", "--help", env=wide).stdout.startswith(
        "Usage: forensics rules [OPTIONS] [RULE]\n")
    words = " ".join(cli("scan", "--help", env=wide).stdout.split())
    assert "pyproject.toml with [tool.forensics]" in words


def test_colour_only_when_asked(tmp_path: Path) -> None:
    plain = cli("scan", CLAUDE).stdout
    assert "\x1b[" not in plain
    assert plain.startswith(f"{CLAUDE}:20: FX101 interrupted-turn (low) The user interrupted")
    assert plain.splitlines()[-1] == (
        "Found 6 incidents in 1 session (FX004 user-resend: 2, FX001 empty-response: 1, "
        "FX101 interrupted-turn: 1, FX102 provider-error: 1, FX103 context-compaction: 1).")
    coloured = cli("scan", CLAUDE, env={"FORCE_COLOR": "1"}).stdout
    assert "\x1b[" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
    assert "\x1b[" not in cli("scan", CLAUDE, env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout


def test_read_issues_go_to_stderr_not_between_findings() -> None:
    out = cli("scan", CLAUDE)
    assert "hologram-sync" in out.stderr and "hologram-sync" not in out.stdout


def test_quoted_transcript_text_is_redacted(tmp_path: Path) -> None:
    secret = "sk-ant-api03-" + "A1b2C3d4" * 4
    text = CLAUDE.read_text(encoding="utf-8").replace("why is the discount applied twice?",
                                                      f"why? token {secret}")
    session = tmp_path / "s.jsonl"
    session.write_text(text, encoding="utf-8")
    for fmt in ("text", "json", "jsonl", "sarif", "github"):
        out = cli("scan", session, "-f", fmt).stdout
        assert secret not in out and "[REDACTED:anthropic-key]" in out, fmt
    assert secret in cli("scan", session, "-f", "jsonl", "--no-redact").stdout


@pytest.mark.parametrize("fmt", ["text", "json", "jsonl", "sarif", "github"])
def test_output_file(tmp_path: Path, fmt: str) -> None:
    target = tmp_path / f"out.{fmt}"
    out = cli("scan", CLAUDE, "-f", fmt, "-o", target)
    assert out.exit_code == 1 and out.stdout == ""
    assert "0a1b2c3d-0000-4000-8000-000000000020" in target.read_text(encoding="utf-8")
    assert "\x1b[" not in target.read_text(encoding="utf-8")


def test_exit_zero_turns_findings_into_zero_never_an_error() -> None:
    from forensics.cli import exit_code

    found = [("FX001", "high")]
    assert exit_code([]) == 0
    assert exit_code(found) == 1
    assert exit_code(found, exit_zero=True) == 0
    assert exit_code(found, problems=1, strict=True, exit_zero=True) == 2
    assert exit_code(found, read_any=False, exit_zero=True) == 2
    assert exit_code([], problems=1) == 0
