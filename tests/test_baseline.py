"""Baselines: ``forensics baseline`` then ``scan --baseline`` shows only new findings, and the
fingerprints behind it survive an append to the transcript, a move to another folder and a
renumbering of turns."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import orjson
from typer.testing import CliRunner

from conftest import FIXTURES
from forensics.cli import app
from forensics.engine import scan_session
from forensics.ingest import load
from forensics.model import EventTurn, renumber

CLAUDE = FIXTURES / "ingest" / "claude_basic.jsonl"
SEED_000 = FIXTURES / "seeds" / "seed_000_duplicate_launch.json"


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def scan_json(*args) -> dict:
    return orjson.loads(cli("scan", *args, "-f", "json").stdout)


def appended_exchange(path: Path) -> None:
    """Append: the user asks, the reply is empty, the user asks again (a new FX001 + FX004)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    user = json.loads(lines[20])  # "why is the discount applied twice?"
    empty = json.loads(lines[21])  # "(no content)"
    out = []
    for n, (template, text) in enumerate([(user, "and the shipping total?"), (empty, None),
                                         (user, "and the shipping total?")]):
        rec = json.loads(json.dumps(template))
        rec["uuid"] = f"0a1b2c3d-0000-4000-8000-0000000009{n:02d}"
        rec["timestamp"] = f"2026-03-14T10:0{n}:00.000Z"
        if text is not None:
            rec["message"]["content"] = text
        else:
            rec["message"]["id"] = "msg_01Appended"
        out.append(json.dumps(rec))
    path.write_text("\n".join(lines + out) + "\n", encoding="utf-8")


def test_round_trip_append_and_move(tmp_path: Path) -> None:
    session = tmp_path / "a" / "s.jsonl"
    session.parent.mkdir()
    session.write_bytes(CLAUDE.read_bytes())
    base = tmp_path / "forensics-baseline.json"
    made = cli("baseline", session, SEED_000, "-o", base)
    assert made.exit_code == 0 and made.stdout == (
        f"recorded 10 findings of 2 sessions in {base}\n")
    doc = orjson.loads(base.read_bytes())
    assert doc["forensics_baseline"] == 1 and len(doc["findings"]) == 10
    assert {"fingerprint", "code", "rule", "session_id", "anchor"} == set(doc["findings"][0])

    quiet = cli("scan", session, SEED_000, "--baseline", base)
    assert quiet.exit_code == 0
    assert quiet.stdout == ("No incidents in 2 sessions; 10 known in the baseline not shown.\n")

    appended_exchange(session)
    after = scan_json(session, "--baseline", base)
    assert sorted((f["code"], f["anchor"]) for f in after["findings"]) == [
        ("FX001", "0a1b2c3d-0000-4000-8000-000000000901"),
        ("FX004", "0a1b2c3d-0000-4000-8000-000000000902")]
    assert after["baseline"] == {"file": str(base), "hidden": 6}
    assert cli("scan", session, "--baseline", base).exit_code == 1

    moved = tmp_path / "elsewhere" / "copy.jsonl"  # another machine, another path
    moved.parent.mkdir()
    moved.write_bytes(CLAUDE.read_bytes())
    assert scan_json(moved, "--baseline", base)["findings"] == []


def test_fingerprints_ignore_turn_ordinals() -> None:
    (session,) = load(CLAUDE)
    first = scan_session(session).incidents
    before = {(i.code, i.anchor): i.fingerprint for i in first}
    shifted = copy.deepcopy(session)
    shifted.turns.insert(0, EventTurn(ordinal=0, anchor="extra", event="other", text="x"))
    renumber(shifted.turns)
    after = scan_session(shifted).incidents
    assert [i.turn for i in after] == [i.turn + 1 for i in first]  # every ordinal moved
    assert {(i.code, i.anchor): i.fingerprint for i in after} == before


def test_fingerprint_follows_the_record_content() -> None:
    (session,) = load(CLAUDE)
    first = scan_session(session).incidents
    edited = copy.deepcopy(session)
    target = next(i for i in first if i.code == "FX004")
    turn = edited.turns[target.turn - 1]
    edited.turns[target.turn - 1] = replace(turn, time=(turn.time or 0) + 1)
    again = {(i.code, i.anchor): i.fingerprint for i in scan_session(edited).incidents}
    assert again[(target.code, target.anchor)] != target.fingerprint


def test_a_file_that_is_not_a_baseline(tmp_path: Path) -> None:
    bad = tmp_path / "b.json"
    bad.write_text('{"findings": 3}', encoding="utf-8")
    out = cli("scan", CLAUDE, "--baseline", bad)
    assert out.exit_code == 2 and f"{bad}: not a forensics baseline" in out.stderr
    missing = cli("scan", CLAUDE, "--baseline", tmp_path / "none.json")
    assert missing.exit_code == 2 and "none.json" in missing.stderr
