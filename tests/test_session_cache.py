"""The parse caches live for one session: a scan forgets the previous session's texts, and
what a session's scan finds does not depend on what was scanned before it."""

from __future__ import annotations

from pathlib import Path

import forensics
from forensics.analysis import commands, session_cache, shell
from forensics.engine import scan_session
from forensics.rules import _facts

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLE = Path(forensics.__file__).parent / "samples" / "sample-session.json"
DEV_SERVER = FIXTURES / "examples" / "example_dev_server.jsonl"
ONLY_IN_SAMPLE = "grep -rn 'priceCents' src --include=*.tsx"  # a pipeline the ledger parses


def _one(path: Path):
    (session,) = forensics.load(path)
    return session


def _summary(result) -> list[tuple]:
    return [(i.code, i.anchor, i.severity, i.message, tuple(i.evidence)) for i in result.incidents]


def test_the_next_scan_forgets_the_last_sessions_commands() -> None:
    scan_session(_one(SAMPLE))
    before = commands.parse.cache_info()
    commands.parse(ONLY_IN_SAMPLE)
    assert commands.parse.cache_info().hits == before.hits + 1  # kept while its session lasts

    scan_session(_one(DEV_SERVER))
    before = commands.parse.cache_info()
    commands.parse(ONLY_IN_SAMPLE)
    assert commands.parse.cache_info().misses == before.misses + 1


def test_findings_do_not_depend_on_the_session_scanned_before() -> None:
    session_cache.new_session()
    alone = _summary(scan_session(_one(SAMPLE)))
    scan_session(_one(DEV_SERVER))
    after_another = _summary(scan_session(_one(SAMPLE)))
    assert after_another == alone
    assert {code for code, *_ in alone} >= {"FX002", "FX003"}  # the rules that parse commands


def test_every_text_cache_is_emptied() -> None:
    for cached in (commands.parse, commands.parse_script, shell.split_commands,
                   _facts.normalized_command):
        assert cached in session_cache._CACHED
    scan_session(_one(SAMPLE))
    assert commands.parse.cache_info().currsize > 0
    session_cache.new_session()
    assert all(c.cache_info().currsize == 0 for c in session_cache._CACHED)
