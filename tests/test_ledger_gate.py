"""The ledger's substring gates: every text the pattern matches must pass its gate, or a skipped
search would drop a signal. Checked against re itself, over every code point where the gate's
case folding relies on a fact of Unicode, and on matches built from the shipped word lists."""

from __future__ import annotations

import re
import sys
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.analysis.ledger import (
    _LATIN_EXACT,
    Knowledge,
    PhraseGate,
    _caseless_exact,
    _fold_case,
    holds_cased_needle,
    holds_needle,
    needles,
    needles_of,
    server_of,
)
from forensics.analysis.phrases import phrase_pattern
from forensics.rules import registry

PARAMS = registry()["FX002"].params
WORD_LISTS = ("user_up_words", "relaunch_request_words", "failure_words",
              "delegated_stop_words")
EVERY_CHAR = "".join(map(chr, range(sys.maxunicode + 1)))


def _fold(char: str) -> str:
    return _fold_case(char)


def test_every_char_re_takes_for_an_ascii_char_folds_into_it() -> None:
    twins = re.findall(r"[\x00-\x7f]", EVERY_CHAR[128:], re.I)
    assert twins, "re matches some non-ASCII letters with ASCII ones case-blind (K, ſ, ı, İ)"
    for char in twins:
        for ascii_char in map(chr, range(128)):
            if re.fullmatch(re.escape(ascii_char), char, re.I):
                assert _fold(char) == ascii_char.lower(), (hex(ord(char)), ascii_char)
    for ascii_char in map(chr, range(128)):  # and ASCII among itself: only its other case
        for char in re.findall(re.escape(ascii_char), EVERY_CHAR[:128], re.I):
            assert _fold(char) == ascii_char.lower()


def test_a_latin_1_small_letter_is_matched_only_by_what_folds_into_it() -> None:
    assert "ä" in _LATIN_EXACT and "ß" in _LATIN_EXACT and "µ" not in _LATIN_EXACT
    for letter in _LATIN_EXACT:
        matched = re.findall(re.escape(letter), EVERY_CHAR, re.I)
        assert letter in matched and all(_fold(c) == letter for c in matched), letter


def test_a_letter_without_case_is_matched_only_by_itself() -> None:
    caseless = [c for c in EVERY_CHAR if unicodedata.category(c) == "Lo"]
    assert all(c.lower() == c for c in caseless)
    ranges: list[list[int]] = []
    for code in map(ord, caseless):
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    any_caseless = re.compile("[" + "".join(
        re.escape(chr(a)) + (f"-{re.escape(chr(b))}" if b > a else "") for a, b in ranges)
        + "]", re.I)
    # re's case-blind matching pairs only characters that have a case (or its few extra
    # twins, all cased letters): none of them is taken for a letter without case
    cased = [c for c in EVERY_CHAR if c.lower() != c or c.upper() != c or c.casefold() != c
             or len({c.lower(), c.upper(), c.casefold()}) > 1]
    assert len(cased) > 2000
    assert not [c for c in cased if any_caseless.fullmatch(c)]
    shipped = {c for name in WORD_LISTS for w in PARAMS[name] for c in w.lower()
               if unicodedata.category(c) == "Lo"}
    assert len(shipped) > 20  # the Chinese and Korean entries
    for char in shipped:  # and, over every code point, each shipped one is matched by itself
        assert re.findall(re.escape(char), EVERY_CHAR, re.I) == [char]


def test_only_ascii_and_caseless_letters_vouch_for_themselves() -> None:
    assert _caseless_exact("k") and _caseless_exact("'") and _caseless_exact("启")
    assert _caseless_exact("ä") and _caseless_exact("ê")
    assert not _caseless_exact("σ") and not _caseless_exact("µ") and not _caseless_exact("ı")


def test_the_gate_of_the_shipped_words_keeps_whole_phrases() -> None:
    gate = PhraseGate.of(PARAMS["user_up_words"])
    assert gate is not None
    assert "ready" in gate.single and "已启动" in gate.single and "실행 중" in gate.single
    assert "already up" not in gate.single  # implied by "ready"
    assert "läuft" in gate.single and "prêt" in gate.single
    assert gate.passes("OK, the Server is  UP now") and gate.passes("服务已启动")
    assert not gate.passes("please look at the logs") and not gate.passes("服务日志")
    assert PhraseGate.of(["ı"]) is None  # nothing left to test for: always search
    assert PhraseGate.of(["aıb"]) == PhraseGate((), (("a", "b"),))


def test_a_gate_for_no_words_passes_nothing_as_the_missing_pattern_matches_nothing() -> None:
    assert phrase_pattern([]) is None
    gate = PhraseGate.of([])
    assert gate is not None and not gate.passes("ready")


_SPACES = st.sampled_from([" ", "  ", "\t", "\n", " \n\t", "\u3000", "\xa0"])
_CASE = st.sampled_from([str.lower, str.upper, str.title, str.swapcase])
_TWINS = {"i": ["I", "\u0130", "\u0131"], "s": ["S", "\u017f"], "k": ["K", "\u212a"]}


def _compiled(pattern) -> re.Pattern[str]:
    """The re.Pattern behind a pattern the knowledge compiles on first use (hypothesis wants it)."""
    return re.compile(pattern.pattern, pattern.flags)


@st.composite
def _match_of(draw, name: str) -> tuple[str, str]:
    """A text the list's pattern matches: a phrase, its case changed, its letters swapped
    for what re takes them for, its spaces any white space, in some context."""
    word = draw(st.sampled_from(sorted(w for w in PARAMS[name] if w.strip())))
    text = draw(_CASE)(word)
    out = []
    for char in text:
        if char == " ":
            out.append(draw(_SPACES))
        elif char.lower() in _TWINS and draw(st.booleans()):
            out.append(draw(st.sampled_from(_TWINS[char.lower()])))
        else:
            out.append(char)
    before = draw(st.sampled_from(["", "so ", "ΣΑΣ ", "İş: ", "(", "好 ", "\n"]))
    after = draw(st.sampled_from(["", ".", " now", "了", "!\n"]))
    return name, before + "".join(out) + after


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(WORD_LISTS).flatmap(_match_of))
def test_every_text_a_phrase_pattern_matches_passes_its_gate(case: tuple[str, str]) -> None:
    name, text = case
    pattern = phrase_pattern(PARAMS[name])
    gate = PhraseGate.of(PARAMS[name])
    assert gate is not None
    if pattern.search(text):
        assert gate.passes(text), (name, text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(), max_size=60),
       st.lists(st.text(max_size=6), min_size=1, max_size=4))
def test_any_words_any_text(text: str, words: list[str]) -> None:
    pattern = phrase_pattern(words)
    gate = PhraseGate.of(words)
    if pattern is not None and gate is not None and pattern.search(text):
        assert gate.passes(text)


def test_the_knowledge_carries_the_gate_of_its_own_words() -> None:
    know = Knowledge.build(**{**PARAMS, "user_up_words": ["it flies"]})
    assert know.user_up_gate == PhraseGate.of(["it flies"])


# -- what a server pattern's every match contains --------------------------------------------

KNOW = Knowledge.build(**PARAMS)


def test_needles_follow_the_structure_of_the_pattern() -> None:
    def of(source: str, flags: int = re.I) -> tuple[str, ...] | None:
        return needles(re.compile(source, flags))

    assert of(r"\bUvicorn\b") == ("uvicorn",)
    assert of(r"\bnpx\s+serve\b|\bhttp-server\b") == ("http-server", "serve")
    assert of(r"^(?:npm|pnpm|yarn)\s+run") == ("npm", "pnpm", "yarn")  # its longest promise
    assert of(r"\bng\s+serve\b") == ("serve",)
    assert of(r"(?:abc)?x") == ("x",)  # an optional group promises nothing
    assert of(r"(?:abc)+x") == ("abc",)
    assert of(r"abc|\d+") is None  # a branch without a literal: no promise
    assert of(r"[ab]c") == ("c",)
    assert of(r"caf\u00e9") == ("caf\u00e9",)
    assert of("ab\u03c3cde") == ("cde",)  # re pairs σ with ς: it cuts the run
    assert of(r"(?=abc)x") == ("x",)  # a look-ahead is not part of the match
    assert of(r"\bK8S\b") == ("k8s",)


def test_cased_needles_are_the_literals_matched_as_written() -> None:
    def of(*sources: str) -> tuple[str, ...] | None:
        return needles_of(sources, re.M, cased=True)

    assert of(r"^(/bin/\w*sh: line \d+: )?\d*\s*Killed\b") == ("Killed",)
    assert of(r"(?i)killed") is None  # re matches KILLED too: no text as written
    assert of(r"Exit (?i:code) [1-9]") == ("Exit ",)  # the caseless part is not a needle
    assert of(r"(?i)x(?-i:ABC)") == ("ABC",)
    assert of(r"Killed", r"OOMKilled") == ("Killed",)  # OOMKilled holds Killed: implied
    assert of(r"\(core dumped\)", r"^thread .* panicked at") == (" panicked at",
                                                                 "(core dumped)")
    assert needles_of([r"\bexit\b", r"process exited"]) == ("exit",)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([
    r"^(/bin/\w*sh: line \d+: )?\d*\s*Killed\b", r"\bKilled\s+(nohup|python|node|\S+/)",
    r"Segmentation fault", r"\(core dumped\)", r"OOMKilled", r"^thread .* panicked at",
    r"Exit (?i:code) [1-9]", r"(?i)x(?-i:ABC)y", r"(ab|cd)+e?F", r"[K]illed|Bus error",
]).flatmap(lambda p: st.tuples(st.just(p), st.from_regex(re.compile(p, re.M)))))
def test_every_match_holds_a_cased_needle_as_written(case) -> None:
    pattern, text = case
    found = needles_of([pattern], re.M, cased=True)
    assert found is not None, pattern
    if re.compile(pattern, re.M).search(text):
        assert holds_cased_needle(found, text), (pattern, text)


def _server_patterns() -> list[re.Pattern[str]]:
    return [pat for _, pat in KNOW.servers]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(range(len(KNOW.servers))).flatmap(
    lambda i: st.tuples(st.just(i), st.from_regex(_compiled(KNOW.servers[i][1])))))
def test_every_match_of_a_server_pattern_holds_one_of_its_needles(case) -> None:
    index, text = case
    name, pattern = KNOW.servers[index]
    found = needles(pattern)
    assert found is not None, name  # every shipped server pattern promises some text
    if pattern.search(text):
        assert any(n in _fold_case(text) for n in found), (name, text)


def test_the_script_prefilter_keeps_every_text_its_patterns_match() -> None:
    """The prefilter that skips scripts naming nothing worth reading is the patterns' needles:
    words cut at a regex's structure would skip matches (``djan?go`` spelled "djan" and lost
    "djago"; a two-letter program such as ``xh`` spelled nothing)."""
    of = needles_of
    assert of([r"\bdjan?go\b"]) == ("dja",)
    assert of([r"\bvite\b", r"[unclosed"]) == ("[unclosed", "vite")  # as _compile reads it
    assert of([r"\bvite\b", r"\d+"]) is None  # a pattern promising nothing: always read
    assert holds_needle(KNOW.prefilter, "xh 127.0.0.1:3000/health")
    assert holds_needle(KNOW.prefilter, "DJANGO-ADMIN RUNSERVER")
    assert not holds_needle(KNOW.prefilter, "ls -la src")


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(KNOW.prefilter_patterns).flatmap(
    lambda p: st.tuples(st.just(p), st.from_regex(re.compile(p, re.I | re.M)))))
def test_every_match_of_a_prefilter_pattern_passes_the_prefilter(case) -> None:
    pattern, text = case
    assert holds_needle(KNOW.prefilter, text), (pattern, text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(
    ["npm", "NPM", "run", "RUN", "dev", "DEV", "Vite", "VİTE", "vıte", "uvicorn", "UVİCORN",
     "ſerve", "serve", "SERVE", "ng", "docker", "up", "-d", "Kelvin-K", "streamlit", "next",
     " ", "  ", "\t", "-", ".", "启"]), max_size=8).map("".join))
def test_server_of_answers_what_the_patterns_answer(command: str) -> None:
    expected = next((name for name, pat in KNOW.servers if pat.search(command)), None)
    assert server_of(command, KNOW) == expected
    assert server_of(command, KNOW) == expected  # and again, from its cache


# -- splitting without the walk ----------------------------------------------------------------

_SHELL_BITS = st.sampled_from(list("ab1 -=&;|>'\"$()#\n\\`{}<\t") + [
    "npm run dev", "(cd x", ")", "2>&1", "<<EOF", "EOF", "then ", "if ", "&&", "||", "$(", " &"])


@settings(max_examples=500, deadline=None)
@given(st.lists(_SHELL_BITS, max_size=14).map("".join))
def test_split_pipelines_skips_the_walk_only_where_the_walk_would_change_nothing(script) -> None:
    from forensics.analysis.shell import _walk, split_pipelines

    def shape(pipes):
        return [(p.text, p.background) for p in pipes]

    assert shape(split_pipelines(script)) == shape(_walk(script))
