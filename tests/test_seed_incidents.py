"""The two seed incidents and the shipped sample yield exactly the findings the write-ups describe."""

from __future__ import annotations

import orjson
import pytest

from conftest import FIXTURES
from forensics.engine import scan_session
from forensics.ingest import load
from forensics.resources import sample_session

SEEDS = FIXTURES / "seeds"
ANCHORS = orjson.loads((SEEDS / "anchors.json").read_bytes())

EXPECTED = {
    "seed_000_duplicate_launch": [
        ("duplicate-launch", "relaunch", "high"),
        ("ignored-tool-error", "relaunch", "high"),
        ("empty-response", "empty", "high"),
        ("user-correction", "correction", "medium"),
    ],
    "seed_001_empty_resend": [
        ("empty-response", "empty", "high"),
        ("user-resend", "resend", "high"),
    ],
    "sample_session": [
        ("ignored-tool-error", "failed_test", "high"),
        ("duplicate-launch", "relaunch", "high"),
        ("empty-response", "empty", "high"),
        ("user-resend", "resend", "high"),
    ],
}


def _path(name: str):
    return sample_session() if name == "sample_session" else SEEDS / f"{name}.json"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_exactly_the_described_incidents(name: str) -> None:
    (session,) = load(_path(name))
    result = scan_session(session)
    anchors = ANCHORS[name]
    got = sorted((i.rule, i.anchor, i.severity) for i in result.incidents)
    want = sorted((rule, anchors[key], sev) for rule, key, sev in EXPECTED[name])
    assert got == want
    assert not result.crashes


def test_seed_000_evidence_tells_the_story() -> None:
    (session,) = load(_path("seed_000_duplicate_launch"))
    a = ANCHORS["seed_000_duplicate_launch"]
    by_rule = {i.rule: i for i in scan_session(session).incidents}
    dup = by_rule["duplicate-launch"]
    assert dup.evidence[0] == a["launch_3"], "the earlier launch that was still up"
    assert a["ready"] in dup.evidence, "the user's 'Ready.' made it certain"
    assert a["launch_1"] not in dup.evidence and a["launch_2"] not in dup.evidence
    assert "30000" in dup.message
    ignored = by_rule["ignored-tool-error"]
    assert a["empty"] in ignored.evidence and "Killed" in ignored.message
    empty = by_rule["empty-response"]
    assert a["correction"] in empty.evidence
    correction = by_rule["user-correction"]
    assert correction.anchor == a["correction"]
    assert correction.evidence == [a["relaunch"]], "the relaunch the user corrects"
    assert "already worked" in correction.message


def test_seed_001_resend_points_at_the_question() -> None:
    (session,) = load(_path("seed_001_empty_resend"))
    a = ANCHORS["seed_001_empty_resend"]
    resend = next(i for i in scan_session(session).incidents if i.rule == "user-resend")
    assert resend.evidence == [a["question"], a["empty"]]
    assert "verbatim" in resend.message
