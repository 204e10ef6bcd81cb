"""The benchmark's generator: deterministic, readable by every reader, plants where it says.

The benchmark's correctness check (every planted incident found) is only as good as the
manifest, so these tests check the manifest against what the readers actually load.
"""

from __future__ import annotations

import importlib.util
import sys

import orjson
import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
from generate import FORMATS, generate  # noqa: E402

RULES = {"empty-response", "user-resend", "duplicate-launch", "ignored-tool-error",
         "unverified-claim", "retry-loop", "dangling-call", "user-correction",
         "interrupted-turn", "provider-error", "context-compaction"}
READERS = {"opencode-export": "forensics.ingest.opencode_export",
           "claude-code": "forensics.ingest.claude_code", "codex": "forensics.ingest.codex"}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "a"
    manifest = generate(list(FORMATS), 2, 150, out, seed=7)
    return out, manifest


def test_same_seed_writes_the_same_bytes(archive, tmp_path):
    out, manifest = archive
    again = generate(list(FORMATS), 2, 150, tmp_path / "b", seed=7)
    assert again == manifest
    for f in manifest["files"]:
        assert (tmp_path / "b" / f["file"]).read_bytes() == (out / f["file"]).read_bytes()
    other = generate(list(FORMATS), 2, 150, tmp_path / "c", seed=8)
    assert [f["session_id"] for f in other["files"]] != [f["session_id"] for f in
                                                          manifest["files"]]


def test_manifest_lists_every_file_with_its_size(archive):
    out, manifest = archive
    assert manifest["sessions"] == 6
    assert sorted(f["format"] for f in manifest["files"]) == sorted(list(FORMATS) * 2)
    for f in manifest["files"]:
        assert (out / f["file"]).stat().st_size == f["bytes"]
    on_disk = orjson.loads((out / "planted.json").read_bytes())
    assert on_disk["planted"] == manifest["planted"]


def test_every_session_plants_every_rule(archive):
    _, manifest = archive
    for f in manifest["files"]:
        mine = [p for p in manifest["planted"] if p["session_id"] == f["session_id"]]
        assert {p["rule"] for p in mine} == RULES
        for p in mine:
            assert p["file"] == f["file"]
            assert p["anchor"] in p["block"]
        # Each re-send follows an empty reply, recorded as its own empty-response plant.
        resends = sum(p["rule"] == "user-resend" for p in mine)
        empties = sum(p["rule"] == "empty-response" for p in mine)
        assert empties == 2 * resends


def test_long_session_gets_one_plant_set_per_thousand_turns(tmp_path):
    m = generate(["claude-code"], 1, 3000, tmp_path, seed=3)
    (f,) = m["files"]
    assert 3000 <= f["turns"] <= 3300
    rules = [p["rule"] for p in m["planted"]]
    assert rules.count("duplicate-launch") == 3
    assert rules.count("ignored-tool-error") == 3
    assert rules.count("empty-response") == 6


def test_target_mb_adds_sessions_until_reached(tmp_path):
    m = generate(["codex"], 1, 60, tmp_path, seed=3, target_mb=2.0)
    assert m["bytes"] >= 2_000_000
    assert m["sessions"] > 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_reader_loads_generated_sessions_and_finds_the_anchors(archive, fmt):
    if importlib.util.find_spec(READERS[fmt]) is None:
        pytest.skip(f"{READERS[fmt]} not there yet")
    from forensics.ingest import load

    out, manifest = archive
    for f in (x for x in manifest["files"] if x["format"] == fmt):
        (session,) = load(out / f["file"])
        assert session.id == f["session_id"]
        assert session.format == fmt
        assert session.issues == []
        for p in (x for x in manifest["planted"] if x["session_id"] == f["session_id"]):
            # a finding about a call anchors on the call's own record (docs/rules.md)
            turn = session.by_anchor(p["anchor"]) or next(
                (t for t in session.turns for c in getattr(t, "tool_calls", ())
                 if c.anchor == p["anchor"]), None)
            assert turn is not None, p
            if p["rule"] == "user-resend":
                assert turn.kind == "user"
            elif p["rule"] == "duplicate-launch":
                assert any("uvicorn" in (c.command or "") for c in turn.tool_calls)
            elif p["rule"] == "ignored-tool-error":
                (call,) = turn.tool_calls
                assert call.command == "npm run build"
                assert session.result_for(call).exit_code == 2
            elif p["rule"] == "retry-loop":
                (call,) = turn.tool_calls
                assert call.command.startswith("cargo build -p ")
                assert session.result_for(call).exit_code == 101
            elif p["rule"] == "dangling-call":
                # Codex: the next reply's call joins the same assistant turn (no output between)
                call = next(c for c in turn.tool_calls if c.anchor == p["anchor"]
                            or len(turn.tool_calls) == 1)
                assert call.command.startswith("npx eslint ")
                result = session.result_for(call)
                # opencode keeps the part, left running; the JSONL formats have no result line
                assert result is None or not result.output
            elif p["rule"] == "user-correction":
                assert turn.kind == "user" and turn.text.startswith("That's wrong")
            elif p["rule"] == "unverified-claim":
                assert turn.kind == "assistant" and "All tests pass." in turn.text
            elif p["rule"] == "interrupted-turn":
                # the stop's own record: opencode's aborted message, the interrupt line, the
                # Codex turn_aborted line
                assert (turn.kind == "assistant" and turn.aborted) if fmt == "opencode-export" \
                    else turn.event in ("interrupt", "abort")
            elif p["rule"] == "provider-error":
                assert (turn.kind == "assistant" and turn.error is not None) if fmt != "codex" \
                    else turn.event == "api_error"
            elif p["rule"] == "context-compaction":
                assert turn.kind == "event" and turn.event == "compaction"
            elif fmt != "codex":  # Codex has no assistant line for an empty turn
                assert turn.kind == "assistant"
                assert not turn.visible


def test_planted_check_counts_found_exact_and_extra():
    from run import check_planted

    manifest = {"planted": [
        {"file": "a.jsonl", "session_id": "s1", "rule": "empty-response", "anchor": "L5",
         "block": ["L4", "L5", "L6"]},
        {"file": "a.jsonl", "session_id": "s1", "rule": "user-resend", "anchor": "L9",
         "block": ["L8", "L9"]},
        {"file": "a.jsonl", "session_id": "s1", "rule": "duplicate-launch", "anchor": "L20",
         "block": ["L20"]},
    ]}
    incidents = [
        {"session_id": "s1", "rule": "empty-response", "anchor": "L5", "source": "a.jsonl"},
        {"session_id": "s1", "rule": "user-resend", "anchor": "L8", "source": "a.jsonl"},
        {"session_id": "s1", "rule": "user-resend", "anchor": "L30", "source": "a.jsonl"},
        {"session_id": "s2", "rule": "duplicate-launch", "anchor": "L20", "source": "b.jsonl"},
    ]
    table = check_planted(manifest, incidents, ["empty-response", "user-resend",
                                                "duplicate-launch"])
    assert table["empty-response"] == {"planted": 1, "found": 1, "exact": 1, "extra": 0,
                                       "missed": []}
    assert (table["user-resend"]["found"], table["user-resend"]["exact"],
            table["user-resend"]["extra"]) == (1, 0, 1)
    assert table["user-resend"]["extra_examples"] == ["a.jsonl L30"]
    # The right anchor in another session neither finds the plant nor hides as found.
    assert (table["duplicate-launch"]["found"], table["duplicate-launch"]["extra"]) == (0, 1)
    assert table["duplicate-launch"]["missed"] == ["a.jsonl L20"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_scan_finds_every_plant_at_its_anchor_and_nothing_else(archive, fmt):
    """The benchmark's own check on a small archive: the real scan, every rule, every plant."""
    from forensics.config import Config
    from forensics.engine import scan_session
    from forensics.ingest import load
    from run import check_planted

    out, manifest = archive
    mine = {"planted": [p for p in manifest["planted"] if p["file"].startswith(
        {"opencode-export": "opencode/", "claude-code": "claude/", "codex": "codex/"}[fmt])]}
    incidents = []
    for f in (x for x in manifest["files"] if x["format"] == fmt):
        (session,) = load(out / f["file"])
        result = scan_session(session)
        assert result.crashes == []
        incidents += [{"session_id": i.session_id, "rule": i.rule, "anchor": i.anchor,
                       "source": i.source} for i in result.incidents]
    table = check_planted(mine, incidents, [r.slug for r in Config().rules()])
    assert {r for r, c in table.items() if c["planted"]} == RULES
    for rule, c in table.items():
        assert (rule, c["found"], c["exact"], c["extra"]) == (rule, c["planted"], c["planted"], 0)


def test_unverified_claim_after_an_earlier_green_run_is_found(tmp_path):
    """A test run went green after the last edit but *before* the failing run the claim
    contradicts: docs/rules.md's "the last run of the check failed and nothing ran it green after
    it", high. FX005's passing-output look-back once started at the last edit and let the
    earlier green output vouch for the claim (5 of 60 plants of the quick bench's archive-60)."""
    import random

    from forensics.engine import scan_session
    from forensics.ingest import load
    from generate import Blobs, ClaudeWriter, Exchange, Planner, Reply

    rng, blobs = random.Random(5), Blobs(5)
    planner = Planner("claude-code", rng, blobs)
    earlier = Exchange("Fix the failing modal test.",
                       [*planner.handled_failure(), Reply(text="The modal test is fixed.")])
    (tmp_path / "claude").mkdir()
    written = ClaudeWriter(rng, blobs).write([earlier, *planner.plant_unverified()], tmp_path,
                                             "claude")
    (plant,) = [p for p in written.planted if p["rule"] == "unverified-claim"]
    (session,) = load(tmp_path / written.file)
    found = [i for i in scan_session(session).incidents if i.rule == "unverified-claim"]
    assert [i.severity for i in found if i.anchor == plant["anchor"]] == ["high"]
