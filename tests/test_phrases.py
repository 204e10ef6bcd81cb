"""The one phrase-list compiler (``forensics.analysis.phrases``) every rule and the ledger use."""

from __future__ import annotations

from forensics.analysis.phrases import cached_phrase_pattern, phrase_pattern


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
