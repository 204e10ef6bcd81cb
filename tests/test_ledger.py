"""The process-state model behind duplicate-launch: shell splitting, normalisation, ports, states."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from forensics.model import AssistantTurn, EventTurn, Session, ToolCall, ToolResultTurn, UserTurn
from forensics.analysis.shell import split_pipelines
from forensics.analysis.ledger import (
    Knowledge,
    State,
    normalize,
    port_of,
    server_of,

    track,
)
from forensics.rules import registry

KNOW = Knowledge.build(**registry()["FX002"].params)


# -- splitting -------------------------------------------------------------------------------

def test_split_keeps_redirections_and_marks_background() -> None:
    pipes = split_pipelines("cd /app && nohup uvicorn a:app > u.log 2>&1 &\necho \"PID: $!\"")
    assert [(p.text, p.background) for p in pipes] == [
        ("cd /app", False),
        ("nohup uvicorn a:app > u.log 2>&1", True),
        ('echo "PID: $!"', False),
    ]


def test_split_respects_quotes_substitutions_heredocs_and_comments() -> None:
    script = ("echo 'a; b && c &' ; kill $(lsof -ti:8080; true)  # stop it & more\n"
              "cat <<'EOF' > notes.md\nnpm run dev &\nEOF\n"
              "ls &>/dev/null")
    assert [p.text for p in split_pipelines(script)] == [
        "echo 'a; b && c &'", "kill $(lsof -ti:8080; true)", "cat <<'EOF' > notes.md",
        "ls &>/dev/null",
    ]
    assert not any(p.background for p in split_pipelines(script))


def test_powershell_call_operator_is_not_background() -> None:
    pipes = split_pipelines('$exe = "C:\\Godot\\godot.exe"; & $exe --version')
    assert [(p.text, p.background) for p in pipes] == [
        ('$exe = "C:\\Godot\\godot.exe"', False), ("& $exe --version", False)]


def test_subshell_and_keywords_are_trimmed() -> None:
    pipes = split_pipelines('(streamlit run app.py 2>&1 &) && sleep 4\n'
                            'if [ -n "$PID" ]; then kill "$PID"; fi')
    assert [p.text for p in pipes] == ["streamlit run app.py 2>&1", "sleep 4", '[ -n "$PID" ]',
                                       'kill "$PID"', "fi"]
    assert pipes[0].background


# -- normalisation -----------------------------------------------------------------------------

SEED = ("export CUDA_HOME=/usr/local/cuda-13.0 && export PATH=\"/x:$PATH\" && "
        "nohup /root/ml-env/bin/python3 -m sglang.launch_server \\\n  --model-path /data/m "
        "--tp 8 \\\n  --speculative-algorithm NEXTN > /tmp/sglang_nextn_test.log 2>&1 &")


@pytest.mark.parametrize(("command", "expected"), [
    (SEED, "/root/ml-env/bin/python3 -m sglang.launch_server --model-path /data/m --tp 8 "
           "--speculative-algorithm NEXTN"),
    ("PORT=3001 FOO='a b' npm   run dev", "npm run dev"),
    ("cd web && npm run dev > /tmp/dev.log 2>&1 &", "npm run dev"),
    ("source .venv/bin/activate && streamlit run app.py 2>&1 | tee st.log",
     "streamlit run app.py"),
    ("setsid env DEBUG=1 uvicorn a:app --log-file /tmp/u.log --port 8000 &",
     "uvicorn a:app --port 8000"),
    ("docker compose up -d 2>&1 | tail -10", "docker compose up -d"),
    ("npm run dev &>/tmp/x.log", "npm run dev"),
])
def test_normalize(command: str, expected: str) -> None:
    assert normalize(command, KNOW.inert) == expected


WORD = st.from_regex(r"[a-z][a-z0-9_.:/-]{0,8}", fullmatch=True)
BARE = st.lists(WORD, min_size=1, max_size=6).map(" ".join)
ENV = st.lists(st.tuples(st.from_regex(r"[A-Z][A-Z_]{0,6}", fullmatch=True), WORD),
               max_size=3).map(lambda kv: " ".join(f"{k}={v}" for k, v in kv))
REDIRECT = st.sampled_from(["", "> out.log", "2>&1", "> /tmp/a.log 2>&1", ">> x.log",
                            "&> /dev/null", "2> err.log"])
PREFIX = st.sampled_from(["", "nohup ", "setsid ", "export A=1 && ", "cd /srv/app && ",
                          "source .venv/bin/activate && ", "env X=1 "])
SUFFIX = st.sampled_from(["", " &", " & disown"])


@settings(max_examples=200, deadline=None)
@given(BARE, ENV, REDIRECT, PREFIX, SUFFIX)
def test_normalize_ignores_env_wrappers_and_redirections(bare, env, redirect, prefix, suffix):
    if bare.split()[0] in ("cd", "source", "export", "nohup", "setsid", "env", "exec", "time",
                           "command", "nice", "sudo", "timeout", "disown", "stdbuf", "builtin",
                           "caffeinate", "unbuffer", "set"):
        bare = "run " + bare
    command = f"{prefix}{env} {bare} {redirect}{suffix}"
    assert normalize(command, KNOW.inert) == normalize(bare, KNOW.inert)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab =-&;|>'\"$()\n\\12")), max_size=40))
@example(command=">1 a=")  # a redirection before the env prefix
@example(command="& a=")  # a leading call operator before an assignment
def test_normalize_is_idempotent(command: str) -> None:
    once = normalize(command, KNOW.inert)
    assert normalize(once, KNOW.inert) == once


# -- ports and servers -------------------------------------------------------------------------

@pytest.mark.parametrize(("command", "port", "explicit"), [
    ("python3 -m sglang.launch_server --model-path m --tp 8", 30000, False),
    ("vllm serve Qwen/Qwen3-8B", 8000, False),
    ("uvicorn app:app --port 8123", 8123, True),
    ("uvicorn app:app --port=8124", 8124, True),
    ("npx vite", 5173, False),
    ("next dev", 3000, False),
    ("npm run dev", None, False),
    ("npm run dev -- --port 5174", 5174, True),
    ("PORT=4000 npm run dev", 4000, True),
    ("gunicorn -w 4 -b 0.0.0.0:9000 app:app", 9000, True),
    ("gunicorn -b :8001 app:app", 8001, True),
    ("python -m http.server 8765", 8765, True),
    ("python manage.py runserver 0.0.0.0:8002", 8002, True),
    ("docker run -d -p 8081:8080 img", 8081, True),
    ("streamlit run app.py --server.port 8765", 8765, True),
    ("streamlit run app.py", 8501, False),
    ("java -Dserver.port=9090 -jar app.jar", 9090, True),
    ("./gradlew bootRun", 8080, False),
    ("flask run -p 5001", 5001, True),
    ("jupyter lab --no-browser", 8888, False),
    ("cargo run -p edge -- serve --bind 127.0.0.1:8080", 8080, True),
])
def test_port_of(command: str, port: int | None, explicit: bool) -> None:
    assert port_of(command, KNOW) == (port, explicit)


@pytest.mark.parametrize(("command", "server"), [
    ("npm run dev", "npm-script"),
    ("pnpm --filter web dev", "npm-script"),
    ("yarn start", "npm-script"),
    ("npm run build", None),
    ("npm test", None),
    ("vite build", None),
    ("vitest run", None),
    ("vite preview --port 4000", "vite-preview"),
    ("docker compose up -d", "compose"),
    ("docker compose build", None),
    ("python -m http.server", "http-server-py"),
    ("python train.py", None),
])
def test_server_of(command: str, server: str | None) -> None:
    assert server_of(command, KNOW) == server


# -- states over time ------------------------------------------------------------------------------

class _Script:
    """A tiny session builder: bash calls and their results, user words, events, pauses."""

    def __init__(self) -> None:
        self.turns: list = []
        self.clock = 1_700_000_000.0

    def _common(self, gap: float = 5) -> dict:
        self.clock += gap
        n = len(self.turns) + 1
        return {"ordinal": n, "anchor": f"m{n}", "time": self.clock}

    def bash(self, command: str, output: str = "", *, background: bool = False,
             gap: float = 5, **result) -> int:
        common = self._common(gap)
        call = ToolCall(call_id=f"c{common['ordinal']}", name="bash", command=command,
                        input={"command": command}, background=background,
                        anchor=common["anchor"])
        self.turns.append(AssistantTurn(tool_calls=[call], **common))
        self.turns.append(ToolResultTurn(call_id=call.call_id, name="bash", output=output,
                                         **{"exit_code": 0, **result}, **self._common()))
        return common["ordinal"]

    def user(self, text: str) -> None:
        self.turns.append(UserTurn(text=text, **self._common()))

    def event(self, name: str) -> None:
        self.turns.append(EventTurn(event=name, **self._common()))

    def launches(self):
        return track(Session(id="s", agent="opencode", format="case", source="t",
                             turns=self.turns), KNOW)


def test_kill_by_pattern_ends_the_launch_at_the_kill() -> None:
    s = _Script()
    s.bash("nohup python -m sglang.launch_server --tp 8 > s.log 2>&1 &", "PID: 100")
    kill = s.bash("pkill -f sglang.launch_server")
    (launch,) = s.launches()
    assert launch.port == 30000 and launch.pids == {100} and launch.background
    assert [(c.kind, c.ordinal, c.state) for c in launch.changes] == [
        ("kill-pattern", kill, State.ENDED)]


def test_a_pid_kill_that_missed_is_revived_by_a_later_answer() -> None:
    s = _Script()
    s.bash("uvicorn a:app --port 8000 > u.log 2>&1 & echo \"PID: $!\"", "PID: 4242")
    s.bash("kill 4242")
    check = s.bash("curl -s localhost:8000/health", '{"status":"ok"}')
    (launch,) = s.launches()
    assert [c.kind for c in launch.changes] == ["kill-pid", "revived"]
    assert launch.state is State.ALIVE
    assert [(x.kind, x.ordinal) for x in launch.signals] == [("health", check + 1)]


def test_resume_gap_compaction_and_unresolved_kill_make_state_unknown() -> None:
    s = _Script()
    s.bash("nohup jupyter lab > j.log 2>&1 &")
    s.user("ok", )
    s.bash("ls", gap=3 * 3600)
    s.bash("nohup ollama serve > o.log 2>&1 &")
    s.event("compaction")
    s.bash("nohup redis-server > r.log 2>&1 &")
    s.bash("kill 31337")
    jupyter, ollama, redis = s.launches()
    assert [c.kind for c in jupyter.changes] == ["resume"]
    assert [c.kind for c in ollama.changes] == ["resume"]
    assert [c.kind for c in redis.changes] == ["kill-unresolved"]
    assert {jupyter.state, ollama.state, redis.state} == {State.UNKNOWN}


def test_foreground_results_end_the_launch_and_background_ones_do_not() -> None:
    s = _Script()
    s.bash("npm run dev", "Ready in 2s\n(Command timed out after 120000 ms)", timed_out=True,
           exit_code=None)
    s.bash("python -m http.server 8000", "OSError: [Errno 98] Address already in use",
           exit_code=1)
    s.bash("npm run dev -- --port 3001 &", "")
    timeout, conflict, background = s.launches()
    assert timeout.changes[0].kind == "timeout"
    assert conflict.changes[0].kind == "conflict" and conflict.conflict
    assert background.state is State.ALIVE and not background.changes


def test_short_and_bounded_commands_are_not_launches() -> None:
    s = _Script()
    s.bash("pytest -x &")
    s.bash("pnpm install", background=True)
    s.bash("timeout 8 streamlit run app.py | head")
    s.bash("sleep 30 &")
    s.bash("echo 'npm run dev &'")
    assert s.launches() == []


def test_user_word_signal_needs_an_alive_launch_and_no_relaunch_request() -> None:
    s = _Script()
    s.bash("nohup streamlit run app.py > s.log 2>&1 &")
    s.user("please restart it, it is running the old code")
    s.user("ok it's running now")
    (launch,) = s.launches()
    assert [(x.kind, x.text) for x in launch.signals] == [("user", "ok it's running now")]


SHELLISH = st.lists(st.sampled_from(
    list("ab1 -=&;|>'\"$()\n\\:") + ["kill ", "pkill -f ", "npm run dev", "uvicorn", "nohup ",
                                     "lsof -ti:", "curl localhost:", "PID: ", "docker ",
                                     "compose up -d", "tmux new -d", "EADDRINUSE", "Killed"]),
    max_size=20).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(SHELLISH, SHELLISH, st.booleans(), st.sampled_from([None, 0, 1])),
                max_size=6))
def test_tracking_never_raises_and_states_are_ordered(steps) -> None:
    s = _Script()
    for command, output, background, code in steps:
        s.bash(command, output, background=background, exit_code=code)
    for launch in s.launches():
        clocks = [c.clock for c in launch.changes]
        assert clocks == sorted(clocks)
        assert 1 <= launch.turn <= len(s.turns)
    findings = list(registry()["FX002"].run(Session(id="s", agent="opencode", format="case",
                                                    source="t", turns=s.turns)))
    assert all(1 <= f.turn <= len(s.turns) for f in findings)


def test_a_conflict_names_the_port_a_launch_without_one_tried() -> None:
    s = _Script()
    s.bash("npm run dev", "Error: listen EADDRINUSE: address already in use :::3000", exit_code=1)
    s.bash("docker compose up -d", "Bind for 0.0.0.0:5432 failed: port is already allocated",
           exit_code=1)
    npm, compose = s.launches()
    assert (npm.port, npm.conflict_port, npm.changes[0].kind) == (3000, 3000, "conflict")
    assert (compose.port, compose.conflict, compose.reconciling) == (5432, True, True)


def test_equivalence_by_command_directory_and_port() -> None:
    s = _Script()
    s.bash("cd web && npm run dev &")
    s.bash("cd api && npm run dev &")
    s.bash("PORT=3001 npm run dev &")
    s.bash("npx vite &")
    s.bash("npm run dev", "Port 5173 is in use, trying another one...\n  Local: http://localhost:5174/")
    web, api, port3001, vite, moved = s.launches()
    assert not web.equivalent(api)  # same script, other project
    assert web.equivalent(port3001)  # directory unknown on one side, no port on the other
    assert not port3001.equivalent(moved)  # 3001 asked for vs 5173 found taken
    assert vite.equivalent(moved)  # it tried vite's 5173 and came up on 5174
    assert moved.port == 5174 and moved.conflict_port == 5173 and moved.moved


# -- subagents: the child's own file ------------------------------------------------------------

def _claude_lines(session_id: str, steps: list[tuple[str, object]], *, sidechain: bool,
                  agent_id: str | None = None) -> str:
    """A Claude Code transcript: ("user", text), ("bash", command), ("task", prompt),
    ("result", (call index, text))."""
    import json

    lines, parent, n = [], None, 0

    def emit(kind: str, content: object) -> None:
        nonlocal parent, n
        n += 1
        uid = f"{session_id[:8]}-0000-4000-8000-{n:012d}"
        rec = {"parentUuid": parent, "isSidechain": sidechain, "userType": "external",
               "cwd": "/w", "sessionId": session_id, "version": "2.1.63", "uuid": uid,
               "timestamp": f"2026-01-01T10:{n:02d}:00.000Z", "type": kind,
               "message": {"role": kind, "content": content}}
        if agent_id:
            rec["agentId"] = agent_id
        if kind == "assistant":
            rec["message"].update({"id": f"msg_{n}", "model": "claude-x", "type": "message"})
        lines.append(json.dumps(rec))
        parent = uid

    for kind, value in steps:
        if kind == "user":
            emit("user", value)
        elif kind in ("bash", "task"):
            name, key = ("Bash", "command") if kind == "bash" else ("Task", "prompt")
            emit("assistant", [{"type": "tool_use", "id": f"toolu_{n}", "name": name,
                                "input": {key: value, "description": "x"}}])
        elif kind == "result":
            call, text = value
            emit("user", [{"type": "tool_result", "tool_use_id": f"toolu_{call}",
                           "content": text}])
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("child_kills_it, flagged", [(False, True), (True, False)])
def test_a_subagents_own_file_tells_what_it_left_running(tmp_path, child_kills_it,
                                                          flagged) -> None:
    """The parent's Task result says nothing about a server; the child's own file (beside the
    parent, in subagents/) shows it launched one and, or not, killed it."""
    from forensics.engine import scan_session
    from forensics.ingest import load

    parent_id, agent = "7c0a1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b", "a9f3c1d2e4b5"
    child_steps = [("user", "start the api and check it"),
                   ("bash", "nohup uvicorn app:api --port 8000 > api.log 2>&1 &"),
                   ("result", (1, ""))]
    if child_kills_it:
        child_steps += [("bash", "pkill -f 'uvicorn app:api'"), ("result", (3, ""))]
    folder = tmp_path / parent_id / "subagents"
    folder.mkdir(parents=True)
    (folder / f"agent-{agent}.jsonl").write_text(
        _claude_lines(parent_id, child_steps, sidechain=True, agent_id=agent))
    parent_file = tmp_path / f"{parent_id}.jsonl"
    parent_file.write_text(_claude_lines(parent_id, [
        ("user", "get the api checked"),
        ("task", "Start the API and check /health"),
        ("result", (1, f"Done: /health answers.\nagentId: {agent} (for resuming to continue "
                       "this agent's work if needed)")),
        ("bash", "nohup uvicorn app:api --port 8000 > api.log 2>&1 &"),
        ("result", (3, "")),
    ], sidechain=False))
    [parent] = [s for s in load(parent_file) if s.parent_id is None]
    found = [i for i in scan_session(parent).incidents if i.code == "FX002"]
    if not flagged:
        assert found == []
        return
    [incident] = found
    assert incident.anchor == parent.turn(4).anchor  # the parent's relaunch tool_use line
    assert "its subagent" in incident.message and incident.severity == "medium"
    [earlier] = [f for f in incident.facts if f.role == "earlier launch"]
    assert earlier.command == "nohup uvicorn app:api --port 8000 > api.log 2>&1"
    assert earlier.anchor == parent.turn(2).anchor  # the Task call


def test_a_crash_keeps_the_line_that_tells_how_it_died() -> None:
    """The ledger keeps the exception line of a traceback as the launch's death words, and a
    traceback after the ready line ends it as ``crash-after-up`` (a port answer may revive it)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from rulecases import load_cases

    cases = {c.name: c for c in load_cases("FX003")}
    [died] = track(cases["launch-own-output-shows-it-died"].session, KNOW)
    assert died.death_words == "ModuleNotFoundError: No module named 'torch'"
    assert [c.kind for c in died.changes] == ["crash"]
    [served] = track(cases["log-traceback-but-port-answers"].session, KNOW)
    assert [c.kind for c in served.changes] == ["crash-after-up", "revived"]


def test_the_shipped_knowledge_is_the_duplicate_launch_files_params() -> None:
    import tomllib

    from forensics.analysis.ledger import Knowledge, shipped_knowledge
    from forensics.resources import rules_dir

    [path] = sorted(rules_dir().glob("*-duplicate-launch.toml"))
    whole = tomllib.loads(path.read_text(encoding="utf-8"))  # cases and all
    # compared by value: the repr leaves out the per-command memos, which other tests fill
    assert repr(shipped_knowledge()) == repr(Knowledge.build(**whole["params"]))
