"""The one phrase-list compiler (``forensics.analysis.phrases``) every rule and the ledger use."""

from __future__ import annotations

import pickle
import re

import pytest

from forensics.analysis.phrases import (
    cached_phrase_pattern,
    compile_later,
    compiled_now,
    phrase_pattern,
)


def test_ascii_phrases_match_whole_words_in_any_case() -> None:
    pattern = phrase_pattern(["fail", "tests pass"])
    assert pattern.search("It will FAIL.") and pattern.search("All Tests Pass")
    assert not pattern.search("a failure") and not pattern.search("retests passed")


def test_a_space_stands_for_any_white_space() -> None:
    assert phrase_pattern(["tests pass"]).search("the tests\n  pass")


def test_a_phrase_ending_in_punctuation_matches_at_the_end_of_a_sentence() -> None:
    # the boundary goes only after a last letter or digit: "complete!" at the end of a reply
    assert phrase_pattern(["complete!"]).search("Task complete!")
    assert phrase_pattern(["may "]).search("this may help")


def test_prefix_phrases_match_the_start_of_longer_words() -> None:
    pattern = phrase_pattern(["fail"], prefix=True)
    assert pattern.search("it failed") and not pattern.search("unfailing")


def test_phrases_in_other_scripts_match_anywhere() -> None:
    assert phrase_pattern(["测试通过"]).search("所有测试通过了")
    assert phrase_pattern(["テスト成功"]).search("ビルドとテスト成功しました")


def test_anchored_phrases_match_only_at_the_start() -> None:
    pattern = phrase_pattern(["no", "that's wrong"], anchored=True)
    assert pattern.match("no, the port is 8080") and pattern.match("That's wrong, it is up")
    assert not pattern.search("I said no")


def test_longest_phrase_wins_and_an_empty_list_is_none() -> None:
    assert phrase_pattern(["is up", "is up and running"]).search("it is up and running").group(
        0) == "is up and running"
    assert phrase_pattern([]) is None and phrase_pattern(["  "]) is None
    assert cached_phrase_pattern(("a b",)) is cached_phrase_pattern(("a b",))


def test_a_pattern_compiled_later_answers_as_the_compiled_one() -> None:
    text = "Error: port 8000 taken\nerror: again"
    later, now = compile_later(r"^error: (\w+)", re.I | re.M), re.compile(r"^error: (\w+)", re.I | re.M)
    assert "search" not in vars(later), "nothing is compiled before the first use"
    assert [m.group(1) for m in later.finditer(text)] == ["port", "again"]
    assert later.findall(text) == now.findall(text) and later.sub("E", text) == now.sub("E", text)
    assert later.search(text).span() == now.search(text).span() and not later.match("x error:")
    assert (later.pattern, later.flags, later.groups) == (now.pattern, now.flags, now.groups)
    assert later == compile_later(r"^error: (\w+)", re.I | re.M) != compile_later("error")
    again = pickle.loads(pickle.dumps(later))  # batch workers receive parameter objects
    assert again == later and again.findall(text) == ["port", "again"]


def test_a_bad_pattern_fails_at_first_use_or_at_once_inside_compiled_now() -> None:
    later = compile_later("(unclosed")
    with pytest.raises(re.error):
        later.search("x")
    with compiled_now(), pytest.raises(re.error, match="missing \\)"):
        compile_later("(unclosed")
    literal = compile_later("(unclosed", literal_if_invalid=True)  # the ledger's entries
    assert literal.search("a (unclosed one") and not literal.search("unclosed")
    with compiled_now():
        assert compile_later("(unclosed", literal_if_invalid=True).search("(unclosed")


def test_lazy_patterns_hash_and_compare_by_what_they_are_made_of() -> None:
    # pattern lists are cache keys (``_facts._any_of``): equal makings must be one key, before
    # and after the first use, and after a round trip through pickle (to batch workers)
    a, b = compile_later(r"\bpytest\b", re.I), compile_later(r"\bpytest\b", re.I)
    assert a == b and hash(a) == hash(b)
    assert a.search("run PYTEST now")  # compiled now; its hash must not move
    assert hash(a) == hash(b) and len({a, b, pickle.loads(pickle.dumps(b))}) == 1
    assert compile_later(r"\bpytest\b") != a and compile_later(r"\bjest\b", re.I) != a
    assert {(a, b): 1}[(compile_later(r"\bpytest\b", re.I),) * 2] == 1
