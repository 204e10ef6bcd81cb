"""The report's per-session memos (``forensics.report._memo``) answer as the functions they
remember: the redaction memo follows the patterns in use, and every memo empties."""

from __future__ import annotations

from pathlib import Path

import forensics.redact as redact_module
from forensics.report import _memo
from forensics.report._shell import telling_lines
from forensics.report.narrative import figures_in
from forensics.report.render import redacted
from forensics.analysis.outcome import telling_lines as analysis_telling_lines


def test_redaction_memo_follows_the_patterns(tmp_path: Path, monkeypatch) -> None:
    extra = tmp_path / "mine.toml"
    extra.write_text('[[secret]]\nkind = "acme-key"\npattern = "ACME-[0-9]{6}"\n'
                     'hints = ["acme-"]\n', encoding="utf-8")
    text = "key ACME-123456 here"
    assert redacted(text) == text  # remembered under the built-in patterns
    monkeypatch.setattr(redact_module, "_extra_files", ())
    try:
        redact_module.use_extra_files([extra])
        assert redacted(text) == "key [REDACTED:acme-key] here"
    finally:
        redact_module._extra_files = ()
        redact_module.patterns.cache_clear()
    assert redacted(text) == text
    assert redacted("token sk-ant-api03-" + "a" * 40) == redact_module.redact(
        "token sk-ant-api03-" + "a" * 40) != "token sk-ant-api03-" + "a" * 40


def test_memos_answer_as_the_functions_and_hand_out_fresh_lists() -> None:
    output = "step 1\nError: port 8000 already in use\nTraceback (most recent call last)\ndone ok"
    first = telling_lines(output, 1)
    assert first == analysis_telling_lines(output, 1)
    first.append("changed by a caller")
    assert telling_lines(output, 1) == analysis_telling_lines(output, 1)
    text = "The run took 12.5 seconds. Nothing else. Accuracy reached 93 % on 1,200 samples."
    figures = figures_in(text)
    figures.clear()
    assert figures_in(text) == figures_in(text, 3) != []


def test_forget_all_empties_every_memo() -> None:
    redacted("some words to remember")
    telling_lines("a line of output\nanother line here", 2)
    assert any(memo._found for memo in _memo._MEMOS)
    _memo.forget_all()
    assert not any(memo._found for memo in _memo._MEMOS)


def test_a_memo_past_its_limit_starts_over() -> None:
    calls: list[str] = []
    memo = _memo.TextMemo(lambda text: calls.append(text) or text.upper(), limit=10)
    assert memo("abcdefghijkl") == "ABCDEFGHIJKL"
    assert memo("abcdefghijkl") == "ABCDEFGHIJKL"
    assert calls == ["abcdefghijkl"]
    memo("xy")  # past the limit: emptied before this one is kept
    assert memo("abcdefghijkl") == "ABCDEFGHIJKL" and calls == ["abcdefghijkl", "xy",
                                                               "abcdefghijkl"]


def test_a_part_is_kept_for_its_own_object_and_key_only() -> None:
    """``once`` (a case study's section, rendered once for both pages) answers from the memo only
    for the same object and key; another object, even one equal to it, is rendered itself."""
    parts = _memo.PartMemo()
    made = []

    def make(text):
        return lambda: made.append(text) or text

    first, other = ["case"], ["case"]  # equal, not the same
    assert parts(first, ("stakes", "", True), make("a")) == "a"
    assert parts(first, ("stakes", "", True), make("b")) == "a"  # the same section again
    assert parts(first, ("stakes", "", False), make("c")) == "c"  # not redacting: its own
    assert parts(other, ("stakes", "", True), make("d")) == "d"
    _memo.forget_all()
    assert parts(first, ("stakes", "", True), make("e")) == "e"
    assert made == ["a", "c", "d", "e"]


def test_a_case_reads_the_same_on_its_page_and_on_the_session_page(tmp_path: Path) -> None:
    """The sections shared through ``once`` are those of the case's own page: each section of
    every case page appears, as it is, in the session page of the same format."""
    import re

    from conftest import FIXTURES
    from forensics.config import Config
    from forensics.engine import scan_session
    from forensics.ingest import load
    from forensics.report import write_reports

    cfg = Config()
    results = [scan_session(s, cfg, cfg.rules())
               for s in load(FIXTURES / "seeds" / "seed_000_duplicate_launch.json")]
    written = write_reports(results, tmp_path)
    pages = [p for p in written if p.suffix == ".md" and not p.name.startswith("index")]
    assert pages
    for page in pages:
        session = (page.parent / "index.md").read_text(encoding="utf-8")
        body = page.read_text(encoding="utf-8").split("\n## ", 1)[1]
        for section in re.split(r"\n## ", body):
            assert section.split("\n", 1)[1] in session, (page.name, section[:40])
