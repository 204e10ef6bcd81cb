"""The rules' fast paths give the answers of the plain code they replaced, on every input.

Each fast path (issue 17) is exact by construction; these properties hold it against the
straightforward definition, so a later edit that breaks the reasoning fails here rather than
moving a finding.
"""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from forensics.analysis import outcome
from forensics.rules import fx003_ignored_tool_error as fx003
from forensics.rules import fx004_user_resend as fx004

_MARKS = re.compile("[%s]" % "".join(
    chr(c) for c in range(0x300, 0x370) if unicodedata.combining(chr(c))))
_PUNCT = re.compile(r"[\s\.\!\?。！？，,…~]+$")


def _bare_by_definition(text: str) -> str:
    """FX004's folding as first written: NFKC, NFD, accents off, NFC, spacing, punctuation."""
    text = unicodedata.normalize("NFKC", text)
    if not text.isascii():
        text = unicodedata.normalize("NFC", _MARKS.sub("", unicodedata.normalize("NFD", text)))
    return _PUNCT.sub("", " ".join(text.casefold().split()))


# Latin, Greek and Cyrillic letters with and without accents, the marks themselves and marks
# of other scripts, characters that compose (Hangul jamo, kana voicing, Indic nukta, U+0338),
# full-width forms, every kind of white space and the trailing punctuation FX004 drops.
_TRICKY = st.sampled_from(
    [chr(c) for c in (*range(0x20, 0x7F), *range(0xC0, 0x250), *range(0x300, 0x370),
                      *range(0x370, 0x400, 7), *range(0x400, 0x530, 3), *range(0x1DC0, 0x1E00),
                      *range(0x1E00, 0x1F00, 5), *range(0x1F00, 0x2000, 9))]
    + list("\u3000\uff01\uff1f\u2026\u3002\uff0c\xa0\u2028\x85\x0b\x0c\t\n\r\u1e9e\u0130"
           "\u226e\u2260\uac00\u1100\u1161\u11a8\u3099\u304b\u093c\u0915\u0591\u05b0"
           "\u212b\u2126\ufb01\u00b5\u0345")
    + [" "] * 8)


@settings(max_examples=600, deadline=None)
@given(st.lists(_TRICKY | st.characters(), max_size=24).map("".join))
def test_bare_folds_as_defined(text: str) -> None:
    assert fx004._bare(text) == _bare_by_definition(text)


def test_bare_folds_every_character_as_defined() -> None:
    """Each code point that decomposes, combines, is white space or changes under NFKC (and
    every 97th other), alone and next to an accent, a space and an accented letter."""
    for code in range(0x110000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF or not (
                code % 97 == 0 or unicodedata.decomposition(char) or unicodedata.combining(char)
                or char.isspace() or not unicodedata.is_normalized("NFKC", char)):
            continue
        for text in (char, f"e{char}\u0301 {char}", f"\u0301 {char}. ", f"{char}\u0308 x"):
            assert fx004._bare(text) == _bare_by_definition(text), (hex(code), text)


def test_every_accented_character_lies_below_the_bound() -> None:
    """``_accented`` looks for accents only below ``ACCENTED_BELOW``: no code point past it
    decomposes to one of the marks FX004 folds, and it finds exactly the ones below."""
    pattern = fx004._accented()
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        accented = bool(_MARKS.search(unicodedata.normalize("NFD", char)))
        assert bool(pattern.fullmatch(char)) == accented, hex(code)
        assert not accented or 0x80 <= code < fx004.ACCENTED_BELOW, hex(code)


def _pair_overlap_by_definition(a: str, b: str) -> float | None:
    """FX004's word-pair overlap as first written (tuples of words, a set union)."""
    def pairs(text: str) -> frozenset:
        words = text.split()
        return frozenset(zip(words, words[1:])) if len(words) > 1 else frozenset(words)
    sa, sb = pairs(a), pairs(b)
    return len(sa & sb) / len(sa | sb) if sa and sb else None


_WORDS = st.lists(st.sampled_from(["a", "b", "ab", "a b", "c", "é", "a\u0301"]), max_size=12)


@settings(max_examples=400, deadline=None)
@given(_WORDS, _WORDS)
def test_pair_overlap_as_defined(a: list[str], b: list[str]) -> None:
    ta, tb = fx004._bare(" ".join(a)), fx004._bare(" ".join(b))
    sa, sb = fx004._pairs(ta), fx004._pairs(tb)
    expected = _pair_overlap_by_definition(ta, tb)
    if expected is None:
        assert not (sa and sb)
    else:
        shared = len(sa & sb)
        assert shared / (len(sa) + len(sb) - shared) == expected


# -- shell words ---------------------------------------------------------------------------------

from forensics.analysis.commands import shell_words  # noqa: E402
import shlex  # noqa: E402

_SHELL_CHARS = st.sampled_from(list("ab'\"\\ \t\n\r\x0b\x0c\xa0#;|&$()`=-~*") + ["\u2028", "\x00",
                                                                              "é", "\x85"])


def _split_or_error(split, text: str):
    try:
        return split(text)
    except ValueError:
        return "error"


@settings(max_examples=1000, deadline=None)
@given(st.lists(_SHELL_CHARS | st.characters(), max_size=30).map("".join))
def test_shell_words_are_shlex_split(text: str) -> None:
    assert _split_or_error(shell_words, text) == _split_or_error(shlex.split, text)


def test_shell_words_on_written_commands() -> None:
    """The quoting agents write, and the errors: unclosed quotes, a trailing backslash."""
    for text in ['git commit -m "fix: it\'s \\"done\\""', "echo 'a b'\"c d\"e\\ f",
                 'grep -r "\\$HOME\\n" .', "printf '%s\\n' x", 'a "" \'\' b', "x\\\ny",
                 'say "unclosed', "it's", "tail\\", '"a\\', "a\tb\r\nc\x0bd"]:
        assert _split_or_error(shell_words, text) == _split_or_error(shlex.split, text), text


# -- any of a list of patterns -------------------------------------------------------------------

from forensics.rules._facts import _AnyOf  # noqa: E402

_PATTERN_PARTS = ["^", r"\A", "a", "b", r"\s+", "(a|b)", r"\bab\b", "a?", "(?=b)", "$", r"(x)\1",
                  "(?P<n>a)", "|", ".*", r"\n", "(?(1)a|b)", "[ab]+", "(?i)", "^a|b", "(^a)"]
_TEXT_CHARS = st.sampled_from(list("abxAB \n\r\t"))


@st.composite
def _pattern(draw) -> re.Pattern[str]:
    while True:
        source = "".join(draw(st.lists(st.sampled_from(_PATTERN_PARTS), min_size=1, max_size=4)))
        try:
            return re.compile(source, draw(st.sampled_from([re.I | re.M, re.M, 0])))
        except re.error:
            continue


@settings(max_examples=800, deadline=None)
@given(st.lists(_pattern(), max_size=5),
       st.lists(st.lists(_TEXT_CHARS, max_size=8).map("".join), min_size=1, max_size=3))
def test_any_of_answers_as_each_pattern_in_turn(patterns, forms) -> None:
    one_line = not any("\n" in f for f in forms)
    expected = any(p.search(f) for p in patterns for f in forms)
    assert _AnyOf(patterns).finds(forms, one_line) == expected


# -- claim phrases present in a message ------------------------------------------------------------

from forensics.rules import fx005_unverified_claim as fx005  # noqa: E402

_PHRASE_CHARS = st.sampled_from(list("ab .\n") + ["测", "试", "é", "😀", "\U0010fffd"])


@settings(max_examples=800, deadline=None)
@given(st.lists(st.lists(_PHRASE_CHARS, max_size=4).map("".join), max_size=6),
       st.lists(_PHRASE_CHARS, max_size=20).map("".join))
def test_present_phrases_are_the_substrings(phrases, text) -> None:
    present = fx005._substrings((("kind", tuple(phrases)),))
    assert present(text) == {p for p in phrases if p in text}


# -- FX004's courtesy words -------------------------------------------------------------------

from forensics.rules import registry  # noqa: E402

_FX004 = fx004.UserResendParams.from_params(registry()["FX004"].params)


def _without_polite_by_definition(bare: str, polite) -> str:
    """FX004's ``_without_polite`` as first written: two rounds over every courtesy word."""
    for _ in range(2):
        for word in polite:
            if bare.endswith(word) and len(bare) > len(word):
                bare = _PUNCT.sub("", bare[: -len(word)].rstrip(" ,"))
            elif bare.startswith(word + " ") or (not word.isascii() and bare.startswith(word)
                                                 and len(bare) > len(word)):
                bare = bare[len(word):].lstrip(" ,")
    return bare


_POLITE_PIECES = st.sampled_from(
    [*_FX004.polite, *sorted(_FX004.retries)[:12], " ", ", ", "!", ".", "…", "ok", "o", "k",
     "please", "pleas", "e", "吧", "下", "さい", "retry", "continue", "x"])


@settings(max_examples=1500, deadline=None)
@given(st.lists(_POLITE_PIECES, max_size=8).map("".join))
def test_without_polite_strips_as_defined(text: str) -> None:
    bare = fx004._bare(text)
    assert fx004._without_polite(bare, _FX004.polite) == _without_polite_by_definition(
        bare, _FX004.polite)


def test_the_shipped_accent_table_is_what_another_unicode_would_work_out(monkeypatch) -> None:
    """A Python whose Unicode the table does not name decomposes the characters itself: the
    same class as the table's (both held to the definition by the test above)."""
    shipped = fx004._accented()
    fx004._accented.cache_clear()
    monkeypatch.setattr(fx004, "_ACCENTED_UNICODE", ())
    try:
        worked_out = fx004._accented()
    finally:
        fx004._accented.cache_clear()
    assert worked_out.pattern != shipped.pattern  # the other way really ran
    for code in range(0x80, fx004.ACCENTED_BELOW):
        assert bool(worked_out.fullmatch(chr(code))) == bool(shipped.fullmatch(chr(code))), \
            hex(code)


def _mentions_by_definition(text: str, term: str) -> bool:
    """FX003's whole-word mention as first written: one pattern per term."""
    term, text = fx003._slashes(term), fx003._slashes(text)
    edge_l = r"(?<![\w.-])" if term[:1].isalnum() or term[:1] == "_" else ""
    edge_r = r"(?![\w-])" if term[-1:].isalnum() or term[-1:] == "_" else ""
    return bool(re.search(edge_l + re.escape(term.lower()) + edge_r, text))


# the characters a mention's edges turn on: word characters of several scripts, digits,
# the joiners ``.``, ``-``, ``_``, both slashes, space, punctuation and upper case (which
# lower-casing the term changes, and which may lower to more than one character)
_EDGES = st.sampled_from(list("ab_.-/\\ :'\"()x1Aé9٣中İẞ\u00b2\t\n"))


@given(st.text(_EDGES, max_size=12), st.text(_EDGES, max_size=30), st.data())
@settings(max_examples=2000)
def test_mentions_as_defined(term: str, text: str, data) -> None:
    # plant the term in the text half the time, so that hits are tried as often as misses
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(text)))
        text = text[:at] + term.lower() + text[at:]
    assert fx003._mentions(text, term) == _mentions_by_definition(text, term)


def test_mentions_on_written_cases() -> None:
    assert fx003._mentions("the file app.py failed", "app.py")
    assert not fx003._mentions("see myapp.py", "app.py")  # glued to a word on the left
    assert not fx003._mentions("see .app.py", "app.py")  # ... or to a dot
    assert fx003._mentions("see app.py.", "app.py")  # a full stop after it is no glue
    assert not fx003._mentions("app.py-old", "app.py")
    assert fx003._mentions("app.py-old then app.py", "app.py")  # a later clean occurrence
    assert fx003._mentions("in c:/src/x", "C:\\src")  # slashes folded, term lower-cased


@given(st.text(st.sampled_from(list("a_9é中٣ \t.-:/<>\u00b2\u200b\u0301")), max_size=12))
@settings(max_examples=1000)
def test_three_word_characters_as_counted(line: str) -> None:
    counted = len(re.findall(r"\w", line)) >= 3
    assert bool(outcome._THREE_WORD_CHARS.search(line)) == counted


def _word_kind_by_definition(text: str, kind: str):
    """The report's gloss lookup as first written: a pattern per word for corrections."""
    from forensics.report import knowledge
    from forensics.report._prose import norm

    flat = norm(text).strip(" .!?。！？,，")
    for word in knowledge.words().words:
        if word.kind != kind:
            continue
        w = word.text.lower()
        if flat == w or (kind == "correction" and re.match(re.escape(w) + r"(?:\W|$)", flat)):
            return word
    return None


def test_word_kind_as_defined() -> None:
    from forensics.report import knowledge, readings

    shipped = knowledge.words().words
    texts = {""}
    for word in shipped:
        for tail in ("", " ", " now", "x", "_x", "-x", "1", "é", "\n", "!", " 不对"):
            texts |= {word.text + tail, word.text.upper() + tail, "  " + word.text + tail}
    kinds = {w.kind for w in shipped} | {"retry", "continue", "correction"}
    assert len(texts) > 100 and "correction" in {w.kind for w in shipped}
    for kind in kinds:
        for text in texts:
            assert readings._word_kind(text, kind) == _word_kind_by_definition(text, kind), (
                kind, text)


def _figures_by_definition(text: str, limit: int, pattern) -> tuple[str, ...]:
    """The report's figure sentences as first written: every sentence cleaned and searched."""
    from forensics.report.narrative import _MARKUP, _SENTENCE_END

    out: list[str] = []
    for chunk in _SENTENCE_END.split(text or ""):
        chunk = _MARKUP.sub("", chunk).strip(" -*#|>")
        if 8 < len(chunk) <= 400 and pattern.search(chunk) and not chunk.startswith("$"):
            out.append(chunk)
            if len(out) == limit:
                break
    return tuple(out)


_FIGURE_TEXT = st.lists(st.sampled_from(
    ["1", "٣", "12,5", "3.5", " ", "\n", ". ", "! ", "**", "`", "__", "$", "-", "#", "ms", "s",
     " MB", " tests", " requests", "passed", "took", "x", "é"]), max_size=40).map("".join)


@given(_FIGURE_TEXT, st.integers(0, 4))
@settings(max_examples=1000)
def test_figures_as_defined(text: str, limit: int) -> None:
    from forensics.report import narrative

    pattern = narrative._figure_pattern()
    assert narrative._figures_in(text, limit, pattern) == _figures_by_definition(
        text, limit, pattern)


# -- exit-status lines only where their needles stand -------------------------------------------

from dataclasses import replace  # noqa: E402

from forensics.model import ToolResultTurn  # noqa: E402
from forensics.rules import registry  # noqa: E402

_STATUS_PIECES = st.sampled_from(
    ["exit", "Exit", "EXIT", "exıt", "EXİT", "ex it", "exited", "with ", "code", "status", ":",
     " ", "1", "0", "42", "\n", "process ", "Process exited with code 3", "exit status 2", "é",
     "✓", "測", "x", "code: 7", "returned", "non-zero", "Killed", "killed", "OOMKilled",
     "Segmentation fault", "(core dumped)", "core dumped", "thread 'main' panicked at",
     "Out of memory: Killed process 12", "fatal runtime error", "/bin/sh: line 1: ", "9 ",
     "python"])


def _fx003_outcome_rules(**params) -> outcome.OutcomeRules:
    raw = {**registry()["FX003"].params, **params}
    return fx003.IgnoredToolErrorParams.from_params(raw).outcome_rules


def _same_outcome_gated_and_not(rules: outcome.OutcomeRules, text: str, pad: int) -> None:
    plain = replace(rules, exit_gate=None, death_gate=lambda _output: True)  # all, whole
    for output in (text, "y" * pad * 3 + text, text + "z" * pad * 3):
        result = ToolResultTurn(ordinal=1, anchor="a", call_id="c", output=output)
        assert outcome.outcome(result, "make", rules) == outcome.outcome(result, "make", plain)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_STATUS_PIECES, max_size=12).map("".join), st.integers(0, 700))
@example("EXIT STATUS 3", 0)
@example("ok\nProcess Exited With Code 2", 400)
@example("exıt code 4", 0)
@example("EXİT code 5", 300)
def test_exit_needles_skip_only_texts_no_exit_pattern_matches(text: str, pad: int) -> None:
    """FX003 tries its exit-status patterns only where one of their needles stands: the same
    outcome as trying them on every result without a status, at both edges of a long output."""
    rules = _fx003_outcome_rules()
    assert rules.exit_gate is not None  # the shipped patterns promise needles
    _same_outcome_gated_and_not(rules, text, pad)


@settings(max_examples=300, deadline=None)
@given(st.lists(_STATUS_PIECES, max_size=12).map("".join), st.integers(0, 300))
def test_a_users_own_exit_patterns_bring_their_own_needles(text: str, pad: int) -> None:
    """A configuration's exit-status pattern that holds no shipped word (``returned non-zero``)
    is gated by its own needles, or not at all when it promises none."""
    for patterns in (["(?i)returned non-zero( exit)? status [1-9]"], ["(?m)^[1-9][0-9]*$"]):
        rules = _fx003_outcome_rules(exit_text_patterns=patterns)
        assert (rules.exit_gate is None) == (patterns[0].startswith("(?m)"))
        _same_outcome_gated_and_not(rules, text, pad)
    rules = _fx003_outcome_rules(exit_text_patterns=["(?i)returned non-zero status [1-9]"])
    failed = outcome.outcome(ToolResultTurn(ordinal=1, anchor="a", call_id="c",
                                            output="build\nReturned NON-ZERO status 2"),
                             "make", rules)
    assert (failed.kind, failed.cause, failed.words) == ("failed", "text",
                                                         "Returned NON-ZERO status 2")


_SCRIPT_PIECES = st.sampled_from(
    ["sed", " -i", " -i.bak", "s/a/b/", " f.py", ">", ">>", "2>&1", "&>", " out.js", ";", "&&",
     "|", "||", "&", "\n", "\\\n", "\\>", "'", '"', "`", "$(", ")", "#", "<<EOF\n", "\nEOF\n",
     " ", "cat", "echo x", "s", "ed", "(", "{ ", " }", "then ", "/tmp/x", "a.log"])


@settings(max_examples=600, deadline=None)
@given(st.lists(_SCRIPT_PIECES, max_size=14).map("".join))
@example("s\\\ned -i s/a/b/ f.py")  # a line continuation inside the word
@example("(sed -i 's/a/b/' f.py)")
@example("echo hi > out.js")
def test_a_script_without_sed_or_redirect_edits_nothing(script: str) -> None:
    """``edited_files`` skips the split of a script holding neither ``>`` nor ``sed``: the
    split would find no edit there either."""
    from forensics.model import ToolCall
    from forensics.rules import _facts

    call = ToolCall(call_id="c", name="bash", input={"command": script}, command=script,
                    anchor="a")
    assert _facts.edited_files(call, frozenset()) == _facts._shell_edits(script)


def _telling_lines_by_definition(text: str, limit: int, fallback: int | None) -> list[str]:
    """``telling_lines`` as first written: every kept line filtered, then the last ones."""
    if "<system-reminder>" in (text or ""):
        text = outcome._REMINDER.sub("", text)
    lines = [ln.rstrip() for ln in (text or "").splitlines()
             if outcome._THREE_WORD_CHARS.search(ln) and not outcome._TAG_ONLY.match(ln)]
    telling = outcome._telling()
    hits = [ln for ln in lines if telling is not None and telling.search(ln)]
    chosen = hits[-limit:] if hits else lines[-(fallback or limit):]
    return [outcome.shorten(ln, 200) for ln in chosen]


_OUTPUT_LINES = st.sampled_from([
    "error: cannot find module 'x'", "Traceback (most recent call last):", "FAILED tests/a.py",
    "ok", "  passed 3 tests  ", "", "   ", "</shell_metadata>", "<system-reminder>note",
    "</system-reminder>", "npm ERR! code 1", "warning: unused", "exit code 2", "a b", "x" * 300,
    "Error: EADDRINUSE :3000", "done in 2s", "\tindented line here", "ERROR"])


@settings(max_examples=600, deadline=None)
@given(st.lists(_OUTPUT_LINES, max_size=25), st.integers(1, 4),
       st.none() | st.integers(0, 4), st.sampled_from(["\n", "\r\n"]))
@example(["error one", "ok then", "error two"], 1, None, "\n")
@example(["plain", "lines", "only"], 2, 1, "\n")
def test_telling_lines_from_the_end_as_defined(lines, limit, fallback, newline) -> None:
    text = newline.join(lines)
    assert outcome.telling_lines(text, limit, fallback=fallback) == \
        _telling_lines_by_definition(text, limit, fallback)


def test_telling_lines_refuses_a_limit_the_slices_would_misread() -> None:
    """``lines[-0:]`` is every line: a limit of 0 (or a negative fallback) has no meaning."""
    for limit, fallback in ((0, None), (-1, None), (2, -1)):
        with pytest.raises(ValueError):
            outcome.telling_lines("error: x\nok", limit, fallback=fallback)


@settings(max_examples=300, deadline=None)
@given(st.lists(_OUTPUT_LINES, max_size=60), st.lists(_OUTPUT_LINES, max_size=3))
@example(["ok"] * 5 + [f"error: cannot find module 'm{n}'" for n in range(45)], [])
def test_error_lines_as_defined(output_lines, error_lines) -> None:
    """FX003's error lines: a short output whole, else its first 40 error-like lines, else
    its last three (the search stops at the 40th)."""
    from forensics.model import ToolResultTurn

    k = fx003.IgnoredToolErrorParams.from_params(registry()["FX003"].params)
    result = ToolResultTurn(ordinal=1, anchor="a", call_id="c", output="\n".join(output_lines),
                            error="\n".join(error_lines) or None)
    out = [line for line in (result.error or "").splitlines() if line.strip()]
    lines = [line for line in fx003._edges(result.output).splitlines() if line.strip()]
    marked = [line for line in lines if k.error_line.search(line)]
    out.extend(lines if len(lines) <= 6 else marked[:40] or lines[-3:])
    assert fx003._error_lines(result, k) == [line[:400] for line in out]


_NAMING_AS_WRITTEN = re.compile(
    r"(?=.*[^\W\d_])(?:.*_|.*[a-z][A-Z]|.*[^\W\d_].*\d|.*\d.*[^\W\d_])")
"""FX004's test of an identifier as first written: one pattern, cubic on a long plain token."""

_TOKEN_CHARS = st.sampled_from(list("aZé_9٣.:/@-xY") + ["ß", "Ⅻ", "²", "ǅ", "ー"])


@settings(max_examples=400, deadline=None)
@given(st.text(_TOKEN_CHARS, max_size=24))
@example("employee_id")
@example("sortSites")
@example("weekly.xml:17")
@example("department")
@example("2026")
@example("x²")  # a superscript two is a word character and no decimal digit
def test_names_something_as_the_pattern_defined_it(token: str) -> None:
    assert fx004._names_something(token) == bool(_NAMING_AS_WRITTEN.search(token))


_QUOTED_AS_WRITTEN = re.compile(r"^\s*>.*$", re.M)
_LINE_CHARS = st.sampled_from([" ", "\t", "\n", "\r", ">", "a", "b", "\x85", "\u2028", "\xa0",
                               "\x1c", "\u200b", "\ufeff", "\x0b", "\x0c"])


@settings(max_examples=600, deadline=None)
@given(st.text(_LINE_CHARS, max_size=40))
@example("intro\n\n  \n> quoted\nafter")
@example(">")
@example("\n\n>x\n>y\n\n")
@example("a\u2028> not a line start for re")
def test_without_quoted_lines_as_the_pattern_defined_it(text: str) -> None:
    from forensics.rules import fx005_unverified_claim as fx005

    assert fx005._without_quoted_lines(text) == _QUOTED_AS_WRITTEN.sub(" ", text)


def _claims_as_written(text, claims, present, hedge, negation, reported):
    """FX005's claim search as first written: the text before each hit searched for its
    sentence's start, the text after it for its end, per hit."""
    from forensics.analysis.phrases import cached_phrase_pattern
    from forensics.rules import fx005_unverified_claim as fx005

    body = _QUOTED_AS_WRITTEN.sub(" ", fx005._CODE_BLOCK.sub(" ", text)).lower()
    found = present(body)
    if not found:
        return []
    hits = []
    for kind, phrases in claims.items():
        here = tuple(p for p in phrases if p in found)
        pattern = cached_phrase_pattern(here) if here else None
        if pattern is not None:
            hits.extend((kind, m) for m in pattern.finditer(body))
    out = []
    for kind, hit in sorted(hits, key=lambda h: h[1].start()):
        start = max((m.end() for m in fx005._BOUNDARY.finditer(body, 0, hit.start())),
                    default=0)
        after = fx005._BOUNDARY.search(body, hit.end())
        sentence = body[start:after.end() if after else len(body)].strip()
        if sentence.endswith(("?", "？")) or kind in {c.kind for c in out}:
            continue
        if (hedge and hedge.search(sentence)) or (reported and reported.search(sentence)):
            continue
        before = body[max(start, hit.start() - 25):hit.start()]
        if negation is not None and negation.search(before):
            continue
        out.append(fx005._Claim(kind, fx005._original(text, sentence), hit.group(0)))
    return out


_CLAIM_PIECES = st.sampled_from([
    "all tests pass", "the build succeeds", "tests passed", "i think", "should", "not ",
    "you said", "?", "？", ".", ". ", "!", "。", "\n", "> ", "```", " ", "ok", "it works",
    "the server is running", "done", "fixed", "x.y", "maybe ", "All Tests Pass"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_CLAIM_PIECES, max_size=14).map("".join))
@example("All tests pass. " * 5)
@example("i think all tests pass. the build succeeds! not all tests pass?")
def test_claims_as_first_written(text: str) -> None:
    from forensics.analysis.params import build
    from forensics.rules import fx005_unverified_claim as fx005
    from forensics.rules import registry

    p = build(fx005.UnverifiedClaimParams, registry()["FX005"].params)
    present = fx005._substrings(tuple(p.claims.items()))
    args = (text, p.claims, present, p.hedge, p.negation, p.reported)
    assert fx005._claims(*args) == _claims_as_written(*args)


_INDENTED_AS_WRITTEN = [  # (as first written, with ^\s*; as now, with the line's own white space)
    (r"^\s*(?:HTTP/[\d.]+\s+)?(?:200|201|204|301|302|303|304|307|308)\b",
     r"^[^\S\n]*(?:HTTP/[\d.]+\s+)?(?:200|201|204|301|302|303|304|307|308)\b"),
    (r"^\s*OK\s*$", r"^[^\S\n]*OK\s*$"),
    (r"^\s*[\[{]", r"^[^\S\n]*[\[{]"),
    (r"^\s*(?:create|rewrite) mode \d+", r"^[^\S\n]*(?:create|rewrite) mode \d+"),
]
_ANSWER_PIECES = st.sampled_from([" ", "\t", "\n", "\r", "\r\n", "\x0b", "\u2028", "\x85",
                                  "OK", "ok", "200", "HTTP/1.1 ", "{", "[", "x", "create mode 1",
                                  "rewrite mode 100644"])


@settings(max_examples=500, deadline=None)
@given(st.lists(_ANSWER_PIECES, max_size=12).map("".join))
@example("up\n\n  \n  OK\n")
@example("\r\n\r\nHTTP/1.1 200 OK")
def test_line_indentation_finds_what_any_white_space_found(text: str) -> None:
    """``^\\s*X`` under ``re.M`` finds a match exactly when ``^[^\\S\\n]*X`` does, for an X
    that cannot begin with white space (the health answers, git's mode lines); the first was
    quadratic in a run of blank lines."""
    from forensics.analysis.ledger import shipped_knowledge

    for before, now in _INDENTED_AS_WRITTEN:
        old, new = re.compile(before, re.M | re.I), re.compile(now, re.M | re.I)
        assert (old.search(text) is None) == (new.search(text) is None), (before, text)
    assert all(now in shipped_knowledge().health_ok.pattern for _b, now in
               _INDENTED_AS_WRITTEN[:3])


# -- the rest of an exchange, found once per session -----------------------------------------

_TURN = st.sampled_from(["user", "assistant", "aborted", "result", "abort", "interrupt",
                         "compaction"])


def _turns(kinds: list[str]) -> list:
    from forensics.model import AssistantTurn, EventTurn, ToolResultTurn, UserTurn

    out = []
    for n, kind in enumerate(kinds, 1):
        base = {"ordinal": n, "anchor": f"a{n}"}
        out.append(UserTurn(text="u", **base) if kind == "user" else
                   AssistantTurn(aborted=kind == "aborted", **base)
                   if kind in ("assistant", "aborted") else
                   ToolResultTurn(call_id="c", **base) if kind == "result" else
                   EventTurn(event=kind, **base))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(_TURN, max_size=30))
def test_the_rest_of_an_exchange_is_the_walk_to_the_users_next_message(kinds) -> None:
    from forensics.analysis.session import analysis_of, user_stopped
    from forensics.model import AssistantTurn, Session, UserTurn

    turns = _turns(kinds)
    session = Session(id="s", agent="claude-code", format="case", source="t", turns=turns)
    analysis = analysis_of(session)
    for ordinal in range(len(turns) + 1):
        rest = []
        for t in turns[ordinal:]:
            if isinstance(t, UserTurn):
                break
            rest.append(t)
        assert analysis.rest_of_exchange(ordinal) == rest
        assert analysis.stopped_after(ordinal) == user_stopped(rest)
        lo, hi = analysis.replies_after(ordinal)
        assert analysis.assistant_turns[lo:hi] == [t for t in rest if isinstance(t, AssistantTurn)]


_REPLY = st.sampled_from(["", "Continuing.", "All tests pass now.", "The build succeeds.",
                          "Everything works now.", "Done, it works."])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_REPLY, st.integers(0, 5)), max_size=24), st.lists(
    st.tuples(st.integers(0, 24), st.sampled_from(["test", "build", None])), max_size=40))
def test_claims_remembered_by_position_are_the_claims_read_each_time(replies, asks) -> None:
    """Spans end where a user message would; asked in any order, the first claim of a kind of
    step and the last claim of success are those a read of the span finds."""
    from forensics.model import AssistantTurn
    from forensics.rules import registry

    k = fx003.IgnoredToolErrorParams.from_params(registry()["FX003"].params)
    turns = [AssistantTurn(ordinal=n, anchor=f"a{n}", text=text) for n, (text, _) in
             enumerate(replies, 1)]
    ends = [n + 1 for n, (_, last) in enumerate(replies) if last == 0] + [len(turns)]
    claims = fx003._Claims(turns, k)
    for lo, kind in asks:
        if lo >= len(turns):
            continue
        hi = next(e for e in ends if e > lo)
        span = turns[lo:hi]
        assert claims.first_step_claim(lo, hi, kind) is next(
            (r for r in span if fx003._claims_step(r, kind, k)), None)
        said = [r for r in span if r.text.strip() and k.claims.search(r.text.lower())]
        assert claims.last_claim(lo, hi) is (said[-1] if said else None)


# -- FX003: the exchange's index of replies that could react -----------------------------------

_FAILED_CALLS = st.sampled_from([
    ("Bash", {"command": "python app/main.py --port 8000"}),
    ("Bash", {"command": "npm run build"}),
    ("Bash", {"command": "cat src\\Tooltip.tsx"}),
    ("Read", {"file_path": "/w/src/İstanbul_Mapper.py"}),
    ("Edit", {"file_path": "/w/src/app.py", "old_string": "def handler(request):\n    return "
              "render(request, 'index.html', context)"}),
    ("mcp__db__query", {"sql": "select 1"}), ("Bash", {"command": "cd /w && echo ok"}),
])
_FAILED_OUTPUTS = st.sampled_from([
    "Exit code 2\nModuleNotFoundError: No module named 'requests.adapters'",
    "src/Tooltip.tsx(12,5): error TS2322: Type 'x' is not assignable to type 'y'",
    "Error: listen EADDRINUSE: address already in use :::8000",
    "HTTP 404 Not Found from https://example.com/api",
    "bash: İmport: command not found",
    "String to replace not found in file.",
])
_FRAGMENTS = st.sampled_from([
    "", "Continuing.", "The requests module is missing, installing it.", "xValueError here",
    "modulenotfounderror", "requests.adapters", "Requests.Adapters!", "it failed for tooltip.tsx.",
    "tooltip.tsx looks fine.", "src\\tooltip.tsx", "code 404", "exit code 2.", "port 80001",
    "type 'x' is not assignable", "is not", "please run it manually", "İstanbul_mapper.py failed",
    "istanbul_mapper.py", "already in use", "eaddrinuse", "ts2322", "-9", "render(request, 'index",
    "the build is broken.\nAll done.", "ışık", "a_b-c.d"])
_LATER_CALLS = st.sampled_from([
    None, ("Bash", {"command": "python app/main.py --port 8000"}),
    ("Bash", {"command": "python  app/main.py"}), ("Bash", {"command": "pip install requests"}),
    ("Bash", {"command": "git add src/Tooltip.tsx && git commit -m x"}),
    ("Bash", {"command": "curl -s localhost:8000/health"}), ("Bash", {"command": "ls src"}),
    ("Read", {"file_path": "/w/src/Tooltip.tsx"}), ("Read", {"file_path": "/w/src/app.py"}),
    ("Edit", {"file_path": "/w/src/app.py", "old_string": "x"}),
    ("Bash", {"command": "npm run build"}), ("Bash", {"command": "echo port 18000"}),
    ("mcp__db__query", {"sql": "select 2"}), ("Bash", {"command": "npm run"}),
    ("Bash", {"command": "cd  /w &&  echo ok"}),
])


def _failure_and_replies(failed, output, exit_code, replies):
    from forensics.model import AssistantTurn, Session, ToolCall, ToolResultTurn, UserTurn

    name, args = failed
    call = ToolCall(call_id="c0", name=name, input=args, command=args.get("command"),
                    anchor="a2")
    turns = [UserTurn(ordinal=1, anchor="a1", text="go"),
             AssistantTurn(ordinal=2, anchor="a2", tool_calls=[call]),
             ToolResultTurn(ordinal=3, anchor="a3", call_id="c0", name=name, output=output,
                            exit_code=exit_code, is_error=True)]
    for n, (text, reasoning, later) in enumerate(replies):
        ordinal = len(turns) + 1
        calls = []
        if later is not None:
            calls = [ToolCall(call_id=f"c{ordinal}", name=later[0], input=later[1],
                              command=later[1].get("command"), anchor=f"a{ordinal}")]
        turns.append(AssistantTurn(ordinal=ordinal, anchor=f"a{ordinal}", text=text,
                                   reasoning=reasoning, tool_calls=calls))
        if calls:
            turns.append(ToolResultTurn(ordinal=ordinal + 1, anchor=f"a{ordinal + 1}",
                                        call_id=calls[0].call_id, name=later[0],
                                        exit_code=n % 2))
    session = Session(id="s", agent="claude-code", format="case", source="t", turns=turns)
    return session, call, turns[2]


_REPLIES = st.lists(st.tuples(_FRAGMENTS.map(str.upper) | _FRAGMENTS, _FRAGMENTS, _LATER_CALLS),
                    min_size=1, max_size=30)


@settings(max_examples=400, deadline=None)
@given(_FAILED_CALLS, _FAILED_OUTPUTS, st.sampled_from([None, 1, 2, -9]), _REPLIES)
@example(("Bash", {"command": "cd /w && echo ok"}), "String to replace not found in file.", 2,
         [("", "", ("Bash", {"command": "cd  /w &&  echo ok"}))])  # the same script, no program
@example(("mcp__db__query", {"sql": "select 1"}), "String to replace not found in file.", 2,
         [("", "", ("mcp__db__query", {"sql": "select 2"}))])  # the same tool, with no target
@example(("Bash", {"command": "npm run build"}), "Error: listen EADDRINUSE: address already in "
         "use :::8000", 1, [("", "", ("Bash", {"command": "echo port 18000"})),
                            ("", "", ("Bash", {"command": "curl -s localhost:8000/health"}))])
def test_the_exchange_index_holds_every_reply_that_reacts(failed, output, exit_code,
                                                         replies) -> None:
    """A reply the index leaves out, read with the walk's first step and first call behind it,
    reacts in no way: its words name nothing, its calls touch nothing. When a claim follows,
    only the words about the failure and a clean rerun are looked for."""
    from forensics.analysis.session import analysis_of

    k = fx003.IgnoredToolErrorParams.from_params(registry()["FX003"].params)
    session, call, result = _failure_and_replies(failed, output, exit_code, replies)
    analysis = analysis_of(session)
    lo, hi = analysis.replies_after(result.ordinal)
    facts = fx003._Facts(result, call, k)
    index = fx003._ReplyIndex(analysis, k)
    for decisive_only in (False, True):
        walk = fx003._Walk(session, facts, call, k, decisive_only=decisive_only)
        walk.immediate = walk.first_call = False
        listed = list(index.of_exchange(lo, hi).could_react(facts, call, walk, lo, hi))
        assert listed == sorted(set(listed)) and all(lo <= p < hi for p in listed)
        for p in range(lo, hi):
            alone = fx003._Walk(session, facts, call, k)
            alone.immediate = alone.first_call = False
            said = alone.read(analysis.assistant_turns[p])
            reacts = said is not None if decisive_only else said is not None or alone.found
            assert not reacts or p in listed, (p, decisive_only, analysis.assistant_turns[p])


def _every_reply_read(session, facts, call, replies, k) -> tuple[str | None, set[str]]:
    """The walk as it was: every reply read, the first that settles it, what else was found."""
    walk = fx003._Walk(session, facts, call, k)
    for reply in replies:
        said = walk.read(reply)
        if said is not None:
            return said, walk.found
    return None, walk.found


@settings(max_examples=300, deadline=None)
@given(_FAILED_CALLS, _FAILED_OUTPUTS, st.sampled_from([None, 2]), _REPLIES, st.booleans())
def test_a_reaction_read_through_the_index_is_the_reaction_read_reply_by_reply(
        failed, output, exit_code, replies, any_settles) -> None:
    """The first replies read one by one, then the index's: the answer of every reply read one
    by one. With no claim after it, the first reaction of any kind; with one, whether a reply
    says something about the failure or reruns it clean (the weaker reactions do not count)."""
    from forensics.analysis.session import analysis_of

    k = fx003.IgnoredToolErrorParams.from_params(registry()["FX003"].params)
    session, call, result = _failure_and_replies(failed, output, exit_code, replies)
    analysis = analysis_of(session)
    lo, hi = analysis.replies_after(result.ordinal)
    facts = fx003._Facts(result, call, k)
    answers = []
    for read_in_full in (0, 1, 10**9):
        fx003.READ_IN_FULL, kept = read_in_full, fx003.READ_IN_FULL
        try:
            answers.append(fx003._reaction(session, facts, call, lo, hi,
                                           fx003._ReplyIndex(analysis, k), k,
                                           any_settles=any_settles))
        finally:
            fx003.READ_IN_FULL = kept
    said, found = _every_reply_read(session, facts, call, analysis.assistant_turns[lo:hi], k)
    if any_settles:
        assert (answers[0] is None) == (said is None and not found)
    else:
        assert answers[0] == said
    assert answers[0] == answers[1] == answers[2]
