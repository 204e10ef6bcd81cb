"""The ledger's indexes give the answers of the passes they replace: which log names a script
holds (Aho-Corasick) and which one a file read opens (by last path part), and the table of
live launches (kept by ``Launch.end``) against every launch's state, turn by turn."""

from __future__ import annotations

import sys

import pytest
from conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.analysis.ledger import Knowledge, Launch, LogNames, State, Tracker
from forensics.ingest import iter_sessions
from forensics.model import Session
from forensics.rules import registry

KNOW = Knowledge.build(**registry()["FX002"].params)

NAME = st.text(alphabet="ab/.\\l", max_size=6)
TEXT = st.text(alphabet="ab/.\\lx ", max_size=30)
STEP = st.one_of(st.tuples(st.just("add"), NAME), st.tuples(st.just("ask"), TEXT))


def _launch(seq: int) -> Launch:
    return Launch(seq=seq, command="c", normalized="c", server=None, port=None,
                  port_explicit=False, background=True, detached=False, weak=False,
                  reconciling=False, cwd=None, turn=1, anchor="a", clock=(1, 0, 1), call_id="x")


class _Tiny(LogNames):
    PENDING = 1  # the automaton is rebuilt after almost every name


@pytest.mark.parametrize("kind", [LogNames, _Tiny])
@settings(max_examples=300, deadline=None)
@given(steps=st.lists(STEP, max_size=60))
def test_log_names_answer_as_the_pass_over_every_name(kind, steps) -> None:
    index, plain = kind(), {}
    for seq, (what, text) in enumerate(steps):
        if what == "add":
            launch = _launch(seq)
            index.add(text, launch)
            plain.setdefault(text, []).append(launch)
            continue
        assert index.named_in(text) == [ls for n, ls in plain.items() if n in text]
        assert index.any_in(text) == any(n in text for n in plain)
        wanted = text.replace("\\", "/")
        assert index.read_as(text) == [
            ls for n, ls in plain.items()
            if wanted == (p := n.replace("\\", "/").removeprefix("./"))
            or wanted.endswith("/" + p.lstrip("/"))]
    assert bool(index) == bool(plain)


class _Checked(Tracker):
    """A tracker that checks, before every turn, its live table against every launch."""

    def _gap(self, turn) -> None:
        _check_tables(self)
        for launch in self.launches:
            assert launch.live is self.alive and launch.not_ended is self.not_ended
        super()._gap(turn)


def _check_tables(tracker: Tracker) -> None:
    """The tables a tracker keeps are what a pass over every launch finds, in launch order."""
    launches = tracker.launches
    assert tracker.alive == {l.seq: l for l in launches if l.state is State.ALIVE}
    assert tracker.not_ended == {l.seq: l for l in launches if l.state is not State.ENDED}
    assert {pid: sorted(ls, key=lambda l: l.seq) for pid, ls in tracker.by_pid.items()} == {
        pid: [l for l in launches if pid in l.pids] for pid in {p for l in launches
                                                               for p in l.pids}}


def _check_session(session: Session) -> None:
    tracker = _Checked(session, KNOW)
    ledger = tracker.ledger()
    _check_tables(tracker)
    assert all(l.live is None and l.not_ended is None for l in ledger.launches)  # let go after
    return ledger


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    sys.path.insert(0, str(REPO / "bench"))
    from generate import FORMATS, generate

    out = tmp_path_factory.mktemp("bench-live")
    generate(list(FORMATS), 2, 1500, out, seed=11)
    return sorted(p for p in out.rglob("*") if p.suffix in (".json", ".jsonl")
                  and p.name not in ("planted.json", "params.json"))


def test_live_table_matches_every_launch_state_in_generated_sessions(generated) -> None:
    assert generated
    for path in generated:
        for session in iter_sessions(str(path)):
            _check_session(session)


def test_live_table_through_kills_revivals_and_resumes() -> None:
    from test_ledger import _Script

    s = _Script()
    s.bash("nohup python -m sglang.launch_server --port 30000 > s.log 2>&1 &", "PID: 100")
    s.bash("npm run dev &", "ready on http://localhost:3000")
    s.user("ok it's running now")
    s.bash("kill 100")
    s.bash("curl -s localhost:30000/health", "ok")  # answers: the kill missed, revived
    s.event("compaction")
    s.bash("pkill -f vite")
    s.bash("tail s.log", "Traceback\nOSError: [Errno 98] Address already in use")
    s.bash("nohup python -m sglang.launch_server --port 30000 > s.log 2>&1 &", "PID: 200")
    s.user("the server is up")
    s.bash("ps aux | grep sglang", "root  200  0.0  python -m sglang.launch_server --port 30000")
    s.bash("kill 200")
    s.bash("python -m http.server 8080 &")
    s.bash("kill 999")  # names no launch: every live one is unknown from here
    ledger = _check_session(Session(id="s", agent="opencode", format="case", source="t",
                                    turns=s.turns))
    assert [(k.command, k.ended) for k in ledger.kills if k.kind == "pid"] == [
        ("kill 100", [0]), ("kill 200", [0, 2]), ("kill 999", [])]  # both listed on its port
    assert [c.kind for c in ledger.launches[-1].changes] == ["kill-unresolved"]
    assert ledger.launches[-1].state is State.UNKNOWN


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3)), max_size=20),
       st.integers(-1, 7), st.integers(-1, 7))
def test_kills_between_two_clocks_are_those_a_pass_finds(clocks, start, end) -> None:
    """In order (as the walk appends them) or not, the kills strictly between two clocks."""
    from forensics.analysis.ledger import Kill, Ledger

    ledger = Ledger([], [Kill((a, b, 0), a, "x", "kill", "pid") for a, b in clocks])
    for lo, hi in (((start, 0, 0), (end, 9, 0)), ((start, 1, 0), (end, 1, 0))):
        assert ledger.kills_between(lo, hi) == [k for k in ledger.kills if lo < k.clock < hi]
    ledger.kills.append(Kill((3, 0, 0), 3, "y", "kill", "pid"))  # one more, after the first ask
    assert ledger.kills_between((2, 9, 0), (4, 0, 0)) == [
        k for k in ledger.kills if (2, 9, 0) < k.clock < (4, 0, 0)]


# -- FX002's look-back over earlier launches -----------------------------------------------------

def _check_candidates(launches: list[Launch]) -> None:
    from forensics.rules.fx002_duplicate_launch import _Candidates

    candidates = _Candidates(launches)
    for i, later in enumerate(launches):
        found = list(candidates.before(i))
        assert all(e.seq < later.seq for e in found)
        assert [e.seq for e in found] == sorted({e.seq for e in found})
        assert [e for e in found if e.equivalent(later)] == [
            e for e in launches[:i] if e.equivalent(later)]


def test_candidates_hold_every_equivalent_launch_in_generated_sessions(generated) -> None:
    for path in generated:
        for session in iter_sessions(str(path)):
            _check_candidates(Tracker(session, KNOW).ledger().launches)


def _made(seq: int, normalized: str, port, requested, conflict, cwd) -> Launch:
    launch = _launch(seq)
    launch.normalized, launch.port, launch.requested_port = normalized, port, requested
    launch.conflict_port, launch.cwd = conflict, cwd
    return launch


PORT = st.sampled_from([None, None, 3000, 3001, 8000])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["", "npm run dev", "uvicorn app:app"]), PORT, PORT,
                          PORT, st.sampled_from([None, "/a/web", "/b/web", "/a/api"])),
                max_size=12))
def test_candidates_hold_every_equivalent_launch(specs) -> None:
    _check_candidates([_made(i, *spec) for i, spec in enumerate(specs)])


def _newest(launches: list[Launch], i: int, state: State) -> Launch | None:
    """The newest launch before ``i``, equivalent to it, in ``state`` when it came: what FX002
    relaunches over, found the slow way."""
    later = launches[i]
    return next((e for e in reversed(launches[:i]) if e.equivalent(later)
                 and not (e.deadline is not None and later.time > e.deadline)
                 and e.state_before(later.clock)[0] is state), None)


CHANGE = st.tuples(st.integers(0, 6), st.sampled_from([State.ENDED, State.ALIVE, State.UNKNOWN]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["npm run dev", "uvicorn app:app"]), PORT, PORT, PORT,
                          st.sampled_from([None, "/a/web", "/b/web"]),
                          st.lists(CHANGE, max_size=3), st.integers(0, 2),
                          st.sampled_from([None, None, 2.0, 5.0])),
                max_size=14))
def test_the_walk_over_open_launches_finds_what_the_walk_over_all_finds(specs) -> None:
    """Settled launches (ended or unknown for good before every launch still to come) leave the
    walk; the newest alive and unknown equivalent launches, and the count, stay what they were."""
    from forensics.analysis.ledger import Change
    from forensics.rules.fx002_duplicate_launch import _Candidates

    launches, turn = [], 1
    for seq, (normalized, port, requested, conflict, cwd, changes, gap, deadline) in enumerate(
            specs):
        turn += gap  # launches in one turn share a clock's turn; later ones come later
        launch = _made(seq, normalized, port, requested, conflict, cwd)
        launch.clock, launch.turn, launch.time = (turn, seq, 1), turn, float(turn)
        launch.deadline = None if deadline is None else turn + deadline
        for after, state in sorted(changes, key=lambda c: c[0]):
            launch.changes.append(Change((turn + after, 99, 1), state, "kill-pid", "r", turn))
        launches.append(launch)
    candidates = _Candidates(launches)
    for i, later in enumerate(launches):
        alive, unknown_at = None, -1
        for j, e in candidates.newest_open(i):
            if not candidates.equivalent(e, later):
                continue
            if e.deadline is not None and later.time > e.deadline:
                continue
            state, _ = e.state_before(later.clock)
            if state is State.ALIVE:
                alive = e
                break
            if state is State.UNKNOWN and unknown_at < 0:
                unknown_at = j
        assert alive is _newest(launches, i, State.ALIVE)
        if alive is None:
            unknown_at = candidates.newest_unknown(i, unknown_at)
            assert (launches[unknown_at] if unknown_at >= 0 else None) is _newest(
                launches, i, State.UNKNOWN)
        assert candidates.count_equivalent(i) == sum(e.equivalent(later) for e in launches[:i])
        candidates.open(i)
