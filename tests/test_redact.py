"""The one list of secret patterns (redaction/secrets.toml): every kind the reliability issue
names is hidden, look-alikes stay, users extend the list, and every output applies it."""

from __future__ import annotations

import importlib
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from forensics.cli import app
from forensics.errors import ConfigError
from forensics.redact import load_patterns, redact, secret_kinds

redact_module = importlib.import_module("forensics.redact")  # not report.redact()


@pytest.mark.parametrize("text,kind,secret", [
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws-secret-key",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe-key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("restricted rk_live_51H8abcdEFGHijklMNOP", "stripe-key", "rk_live_51H8abcdEFGHijklMNOP"),
    ("//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm-token",
     "npm_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("git clone https://oauth2:glpat-xxxxxxxxxxxxxxxxxxxx@gitlab.com/g/p", "gitlab-token",
     "glpat-xxxxxxxxxxxxxxxxxxxx"),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", "authorization",
     "dXNlcjpwYXNzd29yZA=="),
    ("Authorization: token 0123456789abcdef0123", "authorization", "0123456789abcdef0123"),
    ("SECRET=hunter2hunter2", "secret-assignment", "hunter2hunter2"),
    ("export X_TOKEN=abc123xyz", "secret-assignment", "abc123xyz"),
    ("DB_PASSWORD=correcthorse", "password", "correcthorse"),
    ("mysql://root:p@ss@db/app", "password", "p@ss"),
    ("TWINE_PASSWORD=pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0NTY3",
     "pypi-token", "AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0NTY3"),
    ("hook https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
     "slack-webhook", "XXXXXXXXXXXXXXXXXXXXXXXX"),
])
def test_every_kind_the_issue_names_is_hidden(text: str, kind: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out, out
    assert "[REDACTED:" in out
    assert kind in secret_kinds(text)


@pytest.mark.parametrize("text", [
    "MAX_TOKENS=4096 and NUM_TOKENS=12",
    "export TOKEN_FILE=$HOME/.token",
    "sk_live is the prefix Stripe uses",
    "npm_config_cache=/tmp/npm",
    "the Authorization header was missing",
    "mailto:someone@example.com and https://example.com/a@b",
])
def test_look_alikes_stay(text: str) -> None:
    assert redact(text) == text


def test_users_extend_the_list_from_their_config(tmp_path: Path, monkeypatch) -> None:
    extra = tmp_path / "mine.toml"
    extra.write_text('[[secret]]\nkind = "acme-key"\npattern = "ACME-[0-9]{6}"\n'
                     'hints = ["acme-"]\n', encoding="utf-8")
    (tmp_path / "forensics.toml").write_text('secret-patterns = ["mine.toml"]\n',
                                             encoding="utf-8")
    monkeypatch.setattr(redact_module, "_extra_files", ())
    redact_module.patterns.cache_clear()
    try:
        from forensics.config import load_config

        cfg = load_config(tmp_path / "forensics.toml")
        assert cfg.secret_patterns == [str(extra.resolve())]
        assert redact("key ACME-123456 here") == "key [REDACTED:acme-key] here"
    finally:
        redact_module._extra_files = ()
        redact_module.patterns.cache_clear()
    assert redact("key ACME-123456 here") == "key ACME-123456 here"


def test_a_bad_pattern_names_its_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[secret]]\nkind = "x"\npattern = "(unclosed"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="bad.toml.*bad pattern"):
        load_patterns(bad)


def _leaky_session(tmp_path: Path) -> Path:
    """A Claude Code transcript whose user message, reply and tool output hold secrets."""
    key = "sk-ant-api03-" + "a" * 40
    lines = [
        {"type": "user", "sessionId": "s1", "uuid": "u1", "timestamp": "2026-01-01T10:00:00Z",
         "cwd": "/p?token=" + key, "version": "2.0 AWS_SECRET_ACCESS_KEY=" + "W" * 40,
         "message": {"role": "user", "content": f"use {key} and <script>alert(1)</script>"}},
        {"type": "assistant", "sessionId": "s1", "uuid": "a1", "parentUuid": "u1",
         "timestamp": "2026-01-01T10:00:05Z",
         "message": {"role": "assistant", "model": "m", "content": []}},
        {"type": "user", "sessionId": "s1", "uuid": "u2", "parentUuid": "a1",
         "timestamp": "2026-01-01T10:01:00Z",
         "message": {"role": "user", "content": f"use {key} and <script>alert(1)</script>"}},
    ]
    src = tmp_path / "leak.jsonl"
    src.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    return src


@pytest.mark.parametrize("args", [
    ["scan"], ["scan", "--format", "json"], ["scan", "--format", "markdown"],
    ["scan", "--format", "html"], ["turns"], ["turns", "--format", "json"],
])
def test_every_output_redacts_unless_told_not_to(tmp_path: Path, args: list[str]) -> None:
    src = _leaky_session(tmp_path)
    runner = CliRunner()
    res = runner.invoke(app, [*args, str(src)])
    assert res.exit_code in (0, 1), res.output
    assert "sk-ant-api03-" not in res.output and "W" * 40 not in res.output
    assert "[REDACTED:" in res.output
    raw = runner.invoke(app, [*args, str(src), "--no-redact"])
    assert "sk-ant-api03-" + "a" * 40 in raw.output


def test_batch_tables_and_index_are_redacted(tmp_path: Path) -> None:
    src = _leaky_session(tmp_path)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["batch", str(src), "-o", str(out), "-j", "1",
                                   "--no-progress"])
    assert res.exit_code == 1, res.output
    written = [p for p in out.rglob("*") if p.is_file() and p.suffix in
               (".ndjson", ".md", ".html", ".parquet")]
    assert any(p.name == "incidents.parquet" for p in written)
    for p in written:
        data = p.read_bytes()
        assert b"sk-ant-api03-" not in data and b"W" * 40 not in data, p
    import polars as pl

    project = pl.read_parquet(out / "sessions.parquet")["project"][0]
    assert project == "/p?token=[REDACTED:api-key]" or "[REDACTED:" in project


def test_markdown_escapes_transcript_html(tmp_path: Path) -> None:
    src = _leaky_session(tmp_path)
    res = CliRunner().invoke(app, ["scan", "--format", "markdown", str(src)])
    outside_code = res.output.split("```")[::2]
    assert not any("<script>" in part for part in outside_code), res.output


def test_notebook_frames_are_raw_unless_asked(tmp_path: Path) -> None:
    import forensics

    src = _leaky_session(tmp_path)
    key = "sk-ant-api03-" + "a" * 40
    raw = forensics.scan(src)
    assert any(key in t for t in raw.turns["text"].to_list() if t)
    assert key in raw.sessions["project"][0]
    hidden = forensics.scan(src, redact=True)
    assert not any(key in t for t in hidden.turns["text"].to_list() if t)
    assert "[REDACTED:" in hidden.sessions["project"][0]
    assert hidden.incidents["fingerprint"].to_list() == raw.incidents["fingerprint"].to_list()
    assert not any(key in (m or "") for m in
                   forensics.read_incidents([src], redact=True)["message"].to_list())


def _hinted(text: str) -> list:
    """The definition the hint gate must keep: a pattern is searched when it has no hints or the
    lower-cased text holds one of them."""
    from forensics.redact import patterns

    low = text.lower()
    return [p for p in patterns() if not p.hints or any(h in low for h in p.hints)]


def _hint_texts():
    from hypothesis import strategies as st

    from forensics.redact import patterns

    hints = sorted({h for p in patterns() for h in p.hints})
    pieces = st.one_of(st.sampled_from(hints), st.sampled_from([h.upper() for h in hints]),
                       st.text(max_size=6))
    return st.lists(pieces, max_size=6).map("".join)


@pytest.mark.parametrize("text", ["sk-ant-abc", "SK-ANT-", "my password", "pwd=1 key token",
                                  "https://x", "İ sk-", "", "nothing here"])
def test_hint_gate_picks_the_patterns_a_substring_test_picks(text: str) -> None:
    from forensics.redact import _applicable, patterns

    assert _applicable(text, patterns()) == _hinted(text)


def test_hint_gate_holds_on_generated_texts() -> None:
    from hypothesis import given, settings

    from forensics.redact import _applicable, patterns

    @settings(max_examples=300, deadline=None)
    @given(_hint_texts())
    def check(text: str) -> None:
        assert _applicable(text, patterns()) == _hinted(text)

    check()
