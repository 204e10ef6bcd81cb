"""Structural facts of the seed fixtures and the packaged sample that rule tests rely on.

Read with plain orjson, independent of the forensics readers: if a reader changes, these facts
still hold, and if someone edits a fixture by hand (or the generator drifts), this says what broke.
"""

from __future__ import annotations

import importlib.util
import json
import re

import orjson
import pytest

from conftest import FIXTURES, REPO

SEEDS = FIXTURES / "seeds"
SEED_000 = SEEDS / "seed_000_duplicate_launch.json"
SEED_001 = SEEDS / "seed_001_empty_resend.json"
SAMPLE = REPO / "forensics" / "samples" / "sample-session.json"
ANCHORS = orjson.loads((SEEDS / "anchors.json").read_bytes())

ID = {prefix: re.compile(rf"^{prefix}_[0-9a-f]{{12}}[0-9A-Za-z]{{14}}$")
      for prefix in ("ses", "msg", "prt")}
ALL = {"seed_000_duplicate_launch": SEED_000, "seed_001_empty_resend": SEED_001,
       "sample_session": SAMPLE}


def load(path):
    return orjson.loads(path.read_bytes())


def by_id(doc) -> dict[str, dict]:
    return {m["info"]["id"]: m for m in doc["messages"]}


def index_of(doc, message_id: str) -> int:
    return [m["info"]["id"] for m in doc["messages"]].index(message_id)


def tools(message) -> list[dict]:
    return [p for p in message["parts"] if p["type"] == "tool"]


def commands(message) -> list[str]:
    return [p["state"]["input"]["command"] for p in tools(message) if p["tool"] == "bash"]


def text_of(message) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


def is_empty(message) -> bool:
    """Nothing the user could see: no non-blank text, no tool call (reasoning does not count)."""
    return not any(p["type"] == "tool" or (p["type"] == "text" and p["text"].strip())
                   for p in message["parts"])


def bash_parts(doc) -> list[dict]:
    return [p for m in doc["messages"] for p in tools(m) if p["tool"] == "bash"]


# -- shape shared by all three files ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL))
def test_export_shape_ids_and_order(name):
    doc = load(ALL[name])
    info = doc["info"]
    assert set(info) >= {"id", "slug", "version", "projectID", "directory", "title", "time"}
    assert ID["ses"].match(info["id"])
    msg_ids, part_ids, last_user = [], [], None
    for m in doc["messages"]:
        mi = m["info"]
        assert ID["msg"].match(mi["id"]) and mi["sessionID"] == info["id"]
        msg_ids.append(mi["id"])
        if mi["role"] == "user":
            last_user = mi["id"]
            assert [p["type"] for p in m["parts"]] == ["text"]
        else:
            assert mi["role"] == "assistant"
            assert mi["parentID"] == last_user  # one message per step, all answering the prompt
            assert {"modelID", "providerID", "mode", "agent", "path", "cost", "tokens",
                    "finish"} <= set(mi)
            assert mi["time"]["created"] < mi["time"]["completed"]
            kinds = [p["type"] for p in m["parts"]]
            assert kinds[0] == "step-start" and "step-finish" in kinds
            finish = next(p for p in m["parts"] if p["type"] == "step-finish")
            assert finish["reason"] == mi["finish"] and finish["tokens"] == mi["tokens"]
        for p in m["parts"]:
            assert ID["prt"].match(p["id"])
            assert p["messageID"] == mi["id"] and p["sessionID"] == info["id"]
            part_ids.append(p["id"])
            if p["type"] == "tool":
                state = p["state"]
                assert state["status"] == "completed" and p["callID"].startswith("toolu_")
                assert state["time"]["start"] <= state["time"]["end"]
                if p["tool"] == "bash":
                    assert state["metadata"]["output"] == state["output"]
                    assert set(state["input"]) >= {"command", "description"}
    assert msg_ids == sorted(msg_ids) and part_ids == sorted(part_ids)
    assert len(set(part_ids)) == len(part_ids)
    created = [m["info"]["time"]["created"] for m in doc["messages"]]
    assert created == sorted(created)


@pytest.mark.parametrize("name", sorted(ALL))
def test_anchor_file_names_real_messages(name):
    ids = by_id(load(ALL[name]))
    assert set(ANCHORS[name].values()) <= set(ids)


def test_generator_is_deterministic_and_outputs_are_current():
    spec = importlib.util.spec_from_file_location("make_seeds", SEEDS / "make_seeds.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    docs, anchors = module.build_all()
    assert json.loads(json.dumps(anchors)) == ANCHORS
    for name, path in ALL.items():
        rendered = json.dumps(docs[name], indent=2, ensure_ascii=False) + "\n"
        assert rendered == path.read_text(encoding="utf-8"), f"{path.name} is stale: rerun make_seeds.py"


def test_sample_is_what_the_package_points_at():
    from forensics.resources import sample_session

    # installed (CI) or editable: the package's sample is this generator's output
    assert sample_session().read_bytes() == SAMPLE.read_bytes()


# -- seed 000: duplicate launch, killed, empty reply --------------------------------------------------


def test_seed_000_launch_sequence():
    doc, a = load(SEED_000), ANCHORS["seed_000_duplicate_launch"]
    msgs = by_id(doc)
    order = [index_of(doc, a[k]) for k in ("directive", "launch_1", "kill_1", "launch_2", "kill_2",
                                           "launch_3", "ready", "relaunch", "empty", "correction")]
    assert order == sorted(order)
    launches = {k: commands(msgs[a[k]]) for k in ("launch_1", "launch_2", "launch_3", "relaunch")}
    for cmds in launches.values():
        assert len(cmds) == 1
        assert "nohup /root/ml-env/bin/python3 -m sglang.launch_server" in cmds[0]
        assert "> /tmp/sglang_nextn_test.log 2>&1 &" in cmds[0]
    assert "--speculative-eagle-topk 1" in launches["launch_1"][0]
    assert "--mamba-scheduler-strategy" not in launches["launch_1"][0]
    assert "--mamba-scheduler-strategy extra_buffer" in launches["launch_2"][0]
    assert "--speculative-eagle-topk" in launches["launch_2"][0]
    assert "--speculative-eagle-topk" not in launches["launch_3"][0]
    assert launches["relaunch"] == launches["launch_3"]
    # Every sglang launch in the session is one of these four.
    all_launches = [c for c in (p["state"]["input"]["command"] for p in bash_parts(doc))
                    if "sglang.launch_server" in c and "pkill" not in c]
    assert len(all_launches) == 4


def test_seed_000_kills_are_clean_and_nothing_kills_launch_3():
    doc, a = load(SEED_000), ANCHORS["seed_000_duplicate_launch"]
    msgs = by_id(doc)
    for key in ("kill_1", "kill_2"):
        (part,) = tools(msgs[a[key]])
        assert part["state"]["input"]["command"] == "pkill -f sglang.launch_server"
        assert part["state"]["metadata"]["exit"] == 0
    kills = [m["info"]["id"] for m in doc["messages"]
             if any(re.search(r"\b(pkill|kill|killall|fuser)\b", c) for c in commands(m))]
    assert kills == [a["kill_1"], a["kill_2"]]
    # Each failed launch's log check shows the AssertionError that the kill step names.
    for check, kill in (("log_check_1", "kill_1"), ("log_check_2", "kill_2")):
        (part,) = tools(msgs[a[check]])
        assert "AssertionError" in part["state"]["output"]
        assert "AssertionError" in text_of(msgs[a[kill]])
    (launch3,) = tools(msgs[a["launch_3"]])
    assert launch3["state"]["metadata"]["exit"] == 0
    assert "Killed" not in launch3["state"]["output"] and "Error" not in launch3["state"]["output"]


def test_seed_000_relaunch_dies_and_the_next_reply_is_empty():
    doc, a = load(SEED_000), ANCHORS["seed_000_duplicate_launch"]
    msgs = by_id(doc)
    assert text_of(msgs[a["ready"]]) == "Ready."
    assert index_of(doc, a["relaunch"]) == index_of(doc, a["ready"]) + 1
    (part,) = tools(msgs[a["relaunch"]])
    assert part["state"]["metadata"]["exit"] == 0  # backgrounded: the shell itself succeeded
    assert re.search(r"^/bin/bash: line 15: +\d+ Killed +nohup /root/ml-env/bin/python3 -m "
                     r"sglang\.launch_server", part["state"]["output"])
    empty = msgs[a["empty"]]
    assert index_of(doc, a["empty"]) == index_of(doc, a["relaunch"]) + 1
    assert [p["type"] for p in empty["parts"]] == ["step-start", "step-finish"]
    assert empty["info"]["finish"] == "stop" and empty["info"]["tokens"]["output"] == 0
    assert empty["info"]["parentID"] == a["ready"]
    assert index_of(doc, a["correction"]) == index_of(doc, a["empty"]) + 1
    assert text_of(msgs[a["correction"]]) == "No the first launch already worked, it's still ready."
    assert commands(msgs[a["health"]]) == ["curl -s localhost:30000/health -w 'HTTP %{http_code}\\n'"]
    assert "qwen3.5-397b" in tools(msgs[a["models"]])[0]["state"]["output"]


def test_seed_000_context_the_write_up_describes():
    doc, a = load(SEED_000), ANCHORS["seed_000_duplicate_launch"]
    assert 30 <= len(doc["messages"]) <= 50
    said = "\n".join(text_of(m) for m in doc["messages"] if m["info"]["role"] == "assistant")
    for fact in ("2.12.0", "sgl-kernel", "71.6", "flashinfer_cutlass", "flashinfer_cudnn"):
        assert fact in said
    assert text_of(by_id(doc)[a["directive"]]) == "Note be aggressive - we want minimal pcie roundtrips."
    thought = "\n".join(p["text"] for p in by_id(doc)[a["launch_1"]]["parts"] if p["type"] == "reasoning")
    for lever in ("MTP", "NEXTN", "MSCCL++", "SGLANG_ENABLE_SPEC_V2"):
        assert lever in thought


# -- seed 001: reasoning-only reply, verbatim re-send -------------------------------------------------


def test_seed_001_empty_reply_and_resend():
    doc, a = load(SEED_001), ANCHORS["seed_001_empty_resend"]
    msgs = by_id(doc)
    question, empty, resend, answer = (msgs[a[k]] for k in ("question", "empty", "resend", "answer"))
    assert [index_of(doc, a[k]) for k in ("question", "empty", "resend", "answer")] == list(
        range(index_of(doc, a["question"]), index_of(doc, a["question"]) + 4))
    assert "3.4× more cost per GPU" in text_of(question) and "4× B200" in text_of(question)
    assert text_of(resend) == text_of(question)
    assert [p["type"] for p in empty["parts"]] == ["step-start", "reasoning", "step-finish"]
    assert empty["info"]["finish"] == "stop" and empty["info"]["tokens"]["output"] == 0
    body = text_of(answer)
    assert "|---|" in body and "2.2×" in body and "1.2 days" in body and "8.8" in body
    report = text_of(msgs[a["status_report"]])
    for fact in ("14.8 Ktok/s", "100%", "576–590 W", "8.8 days", "22.9 days"):
        assert fact in report


# -- planted incidents only: nothing else that looks like one ----------------------------------------


@pytest.mark.parametrize("name, empties, failures", [
    ("seed_000_duplicate_launch", ["empty"], []),
    ("seed_001_empty_resend", ["empty"], []),
    ("sample_session", ["empty"], ["failed_test"]),
])
def test_only_the_planted_incidents(name, empties, failures):
    doc, a = load(ALL[name]), ANCHORS[name]
    assistants = [m for m in doc["messages"] if m["info"]["role"] == "assistant"]
    assert [m["info"]["id"] for m in assistants if is_empty(m)] == [a[k] for k in empties]
    failed = [m["info"]["id"] for m in assistants
              if any(p["state"]["metadata"].get("exit") not in (None, 0) for p in tools(m))]
    assert failed == [a[k] for k in failures]
    texts = [text_of(m) for m in doc["messages"] if m["info"]["role"] == "user"]
    repeated = {t for t in texts if texts.count(t) > 1}
    expected = {text_of(by_id(doc)[a["resend"]])} if "resend" in a else set()
    assert repeated == expected


# -- the packaged sample ------------------------------------------------------------------------------


def test_sample_holds_one_of_each_core_incident():
    doc, a = load(SAMPLE), ANCHORS["sample_session"]
    msgs = by_id(doc)
    assert 15 <= len(doc["messages"]) <= 25
    launch, relaunch = commands(msgs[a["launch"]]), commands(msgs[a["relaunch"]])
    assert launch == relaunch and "npm run dev" in launch[0]
    assert "Port 5173 is in use, trying another one..." in tools(msgs[a["relaunch"]])[0]["state"]["output"]
    between = doc["messages"][index_of(doc, a["launch"]) + 1:index_of(doc, a["relaunch"])]
    assert not any(re.search(r"\b(kill|pkill|fuser)\b", c) for m in between for c in commands(m))
    (test_run,) = tools(msgs[a["failed_test"]])
    assert test_run["state"]["input"]["command"] == "npm test"
    assert test_run["state"]["metadata"]["exit"] == 1
    claim = msgs[a["success_claim"]]
    assert "All tests pass ✅" in text_of(claim) and not tools(claim)
    assert index_of(doc, a["success_claim"]) == index_of(doc, a["failed_test"]) + 1
    assert doc["messages"][index_of(doc, a["success_claim"]) + 1]["info"]["role"] == "user"
    assert [p["type"] for p in msgs[a["empty"]]["parts"]] == ["step-start", "step-finish"]
    assert text_of(msgs[a["resend"]]) == text_of(msgs[a["request"]])
    assert index_of(doc, a["resend"]) == index_of(doc, a["empty"]) + 1
