"""A Claude Code family scanned from its folder: each subagent transcript is listed right after
its parent's file and parsed once (the parent's ledger reads it, the walk takes that read), and
the scan finds exactly what scanning each file on its own finds."""

from __future__ import annotations

import multiprocessing
import shutil
import sys
from pathlib import Path

import pytest

from test_ledger import _claude_lines

from forensics.archive import iter_units
from forensics.batch import run_batch
from forensics.engine import scan_session
from forensics.ingest import handover, iter_sessions, load
from forensics.inputs import read_inputs

PARENT = "7c0a1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"
OTHER = "0b1c2d3e-4f50-4a6b-8c7d-8e9f0a1b2c3d"
AGENTS = ("a9f3c1d2e4b5", "b8e2d0c1f3a4")


def _family(root: Path, parent_id: str = PARENT) -> Path:
    """A parent whose two subagents each start a server and leave it running; the parent then
    starts the first one again (a duplicate launch, FX002, known only from the child's file)."""
    folder = root / parent_id / "subagents"
    folder.mkdir(parents=True)
    steps = [("user", "get the api and the worker checked")]
    for n, (agent, port) in enumerate(zip(AGENTS, (8000, 9000))):
        (folder / f"agent-{agent}.jsonl").write_text(_claude_lines(parent_id, [
            ("user", f"start the service on {port} and check it"),
            ("bash", f"nohup uvicorn app:svc{n} --port {port} > svc.log 2>&1 &"),
            ("result", (1, "")),
        ], sidechain=True, agent_id=agent))
        task = len(steps)
        steps += [("task", f"Start service {n}"),
                  ("result", (task, f"Done.\nagentId: {agent} (for resuming to continue this "
                                    "agent's work if needed)"))]
    relaunch = len(steps)
    steps += [("bash", "nohup uvicorn app:svc0 --port 8000 > svc.log 2>&1 &"),
              ("result", (relaunch, ""))]
    (root / f"{parent_id}.jsonl").write_text(_claude_lines(parent_id, steps, sidechain=False))
    return root


def _findings(sessions) -> list[tuple[str, str, str, str]]:
    out = []
    for s in sessions:
        out.extend((s.source, i.code, i.anchor, i.severity) for i in scan_session(s).incidents)
    return sorted(out)


def _count_parses(monkeypatch) -> dict[str, int]:
    """How many times the Claude Code reader parses each source (in this process)."""
    from forensics.ingest import claude_code

    parses: dict[str, int] = {}
    real = claude_code.read_stream

    def counted(stream, source):
        parses[source] = parses.get(source, 0) + 1
        return real(stream, source)

    monkeypatch.setattr(claude_code, "read_stream", counted)
    return parses


def test_a_parents_subagents_are_listed_right_after_it(tmp_path: Path) -> None:
    root = _family(tmp_path / "project")
    (root / "zz-other.jsonl").write_text(_claude_lines(OTHER, [("user", "hi")], sidechain=False))
    elsewhere = root / PARENT / "tool-results"  # the parent's folder still walked for the rest
    elsewhere.mkdir()
    (elsewhere / "kept.jsonl").write_text(_claude_lines(OTHER[:-4] + "9999", [("user", "x")],
                                                        sidechain=False))
    orphan = root / "no-parent-file" / "subagents"  # no <id>.jsonl beside it: walked as usual
    orphan.mkdir(parents=True)
    (orphan / "agent-c1.jsonl").write_text(_claude_lines(OTHER, [("user", "y")], sidechain=True,
                                                         agent_id="c1c1c1c1"))
    expected = [root / f"{PARENT}.jsonl",
                *(root / PARENT / "subagents" / f"agent-{a}.jsonl" for a in AGENTS),
                root / "zz-other.jsonl", elsewhere / "kept.jsonl", orphan / "agent-c1.jsonl"]
    scanned = [Path(s.source) for s in iter_sessions(root)]
    listed = [Path(u.label) for u in iter_units([root], [])]
    assert scanned == expected  # each file once, the family together
    assert listed == expected


def test_a_linked_subagents_folder_stays_unread_as_the_walk_leaves_it(tmp_path: Path) -> None:
    elsewhere = _family(tmp_path / "elsewhere")
    root = tmp_path / "project"
    (root / PARENT).mkdir(parents=True)
    shutil.copy(elsewhere / f"{PARENT}.jsonl", root)
    (root / PARENT / "subagents").symlink_to(elsewhere / PARENT / "subagents")
    assert [Path(s.source) for s in iter_sessions(root)] == [root / f"{PARENT}.jsonl"]
    assert [Path(u.label) for u in iter_units([root], [])] == [root / f"{PARENT}.jsonl"]


def test_a_family_scanned_from_its_folder_parses_each_child_once(tmp_path: Path,
                                                                 monkeypatch) -> None:
    root = _family(tmp_path / "project")
    files = sorted(root.rglob("*.jsonl"))
    alone = _findings(s for f in files for s in load(f))  # each file scanned on its own
    parent = load(root / f"{PARENT}.jsonl")[0]
    handover.forget()
    parses = _count_parses(monkeypatch)
    together = _findings(read_inputs([str(root)], errors=[]))
    assert together == alone
    [relaunch] = [f for f in together if f[1] == "FX002"]
    assert relaunch[0] == str(root / f"{PARENT}.jsonl")
    assert relaunch[2:] == (parent.turn(6).anchor, "medium")  # the parent's own relaunch
    assert parses == {str(f): 1 for f in files}
    assert not handover.holds(str(files[0]))


def test_a_childs_ledger_is_built_once_for_its_parent_and_its_own_scan(tmp_path: Path,
                                                                      monkeypatch) -> None:
    from forensics.analysis import ledger

    root = _family(tmp_path / "project")
    walks: dict[str, int] = {}
    real = ledger.Tracker.run

    def counted(self):
        walks[self.session.source] = walks.get(self.session.source, 0) + 1
        return real(self)

    monkeypatch.setattr(ledger.Tracker, "run", counted)
    found = _findings(read_inputs([str(root)], errors=[]))
    assert [f[1] for f in found] == ["FX002"]
    assert walks == {str(f): 1 for f in root.rglob("*.jsonl")}


def test_a_child_changed_after_its_parent_read_it_is_parsed_again(tmp_path: Path) -> None:
    root = _family(tmp_path / "project")
    child = root / PARENT / "subagents" / f"agent-{AGENTS[0]}.jsonl"
    [read] = handover.read_child(str(root / f"{PARENT}.jsonl"), child)
    grown = child.read_bytes() + child.read_bytes().splitlines(keepends=True)[0]
    assert handover.holds(str(child))
    assert handover.take(str(child), grown, None) is None
    assert not handover.holds(str(child))  # handed over at most once, even when refused
    handover.read_child(str(root / f"{PARENT}.jsonl"), child)
    assert handover.take(str(child), child.read_bytes(), "codex") is None  # another reader
    handover.read_child(str(root / f"{PARENT}.jsonl"), child)
    assert handover.take(str(child), child.read_bytes(), None) == [read]
    handover.forget()


def test_only_the_family_being_scanned_is_kept(tmp_path: Path) -> None:
    first = _family(tmp_path / "one")
    second = _family(tmp_path / "two", OTHER)
    child = first / PARENT / "subagents" / f"agent-{AGENTS[0]}.jsonl"
    other_child = second / OTHER / "subagents" / f"agent-{AGENTS[0]}.jsonl"
    sibling = first / PARENT / "subagents" / f"agent-{AGENTS[1]}.jsonl"
    handover.read_child(str(first / f"{PARENT}.jsonl"), child)
    handover.read_child(str(child), sibling)  # a child's own child: the same family
    assert handover.holds(str(child)) and handover.holds(str(sibling))
    handover.read_child(str(second / f"{OTHER}.jsonl"), other_child)
    assert not handover.holds(str(child)) and not handover.holds(str(sibling))
    assert handover.holds(str(other_child))
    list(read_inputs([str(other_child)], errors=[]))
    assert not handover.holds(str(other_child))  # a finished walk keeps nothing


@pytest.mark.parametrize(("earlier", "label", "same"), [
    ("p/s1.jsonl", "p/s1/subagents/agent-a.jsonl", True),  # the parent, then its child
    ("p/s1/subagents/agent-a.jsonl", "p/s1/subagents/agent-b.jsonl", True),  # siblings
    ("p/s1.jsonl", "p/s2/subagents/agent-a.jsonl", False),  # another session's child
    ("p/s1.jsonl", "p/s2.jsonl", False),
    ("p/s1.jsonl", "p/s1/notes/agent-a.jsonl", False),
])
def test_same_family(earlier: str, label: str, same: bool) -> None:
    assert handover.same_family(earlier, label) is same


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork")
def test_batch_workers_keep_a_family_together(tmp_path: Path, monkeypatch) -> None:
    """Chunks never split a family between workers, so each child is parsed once however many
    workers run; the tables are those of a single-process batch."""
    import polars as pl

    from forensics.ingest import claude_code

    src = tmp_path / "src"
    for n in range(6):
        _family(src / f"project-{n}", f"{n:08x}-3d4e-4f50-8a6b-7c8d9e0f1a2b")
    one = run_batch([src], tmp_path / "one", workers=1, progress=False)
    log = tmp_path / "parses.log"
    real = claude_code.read_stream

    def logged(stream, source):
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(source + "\n")
        return real(stream, source)

    import forensics.batch as batch

    monkeypatch.setattr(batch, "_pool_context", lambda: multiprocessing.get_context("fork"))
    monkeypatch.setattr(claude_code, "read_stream", logged)
    two = run_batch([src], tmp_path / "two", workers=2, progress=False)
    parsed = log.read_text(encoding="utf-8").split()
    assert len(parsed) == len(set(parsed)) == 18  # 6 parents, 12 children, once each
    assert (two.sessions, two.incidents) == (one.sessions, one.incidents) == (18, 6)
    for table in ("incidents.parquet", "sessions.parquet"):
        a, b = (pl.read_parquet(tmp_path / d / table) for d in ("one", "two"))
        assert a.sort(a.columns).equals(b.sort(b.columns)), table
    shutil.rmtree(src)


def test_a_chunk_grows_for_a_family_on_disk_only_and_up_to_its_cap(monkeypatch) -> None:
    import forensics.batch as batch
    from forensics.archive import Blob, Unit

    def disk(label: str) -> Unit:
        return Unit(label=label, kind="file", blob=Blob("disk", label))

    parent, child = "p/s1.jsonl", "p/s1/subagents/agent-a.jsonl"
    chunk = [(disk(parent), None)]
    assert batch._joins_family(chunk, disk(child))
    assert not batch._joins_family(chunk, disk("p/s2.jsonl"))
    member = Unit(label=f"a.zip!{child}", kind="file", blob=Blob("zip", "a.zip", child))
    assert not batch._joins_family([(Unit(label=f"a.zip!{parent}", kind="file",
                                          blob=Blob("zip", "a.zip", parent)), None)], member)
    monkeypatch.setattr(batch, "FAMILY_CHUNK", 2)
    assert not batch._joins_family(chunk * 2, disk(child))  # a huge family is split


def test_the_notebook_reads_a_family_once_and_keeps_nothing_after(tmp_path: Path,
                                                                   monkeypatch) -> None:
    import forensics

    root = _family(tmp_path / "project")
    parses = _count_parses(monkeypatch)
    incidents = forensics.read_incidents(root)
    assert incidents["code"].to_list() == ["FX002"]
    assert sorted(parses.values()) == [1, 1, 1]
    assert not any(handover.holds(str(f)) for f in root.rglob("*.jsonl"))
