"""FX002 on the seed re-creations: exactly the planted relaunch, and nothing after a kill."""

from __future__ import annotations

import json

from conftest import FIXTURES

from forensics.ingest import load
from forensics.resources import sample_session
from forensics.rules import registry

SEEDS = FIXTURES / "seeds"
ANCHORS = json.loads((SEEDS / "anchors.json").read_text(encoding="utf-8"))


def _findings(path):
    (session,) = load(path)
    return session, list(registry()["FX002"].run(session))


def test_seed_000_flags_only_the_relaunch_after_ready() -> None:
    names = ANCHORS["seed_000_duplicate_launch"]
    session, findings = _findings(SEEDS / "seed_000_duplicate_launch.json")
    assert [(f.anchor, f.severity) for f in findings] == [(names["relaunch"], "high")]
    evidence = {session.turn(o).anchor for o in findings[0].evidence}
    assert {names["launch_3"], names["ready"]} <= evidence
    assert "(port 30000)" in findings[0].message and names["launch_3"] in findings[0].message
    assert "killed at once" in findings[0].message and '"Ready."' in findings[0].severity_reason
    flagged = {f.anchor for f in findings}
    assert names["launch_2"] not in flagged and names["launch_3"] not in flagged


def test_seed_001_has_no_launches() -> None:
    _, findings = _findings(SEEDS / "seed_001_empty_resend.json")
    assert findings == []


def test_sample_session_relaunch_moved_to_another_port() -> None:
    session, findings = _findings(sample_session())
    assert [f.severity for f in findings] == ["high"]
    assert "came up on 5174" in findings[0].message
