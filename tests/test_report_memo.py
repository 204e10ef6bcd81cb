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
