"""`forensics eval` and `forensics label`: matching findings to labels, scoring, gates.

Label files are written by the tests next to copies of our own seed fixtures, whose findings
are known (tests/test_seed_incidents.py holds them): seed 000 gives duplicate-launch and
ignored-tool-error at the relaunch and empty-response at the next message; seed 001 gives
empty-response and user-resend.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import orjson
import pytest
from conftest import FIXTURES
from typer.testing import CliRunner

from forensics.cli import app
from forensics.evaluation import LabelError, evaluate, load_labels, score_case
from forensics.findings import Incident

SEEDS = FIXTURES / "seeds"
A = json.loads((SEEDS / "anchors.json").read_text())
S0, S1 = A["seed_000_duplicate_launch"], A["seed_001_empty_resend"]
CORE = ["empty-response", "duplicate-launch", "ignored-tool-error", "user-resend"]


def write_label(folder, seed: str, *, rules=CORE, incidents=(), traps=()):
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(SEEDS / f"{seed}.json", folder / "session.json")
    doc = {"case": folder.name, "input": "session.json", "format": "opencode-export",
           "rules": list(rules), "incidents": list(incidents), "traps": list(traps)}
    (folder / "labels.json").write_text(json.dumps(doc))
    return folder / "labels.json"


def inc(rule, *anchors, confidence="high", note="n"):
    return {"rule": rule, "anchors": list(anchors), "severity": "high",
            "confidence": confidence, "note": note}


def by_rule(ev):
    return {r.rule: r for r in ev.rules}


def test_every_finding_labelled_scores_perfect(tmp_path):
    write_label(tmp_path / "s0", "seed_000_duplicate_launch", incidents=[
        inc("duplicate-launch", S0["relaunch"]), inc("ignored-tool-error", S0["relaunch"]),
        inc("empty-response", S0["empty"])])
    ev = evaluate(load_labels([tmp_path]))
    r = by_rule(ev)
    assert (r["duplicate-launch"].tp, r["duplicate-launch"].fp, r["duplicate-launch"].fn) == \
        (1, 0, 0)
    assert r["empty-response"].f1 == 1.0
    # user-resend is measured (named in rules) but has neither findings nor incidents
    assert r["user-resend"].measured and r["user-resend"].f1 is None
    assert (ev.total.tp, ev.total.fp, ev.total.fn) == (3, 0, 0)
    assert not ev.misses and not ev.false_alarms


def test_unlabelled_finding_is_false_alarm_named_after_its_trap(tmp_path):
    write_label(tmp_path / "s0", "seed_000_duplicate_launch",
                incidents=[inc("empty-response", S0["empty"])],
                traps=[{"rule": "ignored-tool-error", "anchors": [S0["relaunch"]],
                        "note": "the relaunch's failure is dealt with"}])
    ev = evaluate(load_labels([tmp_path / "s0" / "labels.json"]))
    fa = {f.rule: f for f in ev.false_alarms}
    assert set(fa) == {"duplicate-launch", "ignored-tool-error"}
    assert fa["ignored-tool-error"].anchor == S0["relaunch"]
    assert fa["ignored-tool-error"].trap == "the relaunch's failure is dealt with"
    assert fa["duplicate-launch"].trap is None
    assert by_rule(ev)["duplicate-launch"].fp_per_10 == 10.0  # one false alarm in one session


def test_missed_incident_and_any_anchor_of_an_incident_matches(tmp_path):
    # the resend incident accepts the empty reply's anchor too; a second incident is missed
    write_label(tmp_path / "s1", "seed_001_empty_resend", rules=["user-resend"], incidents=[
        inc("user-resend", "msg_not_in_session", S1["resend"]),
        inc("user-resend", S1["question"], note="the labeller saw a second one")])
    ev = evaluate(load_labels([tmp_path]))
    r = by_rule(ev)["user-resend"]
    assert (r.tp, r.fp, r.fn) == (1, 0, 1)
    assert r.precision == 1.0 and r.recall == 0.5
    assert [(m.anchor, m.note) for m in ev.misses] == [(S1["question"],
                                                        "the labeller saw a second one")]


def test_rules_field_limits_what_a_file_measures(tmp_path):
    # only empty-response is named: seed 001's user-resend finding counts neither way
    write_label(tmp_path / "s1", "seed_001_empty_resend", rules=["empty-response"],
                incidents=[inc("empty-response", S1["empty"])])
    ev = evaluate(load_labels([tmp_path]))
    r = by_rule(ev)
    assert not r["user-resend"].measured
    assert r["user-resend"].fp == 0 and r["user-resend"].fp_per_10 is None
    assert r["empty-response"].sessions == 1 and r["empty-response"].tp == 1
    from forensics.evaluation import table_rows

    rows = {row[0]: row for row in table_rows(ev)}
    assert rows["FX004 user-resend"][1] == "not measured"  # never shown as perfect


def test_low_confidence_is_optional_unless_include_low(tmp_path):
    write_label(tmp_path / "s1", "seed_001_empty_resend", rules=["user-resend", "empty-response"],
                incidents=[inc("user-resend", S1["resend"], confidence="low"),
                           inc("empty-response", S1["question"], confidence="low")])
    labels = load_labels([tmp_path])
    ev = evaluate(labels)
    r = by_rule(ev)
    # the matched low incident counts neither way; the missed one is no miss
    assert (r["user-resend"].tp, r["user-resend"].fp, r["user-resend"].fn) == (0, 0, 0)
    assert r["user-resend"].optional == 1
    # empty-response's finding (the empty reply) matches no incident: a false alarm either way
    assert (r["empty-response"].tp, r["empty-response"].fp, r["empty-response"].fn) == (0, 1, 0)
    ev = evaluate(labels, include_low=True)
    r = by_rule(ev)
    assert (r["user-resend"].tp, r["user-resend"].fn) == (1, 0)
    assert (r["empty-response"].fp, r["empty-response"].fn) == (1, 1)


def fake(rule, anchor, turn=1):
    return Incident(rule=rule, code="FX000", title="t", severity="high", severity_reason="r",
                    session_id="s", source="f", agent="a", turn=turn, anchor=anchor,
                    evidence=[], evidence_turns=[], message="m", fingerprint="x")


def test_one_finding_per_incident_and_maximum_matching():
    from forensics.evaluation import LabelFile

    label = LabelFile.model_validate({
        "case": "c", "input": "x", "rules": ["user-resend"],
        "incidents": [inc("user-resend", "a", "b"), inc("user-resend", "a")]})
    # finding "a" could take either incident; "b" only the first: both must match
    score = score_case(label, [fake("user-resend", "a"), fake("user-resend", "b", 2)])
    assert score.tp["user-resend"] == 2 and not score.false_alarms and not score.misses
    # two findings on one incident: the second is a false alarm
    label1 = LabelFile.model_validate({"case": "c", "input": "x", "rules": ["user-resend"],
                                       "incidents": [inc("user-resend", "a", "b")]})
    score = score_case(label1, [fake("user-resend", "a"), fake("user-resend", "b", 2)])
    assert score.tp["user-resend"] == 1
    assert [f.anchor for f in score.false_alarms] == ["b"]


def test_gates_and_exit_status(tmp_path):
    write_label(tmp_path / "s0", "seed_000_duplicate_launch",
                incidents=[inc("empty-response", S0["empty"])])
    runner = CliRunner()
    ok = runner.invoke(app, ["eval", str(tmp_path)])
    assert ok.exit_code == 0, ok.output
    assert "FX002 duplicate-launch" in ok.output and "False alarms (2)" in ok.output
    gated = runner.invoke(app, ["eval", str(tmp_path), "--max-fp-per-10", "5"])
    assert gated.exit_code == 1
    assert "duplicate-launch: 10.00 false alarms per 10 sessions > 5" in gated.output
    assert runner.invoke(app, ["eval", str(tmp_path), "--min-f1", "0.5"]).exit_code == 1
    passes = runner.invoke(app, ["eval", str(tmp_path), "--select", "FX001", "--min-f1", "1"])
    assert passes.exit_code == 0, passes.output
    doc = orjson.loads(runner.invoke(app, ["eval", str(tmp_path), "-f", "json"]).stdout)
    rules = {r["rule"]: r for r in doc["rules"]}
    assert rules["duplicate-launch"]["fp"] == 1 and rules["empty-response"]["tp"] == 1
    assert {f["rule"] for f in doc["false_alarms"]} == {"duplicate-launch", "ignored-tool-error"}


def test_bad_label_files_name_the_file(tmp_path):
    bad = tmp_path / "labels.json"
    bad.write_text('{"case": "x",\n "input": ')
    with pytest.raises(LabelError, match=r"labels.json:2: not valid JSON"):
        load_labels([bad])
    bad.write_text('{"case": "x", "input": "y"}')
    with pytest.raises(LabelError, match="labels.json: rules: Field required"):
        load_labels([bad])
    res = CliRunner().invoke(app, ["eval", str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and "no such file or folder" in res.output


def test_missing_session_is_reported_and_the_rest_measured(tmp_path):
    write_label(tmp_path / "s0", "seed_000_duplicate_launch",
                incidents=[inc("empty-response", S0["empty"])])
    gone = write_label(tmp_path / "s1", "seed_001_empty_resend")
    (gone.parent / "session.json").unlink()
    ev = evaluate(load_labels([tmp_path]))
    assert len(ev.cases) == 1 and by_rule(ev)["empty-response"].tp == 1
    assert len(ev.errors) == 1 and "s1" in ev.errors[0] and "session.json" in ev.errors[0]


def test_label_writes_candidates_that_eval_reads_back(tmp_path):
    shutil.copy(SEEDS / "seed_001_empty_resend.json", tmp_path / "session.json")
    out = tmp_path / "labels" / "s1" / "labels.json"
    res = CliRunner().invoke(app, ["label", str(tmp_path / "session.json"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    doc = orjson.loads(out.read_bytes())
    assert doc["input"] == "../../session.json" and doc["format"] == "opencode-export"
    assert [(i["rule"], i["anchors"]) for i in doc["incidents"]] == [
        ("empty-response", [S1["empty"]]), ("user-resend", [S1["resend"]])]
    assert all(i["note"].startswith("UNREVIEWED") for i in doc["incidents"])
    ev = evaluate(load_labels([out]))  # unreviewed candidates: every finding matches
    assert (ev.total.tp, ev.total.fp, ev.total.fn) == (2, 0, 0)


def test_label_redacts_secrets_in_candidate_notes(tmp_path):
    from forensics.evaluation import label_document

    class R:  # the shape label_document reads
        def __init__(self, incident):
            self.incidents = [incident]
            self.session = type("S", (), {"format": "codex"})()

    key = "sk-ant-api03-" + "A1b2C3d4" * 5
    found = replace(fake("user-resend", "L3"), message=f"resent {key}")
    doc = label_document(tmp_path / "x.jsonl", [R(found)], relative_to=tmp_path, rules=CORE)
    assert key not in doc["incidents"][0]["note"]
    assert "[REDACTED:anthropic-key]" in doc["incidents"][0]["note"]
