"""Generate synthetic but realistic agent sessions, with incidents planted at known places.

The benchmark needs big inputs whose shape matches real sessions (message sizes, tool-output
lengths, tool mix, record envelopes) and whose incidents are known in advance, so a run can check
that the scan finds every planted incident and little else. Real transcripts cannot be
redistributed, so sizes are drawn from the corpus statistics below and all text is random words.

    python bench/generate.py --format all --sessions 1 --turns 10000 --out bench/data/long
    python bench/generate.py --format all --sessions 334 --turns 300 --out bench/data/archive
    python bench/generate.py --format all --sessions 100 --turns 300 --target-mb 1024 --out ...

Writes one file per session (``opencode/ses_….json``, ``claude/<uuid>.jsonl``,
``codex/rollout-….jsonl``) and ``planted.json``: every file with its session id and turn count,
and every planted incident with its rule slug, the anchor a finding should carry and the
anchors of the exchange holding it (``block``), so a finding of that rule anywhere in the
block counts as found even when a reader anchors a grouped message on a different line.

Per session and per 1,000 turns, one plant per rule, each framed by normal exchanges (the
anchor each finding must carry follows docs/rules.md; ``PLANT_NOTES`` says how each format
records each plant, and is copied into ``planted.json``):

* ``empty-response``: the user asks, the reply has no text and no call, the user writes again.
* ``user-resend``: the user asks, the reply is empty, the user sends the same words again
  (so this plant also holds one ``empty-response``, recorded as its own entry).
* ``duplicate-launch``: a server is started in the background and a health check says it is up;
  in the next exchange the same command is run again with nothing killing the first.
* ``ignored-tool-error``: a build exits non-zero and the reply claims it worked.
* ``unverified-claim``: tests fail and the reply names the failure; in the next exchange the
  summary says "All tests pass." (anchor: that message). Then a fix, a green run and the same
  claim, true this time (a near-miss).
* ``retry-loop``: the same build fails three times with nothing between (anchor: the third
  call), the reply says so; after an edit it builds (a rerun after an edit is no loop).
* ``dangling-call``: a lint call never gets a result while the assistant goes on (anchor: the
  call).
* ``user-correction``: "That's wrong: … was already right" after the assistant's edit (anchor:
  the user's message); before it, a "No, make it 512" that answers the assistant's question.
* ``interrupted-turn``: the user stops a running command (anchor: the stop's own record; the
  call inside the stopped turn is no dangling call).
* ``provider-error``: the provider fails the request (overloaded); the user moves on.
* ``context-compaction``: the harness compacts the context as an exchange starts (anchor: the
  boundary record).

Normal exchanges also hold failures that are dealt with (a failing test named in the next
reply and re-run), which a correct rule must not flag.

A session holds at least one plant set (about 90 turns) and a normal exchange before and after
every plant, so a session asked for fewer turns than that gets brief normal exchanges (one tool
step) to frame its plants, about 140 turns in all.

Generation streams: a writer holds one exchange at a time, so a 1M-turn session takes as little
memory as a 1k one (34 MB for 100k Codex turns, where building the session first took 505 MB).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import string
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import orjson

FORMATS = ("opencode-export", "claude-code", "codex")
CALL_RULES = frozenset({"duplicate-launch", "ignored-tool-error", "retry-loop", "dangling-call"})
"""Rules whose findings anchor on the record of the call (docs/rules.md), not the message."""
PLANT_NOTES = {
    "dangling-call": {
        "opencode-export": "tool part left status 'running' in a finished message",
        "claude-code": "tool_use line with no tool_result line",
        "codex": "function_call line with no function_call_output"},
    "interrupted-turn": {
        "opencode-export": "assistant message with MessageAbortedError, its bash part "
                           "'Tool execution aborted', no step-finish (anchor: the message)",
        "claude-code": "tool_result '[Request interrupted by user for tool use]' (is_error), "
                       "then the user text line of the same words (anchor: that line)",
        "codex": "function_call with no output, then event_msg turn_aborted (anchor: that "
                 "line; no task_complete)"},
    "provider-error": {
        "opencode-export": "assistant message with error APIError 529 Overloaded, only a "
                           "step-start part (anchor: the message)",
        "claude-code": "<synthetic> assistant line with isApiErrorMessage, 'API Error: 529 …'",
        "codex": "event_msg error (anchor: that line). Codex persists error events only with "
                 "extended history (formats.md section 5): a default-mode rollout cannot "
                 "express a provider error; these rollouts are otherwise default-mode"},
    "context-compaction": {
        "opencode-export": "user message with a compaction part (anchor), then the summary "
                           "assistant message (summary: true), before the prompt",
        "claude-code": "system compact_boundary line (anchor), then the isCompactSummary user "
                       "line, before the prompt",
        "codex": "compacted line (anchor) and event_msg context_compacted (one compaction), "
                 "inside the turn after the prompt"},
}
"""How each format records the plants whose shape differs by format (copied to planted.json)."""

# --- Corpus statistics -------------------------------------------------------------------------
# Measured once with `python bench/corpus_stats.py /work/shared/corpus` (43 real sessions, 62 MB:
# 5 opencode exports, 22 Claude Code files, 14 Codex rollouts; schema fixtures excluded). Only
# these numbers were taken from the corpus, never its text. Each tuple holds the character
# length at the quantiles QUANTILES; lengths are drawn by interpolating between them.
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)
USER_TEXT = {  # user prompt length (chars); the 2 MB Claude maximum was a pasted image, capped
    "opencode-export": (1, 6, 31, 46, 84, 191, 2990, 6390),
    "claude-code": (1, 13, 29, 73, 209, 754, 19975, 40000),
    "codex": (3, 25, 60, 158, 4947, 7291, 18881, 40176),
}
ASSISTANT_TEXT = {  # visible assistant text per message
    "opencode-export": (13, 46, 46, 76, 225, 828, 4599, 40275),
    "claude-code": (1, 26, 54, 106, 275, 899, 2890, 9613),
    "codex": (47, 211, 244, 329, 610, 1248, 3985, 7220),
}
REASONING_TEXT = {  # reasoning / thinking text when present
    "opencode-export": (8, 41, 47, 51, 116, 1013, 13939, 39211),
    "claude-code": (40, 80, 120, 156, 400, 900, 1716, 13951),
    "codex": (20, 30, 36, 45, 120, 385, 620, 1169),
}
REASONING_RATE = {"opencode-export": 0.6, "claude-code": 0.2, "codex": 0.7}
TOOL_OUTPUT = {  # tool output as the agent saw it
    "opencode-export": (0, 24, 26, 53, 672, 2150, 14157, 47471),
    "claude-code": (0, 31, 97, 189, 849, 2797, 15732, 81184),
    "codex": (12, 63, 132, 339, 2096, 5345, 28778, 133320),
}
TOOL_INPUT = (2, 79, 116, 199, 628, 2190, 10236, 35122)  # Claude tool_use input JSON (edits)
SIGNATURE = (260, 364, 436, 696, 1520, 3500, 29068, 65516)  # Claude thinking signature
ENCRYPTED = (868, 932, 972, 1228, 2380, 4620, 18316, 58724)  # Codex reasoning encrypted_content
# Tool mix, all formats folded onto seven kinds (opencode: bash .36 read .21 edit .18 write .09
# glob .03 grep .03 todo .03; Claude: Bash .32 Edit .17 Read .16 Write .13 Grep .04 …; Codex:
# shell-like .77 apply_patch .18 update_plan .03).
TOOL_MIX = (("shell", 0.42), ("read", 0.19), ("edit", 0.18), ("write", 0.09), ("grep", 0.04),
            ("glob", 0.04), ("plan", 0.04))
TOOLS_PER_PROMPT = 6.0  # tool calls per user prompt: opencode 6.3, Claude 4.8, Codex 12.9
MULTI_CALL_RATE = 0.15  # opencode replies with >1 tool part (q90 = 3 calls)
HANDLED_FAILURE_RATE = 0.03  # shell calls that fail and are dealt with in the next reply
PROGRESS_PER_SHELL = 2  # Claude Code bash_progress lines per Bash call (1,915 for ~1,000 calls)
HOOK_PROGRESS_RATE = 0.5  # hook_progress lines per tool call (1,645 for 3,152 calls)
INTERRUPTED = "[Request interrupted by user"  # Claude Code's interrupt text, before its "]"
TURNS_PER_PLANT_SET = 1000  # one plant of each rule per this many turns (at least one set)

# --- Text --------------------------------------------------------------------------------------
# Words chosen to be neutral for the rules: no retry/continue words, nothing that reads as a
# failure ("error", "killed", "traceback"), no server commands.
_WORDS = (
    "the a of to and in for on with from by as at this that these use add update check read "
    "write move rename split merge parse render build config module function class method value "
    "field record list map index cache queue buffer stream file path folder table column row "
    "query filter sort group count total limit offset page token session user account order "
    "item price cart invoice report chart widget layout style theme color font icon button form "
    "input label modal dialog menu route handler request response header body status payload "
    "schema model type interface struct enum trait impl crate package import export default "
    "const let var async await promise future task job worker thread lock mutex channel signal "
    "event hook plugin adapter service client server-side database migration seed fixture test "
    "case assert expect mock stub spy coverage lint format type-check docs readme changelog "
    "version release branch commit diff patch tag remote origin main feature bugfix refactor "
    "cleanup rename extract inline simplify speed memory latency throughput batch stage step "
    "loop retry-free guard clause early return default-value optional nullable strict loose "
    "parser lexer token grammar ast node tree walk visit emit compile bundle chunk asset image "
    "svg canvas pixel frame tick clock timer date time zone locale string number float integer "
    "boolean array tuple slice vector matrix tensor layer weight bias kernel shape dtype device "
    "ok nice good fine sure great then next after before now also just only still more less "
    "数据 模块 函数 页面 组件 配置 接口 测试 文件 路径 数据库 用户 订单 样式 布局 "
    "dados módulo função página arquivo usuário pedido 데이터 모듈 함수 페이지 파일 사용자"
).split()
_B64 = string.ascii_letters + string.digits + "+/"
_B62 = string.ascii_letters + string.digits


def words_text(rng: random.Random, size: int) -> str:
    """About ``size`` characters of random words, a line break every twelve."""
    words = rng.choices(_WORDS, k=size // 6)
    for i in range(11, len(words), 12):
        words[i] += "\n"
    return " ".join(words)


class Blobs:
    """Pre-built random text, sliced by length: generation cost is a slice, not a join."""

    def __init__(self, seed: int, size: int = 3_000_000) -> None:
        rng = random.Random(f"blob:{seed}")
        self.text = words_text(rng, size)
        self.b64 = "".join(rng.choices(_B64, k=200_000))

    def text_of(self, rng: random.Random, n: int) -> str:
        n = max(0, min(n, len(self.text) - 1))
        start = rng.randrange(0, len(self.text) - n)
        return self.text[start:start + n]

    def b64_of(self, rng: random.Random, n: int) -> str:
        n = min(n, len(self.b64) - 1)
        start = rng.randrange(0, len(self.b64) - n)
        return self.b64[start:start + n]


def draw(rng: random.Random, q: tuple[int, ...]) -> int:
    """A length from the quantile table, linear between quantiles."""
    u = rng.random()
    for i in range(1, len(QUANTILES)):
        if u <= QUANTILES[i]:
            lo, hi = QUANTILES[i - 1], QUANTILES[i]
            f = (u - lo) / (hi - lo) if hi > lo else 0.0
            return int(q[i - 1] + f * (q[i] - q[i - 1]))
    return q[-1]


# --- The abstract session: what happened, independent of the format --------------------------

@dataclass(slots=True)
class Call:
    kind: str  # shell | read | edit | write | grep | glob | plan
    command: str = ""
    path: str = ""
    old: str = ""
    new: str = ""
    output: str = ""
    exit: int = 0
    call_id: str = ""
    dangling: bool = False  # no result record at all (dangling-call)
    interrupted: bool = False  # the user stopped it while it ran (interrupted-turn)


@dataclass(slots=True)
class Reply:
    text: str = ""
    reasoning: str = ""
    calls: list[Call] = field(default_factory=list)
    mark: str | None = None  # rule slug whose finding should anchor on this reply
    event: str | None = None
    """``interrupt``: the user stopped the reply (it ends the exchange); ``provider-error``: the
    provider failed the request, the reply is the error. The mark goes on the event's record."""


@dataclass(slots=True)
class Exchange:
    """One user prompt and the replies up to the next prompt."""

    user: str
    replies: list[Reply]
    user_mark: str | None = None  # rule slug whose finding should anchor on the prompt
    compaction: bool = False  # the harness compacted the context here (its boundary is marked)

    def turns(self) -> int:
        return 1 + self.compaction + sum(
            1 + sum(not c.dangling for c in r.calls) + (r.event == "interrupt")
            for r in self.replies)


_OK_COMMANDS = (
    "ls -la src", "git status --short", "cat package.json", "npm test", "git diff --stat",
    "python -m pytest -q tests/test_{w}.py", "wc -l src/{w}.py", "rg -n {w} src",
    "node scripts/check-{w}.js", "git log --oneline -n 5", "cargo test {w}", "go test ./{w}/...",
)
_PATHS = ("src/{w}.py", "src/{w}.ts", "app/{w}/views.py", "lib/{w}.rs", "docs/{w}.md",
          "web/components/{w}.tsx", "tests/test_{w}.py")
_IDENT = [w for w in _WORDS if w.isascii() and w.isalpha()]


class Planner:
    """Draws the exchanges of one session: sizes from the corpus tables, plants at chosen slots."""

    def __init__(self, fmt: str, rng: random.Random, blobs: Blobs) -> None:
        self.fmt, self.rng, self.blobs = fmt, rng, blobs
        self.ports = rng.sample(range(8100, 8999), 64)
        self.next_port = 10_000  # each duplicate launch has a port of its own
        # Prompts are consecutive slices of the blob: two random slices of long prompts could
        # overlap and make a real near-duplicate that the re-send rule rightly flags.
        self.prompts = blobs.text
        self.cursor = rng.randrange(len(blobs.text))

    def word(self) -> str:
        return self.rng.choice(_IDENT)

    def text(self, table: dict[str, tuple[int, ...]], floor: int = 1) -> str:
        return self.blobs.text_of(self.rng, max(floor, draw(self.rng, table[self.fmt])))

    def prompt(self) -> str:
        # At least 24 chars so that two prompts are never near-identical.
        n = max(24, draw(self.rng, USER_TEXT[self.fmt]))
        if self.cursor + n > len(self.prompts):
            # Past the end, fresh words: starting the same text again would send the same
            # prompts again (a real re-send, which FX004 rightly flagged in 100k+ sessions).
            self.prompts = words_text(random.Random(self.rng.getrandbits(64)), len(self.prompts))
            self.cursor = 0
        words = self.prompts[self.cursor:self.cursor + n]
        self.cursor += n
        return words.strip() + f" ({self.word()} {self.word()})"

    def call(self) -> Call:
        rng = self.rng
        u, acc = rng.random(), 0.0
        kind = TOOL_MIX[-1][0]
        for k, p in TOOL_MIX:
            acc += p
            if u <= acc:
                kind = k
                break
        w = self.word()
        out = self.blobs.text_of(rng, draw(rng, TOOL_OUTPUT[self.fmt]))
        path = rng.choice(_PATHS).format(w=w)
        if kind == "shell":
            return Call("shell", command=rng.choice(_OK_COMMANDS).format(w=w), output=out)
        if kind in ("edit", "write"):
            size = draw(rng, TOOL_INPUT)
            body = self.blobs.text_of(rng, size)
            old = self.blobs.text_of(rng, size // 3) if kind == "edit" else ""
            return Call(kind, path=path, old=old, new=body, output=f"Edited {path}")
        if kind == "grep":
            return Call("grep", path="src", old=w, output=out)
        if kind == "glob":
            return Call("glob", old=f"**/*{w}*", output=out)
        if kind == "plan":
            return Call("plan", new=self.blobs.text_of(rng, 120), output="Plan updated")
        return Call("read", path=path, output=out)

    def reply(self, calls: list[Call], text_rate: float = 0.35) -> Reply:
        rng = self.rng
        text = self.text(ASSISTANT_TEXT) if rng.random() < text_rate else ""
        reasoning = (self.text(REASONING_TEXT, floor=8)
                     if rng.random() < REASONING_RATE[self.fmt] else "")
        return Reply(text=text, reasoning=reasoning, calls=calls)

    def normal(self, max_steps: int = 40) -> Exchange:
        rng = self.rng
        steps = min(max_steps, int(rng.expovariate(1 / TOOLS_PER_PROMPT)))
        replies: list[Reply] = []
        for _ in range(steps):
            n = 1 + (rng.random() < MULTI_CALL_RATE) * rng.randint(1, 2)
            calls = [self.call() for _ in range(n)]
            replies.append(self.reply(calls))
            failing = calls[-1]
            if failing.kind == "shell" and rng.random() < HANDLED_FAILURE_RATE:
                replies.extend(self.handled_failure())
        final = self.reply([], text_rate=1.0)
        if not final.text.strip():
            final.text = "Done: " + self.text(ASSISTANT_TEXT, floor=20)
        replies.append(final)
        return Exchange(self.prompt(), replies)

    def handled_failure(self) -> list[Reply]:
        """A test fails; the next reply names the failure, edits, and re-runs it."""
        w, t = self.word(), self.word()
        cmd = f"python -m pytest -q tests/test_{w}.py"
        out = (f"F.......\nFAILED tests/test_{w}.py::test_{t} - AssertionError: assert 2 == 3\n"
               f"1 failed, 7 passed in 0.42s\n")
        fix = Call("edit", path=f"src/{w}.py", old="return 2", new="return 3",
                   output=f"Edited src/{w}.py")
        return [
            Reply(calls=[Call("shell", command=cmd, output=out, exit=1)]),
            Reply(text=f"test_{t} failed with an AssertionError (exit code 1) in "
                       f"tests/test_{w}.py; fixing src/{w}.py and running it again.",
                  calls=[fix]),
            Reply(calls=[Call("shell", command=cmd, output="........\n8 passed in 0.40s\n")]),
        ]

    # -- plants: each returns the exchanges that hold one incident --------------------------

    def plant_empty(self) -> list[Exchange]:
        return [Exchange(self.prompt(), [Reply(mark="empty-response")])]

    def plant_resend(self) -> list[Exchange]:
        words = self.prompt()
        return [
            Exchange(words, [Reply(mark="empty-response")]),
            Exchange(words, self.normal().replies, user_mark="user-resend"),
        ]

    def plant_duplicate(self) -> list[Exchange]:
        if not self.ports:  # past 64 plant sets (64k turns): fresh ports, no draw from rng
            self.ports = list(range(self.next_port + 63, self.next_port - 1, -1))
            self.next_port += 64
        port = self.ports.pop()
        cmd = f"nohup uvicorn app.main:app --port {port} > /tmp/api-{port}.log 2>&1 &"
        health = f"curl -s http://localhost:{port}/health"
        first = Exchange(f"Start the API server on port {port} so I can try it.", [
            Reply(text=f"Starting the API server on port {port}.",
                  calls=[Call("shell", command=cmd, output="")]),
            Reply(calls=[Call("shell", command=health, output='{"status":"ok"}')]),
            Reply(text=f"The API server is up on http://localhost:{port} (health check ok)."),
        ])
        second = Exchange(f"Ready. Now add the {self.word()} endpoint and reload it.", [
            Reply(calls=[self.call()]),
            Reply(text="Starting the server with the new endpoint.",
                  calls=[Call("shell", command=cmd, output="")], mark="duplicate-launch"),
            Reply(text=f"The server is running on port {port} with the new endpoint."),
        ])
        return [first, second]

    def plant_ignored(self) -> list[Exchange]:
        w = self.word()
        out = (f"\n> app@1.0.0 build\n> tsc -p .\n\nsrc/{w}.ts(12,5): error TS2322: Type "
               f"'string' is not assignable to type 'number'.\n\nFound 1 error in src/{w}.ts:12\n")
        return [Exchange(f"Build the project and tell me when the {w} page is ready.", [
            Reply(calls=[Call("shell", command="npm run build", output=out, exit=2)],
                  mark="ignored-tool-error"),
            # Names nothing from the failure (file, quoted words), so nothing acknowledges it.
            Reply(text="All set: the page is built and ready to use."),
        ])]

    def plant_unverified(self) -> list[Exchange]:
        """Tests fail (named, so handled), and a later turn's summary says they pass; after a fix
        and a green run the same claim is true (the near-miss a correct rule leaves alone)."""
        w, t = self.word(), self.word()
        cmd = f"python -m pytest -q tests/test_{w}.py"
        out = (f"..F.....\nFAILED tests/test_{w}.py::test_{t} - AssertionError: assert 5 == 4\n"
               f"1 failed, 7 passed in 0.51s\n")
        return [
            Exchange(f"Run the {w} tests and tell me what fails.", [
                Reply(calls=[Call("shell", command=cmd, output=out, exit=1)]),
                Reply(text=f"test_{t} fails with an AssertionError (exit code 1) in "
                           f"tests/test_{w}.py: it expects 4 where the code returns 5."),
            ]),
            Exchange(f"Leave test_{t} for now and write the summary for the pull request.", [
                Reply(text=f"Summary: the {w} module now reads the {t} field. All tests pass.",
                      mark="unverified-claim"),
            ]),
            Exchange(f"Fix test_{t} and run the {w} tests again.", [
                Reply(calls=[Call("edit", path=f"src/{w}.py", old="return 5", new="return 4",
                                  output=f"Edited src/{w}.py")]),
                Reply(calls=[Call("shell", command=cmd, output="........\n8 passed in 0.49s\n")]),
                Reply(text=f"Fixed src/{w}.py: all tests pass now (8 passed)."),
            ]),
        ]

    def plant_retry(self) -> list[Exchange]:
        """The same build fails three times with nothing between; then, after an edit, it builds
        (a rerun after an edit is not a loop)."""
        w = self.word()
        cmd = f"cargo build -p {w}"
        out = (f"error[E0308]: mismatched types\n --> src/{w}.rs:12:5\n"
               f"error: could not compile `{w}` due to 1 previous error\n")
        fail = lambda: Call("shell", command=cmd, output=out, exit=101)  # noqa: E731
        return [
            Exchange(f"Build the {w} crate.", [
                Reply(text=f"Building the {w} crate.", calls=[fail()]),
                Reply(calls=[fail()]),
                Reply(calls=[fail()], mark="retry-loop"),
                Reply(text=f"cargo build still fails with error[E0308] (mismatched types) in "
                           f"src/{w}.rs, exit code 101: should the field be a u64?"),
            ]),
            Exchange("Yes, make it a u64.", [
                Reply(calls=[Call("edit", path=f"src/{w}.rs", old="i32", new="u64",
                                  output=f"Edited src/{w}.rs")]),
                Reply(calls=[Call("shell", command=cmd,
                                  output=f"   Compiling {w} v0.1.0\n    Finished dev profile\n")]),
                Reply(text=f"The {w} crate builds now, with the field as a u64."),
            ]),
        ]

    def plant_dangling(self) -> list[Exchange]:
        """A call whose result never comes back while the assistant goes on."""
        w = self.word()
        return [Exchange(f"Lint the {w} module.", [
            Reply(text=f"Running the linter on src/{w}.ts.",
                  calls=[Call("shell", command=f"npx eslint src/{w}.ts", dangling=True)],
                  mark="dangling-call"),
            Reply(calls=[Call("read", path=f"src/{w}.ts",
                              output=self.blobs.text_of(self.rng, 400))]),
            Reply(text=f"The linter never answered, so I read src/{w}.ts instead: nothing "
                       f"stands out."),
        ])]

    def plant_correction(self) -> list[Exchange]:
        """The user says the assistant's change was wrong; before it, a "No, …" that answers
        the assistant's own question (not a correction)."""
        w = self.word()
        return [
            Exchange(f"Add a cache to the {w} handler.", [
                Reply(text="Should the cache keep the default of 128 entries?"),
            ]),
            Exchange("No, make it 512 entries.", [
                Reply(calls=[Call("edit", path=f"src/{w}.py", old="cache = None",
                                  new="cache = LRU(512)", output=f"Edited src/{w}.py")]),
                Reply(text=f"Added a 512-entry cache to the {w} handler in src/{w}.py."),
            ]),
            Exchange(f"Now tidy up the {w} config.", [
                Reply(calls=[Call("edit", path=f"config/{w}.toml", old="port = 8000",
                                  new="port = 9000", output=f"Edited config/{w}.toml")]),
                Reply(text=f"Tidied config/{w}.toml: the port is 9000 now."),
            ]),
            Exchange(f"That's wrong: the port in config/{w}.toml was already right. Put 8000 "
                     f"back.", [
                Reply(calls=[Call("edit", path=f"config/{w}.toml", old="port = 9000",
                                  new="port = 8000", output=f"Edited config/{w}.toml")]),
                Reply(text=f"Put port 8000 back in config/{w}.toml."),
            ], user_mark="user-correction"),
        ]

    def plant_interrupt(self) -> list[Exchange]:
        """The user stops a running command; the call inside the stopped turn is no dangling
        call. The user then asks for something else."""
        w = self.word()
        return [Exchange(f"Run the {w} end-to-end suite.", [
            Reply(text="Running the end-to-end suite.",
                  calls=[Call("shell", command=f"npm run e2e -- {w}", interrupted=True)],
                  event="interrupt", mark="interrupted-turn"),
        ])]

    def plant_provider_error(self) -> list[Exchange]:
        """The provider fails the request (overloaded); the user moves on."""
        return [Exchange(self.prompt(), [Reply(event="provider-error", mark="provider-error")])]

    def plant_compaction(self) -> list[Exchange]:
        """The harness compacts the context as a normal exchange starts."""
        ex = self.normal(max_steps=3)
        ex.compaction = True
        return [ex]

    def session(self, turns: int) -> Iterator[Exchange]:
        """Normal exchanges up to ``turns`` typed turns, with plant sets spread through them.

        Plans now and yields later, so a writer holds one exchange at a time: the normal
        exchanges are drawn once to count them (and where the plants go), then drawn again,
        identically, from a copy of the generator's state as the writer asks for them. This
        planner's ``rng`` is left where the plan ends, so the writer's draws do not depend on
        how the exchanges are consumed."""
        sets = max(1, turns // TURNS_PER_PLANT_SET)
        plants: list[list[Exchange]] = []
        for _ in range(sets):
            for make in (self.plant_empty, self.plant_resend, self.plant_duplicate,
                         self.plant_ignored, self.plant_unverified, self.plant_retry,
                         self.plant_dangling, self.plant_correction, self.plant_interrupt,
                         self.plant_provider_error, self.plant_compaction):
                plants.append(make())
        self.rng.shuffle(plants)
        budget = turns - sum(x.turns() for p in plants for x in p)
        replay = Planner.__new__(Planner)
        replay.fmt, replay.blobs, replay.cursor = self.fmt, self.blobs, self.cursor
        replay.prompts = self.prompts
        replay.rng = random.Random()
        replay.rng.setstate(self.rng.getstate())
        full = 0
        while budget > 0:
            budget -= self.normal().turns()
            full += 1
        # A normal exchange before and after every plant: when the turn budget is spent (a
        # short session), the ones still missing are brief (at most one tool step).
        count = max(full, len(plants) + 1)
        for _ in range(count - full):
            self.normal(max_steps=1)
        # Distinct slots in 1..count-1: plants never first or last, never side by side.
        slots = sorted(self.rng.sample(range(1, count), len(plants)))
        return self._interleave(replay, full, count, slots, plants)

    @staticmethod
    def _interleave(replay: "Planner", full: int, count: int, slots: list[int],
                    plants: list[list[Exchange]]) -> Iterator[Exchange]:
        slots = slots[::-1]
        for i in range(count):
            while slots and slots[-1] == i:
                slots.pop()
                yield from plants.pop()
            yield replay.normal() if i < full else replay.normal(max_steps=1)


# --- Writers: one per format -------------------------------------------------------------------

def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")[:-6] + "Z"


def uuid_of(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


@dataclass
class Written:
    file: str
    format: str
    session_id: str
    turns: int
    bytes: int
    planted: list[dict]


class Clock:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.t = 1_767_225_600.0 + rng.randrange(0, 300 * 86400)  # some day in 2026

    def tick(self, lo: float = 0.2, hi: float = 8.0) -> float:
        self.t += self.rng.uniform(lo, hi)
        return self.t


class Plants:
    """Collects the anchors of the current exchange and the marks inside it."""

    def __init__(self, file: str, session_id: str) -> None:
        self.file, self.session_id = file, session_id
        self.entries: list[dict] = []
        self.block: list[str] = []
        self.pending: list[tuple[str, str]] = []

    def start(self) -> None:
        self.block, self.pending = [], []

    def anchor(self, a: str, mark: str | None = None) -> None:
        if not self.block or self.block[-1] != a:
            self.block.append(a)
        if mark:
            self.pending.append((mark, a))

    def close(self) -> None:
        for rule, a in self.pending:
            self.entries.append({"file": self.file, "session_id": self.session_id, "rule": rule,
                                 "anchor": a, "block": list(self.block)})
        self.pending = []


class OpencodeWriter:
    """``opencode export`` JSON: info + messages[] with parts, pretty-printed like the CLI."""

    ext = ".json"

    def __init__(self, rng: random.Random, blobs: Blobs) -> None:
        self.rng, self.blobs = rng, blobs
        self.counter = 0

    def oid(self, prefix: str, t: float) -> str:
        self.counter += 1
        tail = "".join(self.rng.choices(_B62, k=14))
        return f"{prefix}_{(int(t * 1000) * 0x1000 + self.counter) & 0xFFFFFFFFFFFF:012x}{tail}"

    def write(self, exchanges: Iterable[Exchange], out_dir: Path, rel_dir: str) -> Written:
        rng, clock = self.rng, Clock(self.rng)
        sid = "ses_" + f"{rng.getrandbits(48):012x}" + "".join(rng.choices(_B62, k=14))
        rel = f"{rel_dir}/{sid}.json"
        plants = Plants(rel, sid)
        start = clock.t
        turns = 0
        # The document's info (written first) is known only at the end: the messages go to a
        # side file as they are drawn, then info + messages are joined into the export.
        body_path = out_dir / (rel + ".part")
        first = True
        with open(body_path, "wb") as body:
            def message(m: dict) -> None:
                nonlocal first
                # orjson's OPT_INDENT_2 layout of the message as an item of "messages"
                data = orjson.dumps(m, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n    ")
                body.write((b"    " if first else b",\n    ") + data)
                first = False

            for ex in exchanges:
                turns += ex.turns()
                plants.start()
                if ex.compaction:
                    self.compaction(sid, clock, plants, message)
                t = clock.tick(5, 120)
                uid = self.oid("msg", t)
                plants.anchor(uid, ex.user_mark)
                message({
                    "info": {"id": uid, "sessionID": sid, "role": "user",
                             "time": {"created": int(t * 1000)}, "agent": "build",
                             "model": {"providerID": "anthropic",
                                       "modelID": "claude-sonnet-4-5"}},
                    "parts": [{"id": self.oid("prt", t), "sessionID": sid, "messageID": uid,
                               "type": "text", "text": ex.user}],
                })
                for r in ex.replies:
                    message(self.assistant(r, sid, uid, clock, plants))
                plants.close()
        info = {"id": sid, "slug": "synthetic-bench", "version": "1.1.3",
                "projectID": f"{rng.getrandbits(160):040x}", "directory": "/home/dev/app",
                "title": "Synthetic benchmark session",
                "time": {"created": int(start * 1000), "updated": int(clock.t * 1000)},
                "summary": {"additions": 0, "deletions": 0, "files": 0}}
        head = orjson.dumps({"info": info, "messages": []}, option=orjson.OPT_INDENT_2)
        assert head.endswith(b"[]\n}")
        size = 0
        with open(out_dir / rel, "wb") as fh, open(body_path, "rb") as body:
            parts = (head[:-3] + b"\n", b"\n  ]\n}\n") if not first else (head[:-3], b"[]\n}\n")
            fh.write(parts[0])
            shutil.copyfileobj(body, fh, 1 << 22)
            fh.write(parts[1])
            size = fh.tell()
        body_path.unlink()
        return Written(rel, "opencode-export", sid, turns, size, plants.entries)

    def assistant(self, r: Reply, sid: str, parent: str, clock: Clock, plants: Plants) -> dict:
        t0 = clock.tick()
        mid = self.oid("msg", t0)
        plants.anchor(mid, r.mark)
        snap = f"{self.rng.getrandbits(160):040x}"
        parts: list[dict] = [{"id": self.oid("prt", t0), "sessionID": sid, "messageID": mid,
                              "type": "step-start", "snapshot": snap}]
        if r.reasoning:
            parts.append({"id": self.oid("prt", t0), "sessionID": sid, "messageID": mid,
                          "type": "reasoning", "text": r.reasoning,
                          "time": {"start": int(t0 * 1000), "end": int(t0 * 1000) + 900}})
        if r.text:
            parts.append({"id": self.oid("prt", t0), "sessionID": sid, "messageID": mid,
                          "type": "text", "text": r.text,
                          "time": {"start": int(t0 * 1000), "end": int(t0 * 1000) + 700}})
        for c in r.calls:
            t1, t2 = clock.tick(), clock.tick(0.05, 6)
            pid = self.oid("prt", t1)
            call_id = "toolu_" + "".join(self.rng.choices(_B62, k=24))
            parts.append({"id": pid, "sessionID": sid, "messageID": mid, "type": "tool",
                          "callID": call_id, **self.tool(c, t1, t2)})
        if r.event:  # no step-finish: the step never finished
            error = ({"name": "MessageAbortedError",
                      "data": {"message": "The operation was aborted."}}
                     if r.event == "interrupt" else
                     {"name": "APIError", "data": {"message": "Overloaded", "statusCode": 529,
                                                   "isRetryable": True}})
            tokens = {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
            return {"info": {"id": mid, "sessionID": sid, "role": "assistant",
                             "time": {"created": int(t0 * 1000),
                                      "completed": int(clock.tick() * 1000)},
                             "error": error, "parentID": parent, "modelID": "claude-sonnet-4-5",
                             "providerID": "anthropic", "mode": "build", "agent": "build",
                             "path": {"cwd": "/home/dev/app", "root": "/home/dev/app"},
                             "cost": 0, "tokens": tokens},
                    "parts": parts}
        finish = "tool-calls" if r.calls else "stop"
        out_tokens = 0 if not (r.text or r.calls or r.reasoning) else 20 + len(r.text) // 4
        tokens = {"input": 12000, "output": out_tokens, "reasoning": 0,
                  "cache": {"read": 11000, "write": 900}}
        parts.append({"id": self.oid("prt", clock.t), "sessionID": sid, "messageID": mid,
                      "type": "step-finish", "reason": finish, "snapshot": snap, "cost": 0.01,
                      "tokens": tokens})
        return {"info": {"id": mid, "sessionID": sid, "role": "assistant",
                         "time": {"created": int(t0 * 1000), "completed": int(clock.t * 1000)},
                         "parentID": parent, "modelID": "claude-sonnet-4-5",
                         "providerID": "anthropic", "mode": "build", "agent": "build",
                         "path": {"cwd": "/home/dev/app", "root": "/home/dev/app"},
                         "cost": 0.01, "tokens": tokens, "finish": finish},
                "parts": parts}

    def compaction(self, sid: str, clock: Clock, plants: Plants, message) -> None:
        """opencode's compaction: a user message holding a ``compaction`` part (marked: the
        boundary), then the assistant's summary message (``summary: true``)."""
        t = clock.tick(5, 60)
        cid = self.oid("msg", t)
        plants.anchor(cid, "context-compaction")
        message({"info": {"id": cid, "sessionID": sid, "role": "user",
                          "time": {"created": int(t * 1000)}, "agent": "build",
                          "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}},
                 "parts": [{"id": self.oid("prt", t), "sessionID": sid, "messageID": cid,
                            "type": "compaction", "auto": True}]})
        t0 = clock.tick()
        mid = self.oid("msg", t0)
        plants.anchor(mid)
        summary = "Summary of the work so far: " + self.blobs.text_of(self.rng, 600)
        tokens = {"input": 150000, "output": 900, "reasoning": 0,
                  "cache": {"read": 0, "write": 0}}
        message({"info": {"id": mid, "sessionID": sid, "role": "assistant",
                          "time": {"created": int(t0 * 1000),
                                   "completed": int(clock.tick() * 1000)},
                          "parentID": cid, "modelID": "claude-sonnet-4-5",
                          "providerID": "anthropic", "mode": "compaction", "agent": "compaction",
                          "summary": True, "path": {"cwd": "/home/dev/app",
                                                    "root": "/home/dev/app"},
                          "cost": 0.02, "tokens": tokens, "finish": "stop"},
                 "parts": [{"id": self.oid("prt", t0), "sessionID": sid, "messageID": mid,
                            "type": "text", "text": summary}]})

    @staticmethod
    def tool(c: Call, t1: float, t2: float) -> dict:
        times = {"start": int(t1 * 1000), "end": int(t2 * 1000)}
        if c.dangling or c.interrupted:
            tool = {"shell": "bash", "plan": "todowrite"}.get(c.kind, c.kind)
            inp = {"command": c.command, "description": "Run it"} if c.kind == "shell" else {}
            if c.interrupted:  # the processor rewrites an aborted turn's unfinished tools
                return {"tool": tool, "state": {"status": "error", "input": inp,
                                                "error": "Tool execution aborted",
                                                "time": times}}
            return {"tool": tool, "state": {"status": "running", "input": inp,
                                            "title": "Run it", "time": {"start": times["start"]}}}
        if c.kind == "shell":
            return {"tool": "bash", "state": {
                "status": "completed", "input": {"command": c.command, "description": "Run it"},
                "output": c.output, "title": "Run it",
                "metadata": {"output": c.output, "exit": c.exit, "description": "Run it",
                             "truncated": False},
                "time": times}}
        name, inp = {
            "read": ("read", {"filePath": c.path}),
            "edit": ("edit", {"filePath": c.path, "oldString": c.old, "newString": c.new}),
            "write": ("write", {"filePath": c.path, "content": c.new}),
            "grep": ("grep", {"pattern": c.old, "path": c.path}),
            "glob": ("glob", {"pattern": c.old}),
            "plan": ("todowrite", {"todos": [{"content": c.new, "status": "pending",
                                              "priority": "medium", "id": "1"}]}),
        }[c.kind]
        return {"tool": name, "state": {"status": "completed", "input": inp, "output": c.output,
                                        "title": c.path or name,
                                        "metadata": {"truncated": False}, "time": times}}


class ClaudeWriter:
    """Claude Code JSONL: one line per content block, tool results on user lines."""

    ext = ".jsonl"
    TOOL = {"shell": "Bash", "read": "Read", "edit": "Edit", "write": "Write", "grep": "Grep",
            "glob": "Glob", "plan": "TodoWrite"}

    def __init__(self, rng: random.Random, blobs: Blobs) -> None:
        self.rng, self.blobs = rng, blobs

    def write(self, exchanges: Iterable[Exchange], out_dir: Path, rel_dir: str) -> Written:
        rng, clock = self.rng, Clock(self.rng)
        sid = uuid_of(rng)
        rel = f"{rel_dir}/{sid}.jsonl"
        plants = Plants(rel, sid)
        env = {"isSidechain": False, "userType": "external", "cwd": "/home/dev/app",
               "sessionId": sid, "version": "2.1.97", "gitBranch": "main"}
        parent: list[str | None] = [None]
        size = turns = 0
        dumps = orjson.dumps
        with open(out_dir / rel, "wb") as fh:
            def line(rec: dict) -> str:
                nonlocal size
                u = uuid_of(rng)
                rec = {"parentUuid": parent[0], **env, **rec, "uuid": u,
                       "timestamp": iso(clock.tick(0.05, 3))}
                parent[0] = u
                b = dumps(rec) + b"\n"
                size += len(b)
                fh.write(b)
                return u

            for ex in exchanges:
                turns += ex.turns()
                plants.start()
                clock.tick(5, 120)
                snap = {"type": "file-history-snapshot", "messageId": uuid_of(rng),
                        "snapshot": {"messageId": uuid_of(rng), "trackedFileBackups": {},
                                     "timestamp": iso(clock.t)}, "isSnapshotUpdate": False}
                b = dumps(snap) + b"\n"
                size += len(b)
                fh.write(b)
                if ex.compaction:
                    self.compaction(line, plants)
                u = line({"type": "user", "message": {"role": "user", "content": ex.user}})
                plants.anchor(u, ex.user_mark)
                for r in ex.replies:
                    self.reply(r, line, plants)
                plants.close()
        return Written(rel, "claude-code", sid, turns, size, plants.entries)

    def compaction(self, line, plants: Plants) -> None:
        """The ``compact_boundary`` system line (marked), then the summary as a user line."""
        u = line({"type": "system", "subtype": "compact_boundary",
                  "content": "Conversation compacted", "isMeta": False, "level": "info",
                  "compactMetadata": {"trigger": "auto", "preTokens": 155000}})
        plants.anchor(u, "context-compaction")
        u = line({"type": "user", "isCompactSummary": True, "isVisibleInTranscriptOnly": True,
                  "message": {"role": "user", "content": "This session is being continued from "
                              "a previous conversation that ran out of context. The "
                              "conversation is summarized below:\n"
                              + self.blobs.text_of(self.rng, 600)}})
        plants.anchor(u)

    def reply(self, r: Reply, line, plants: Plants) -> None:
        rng = self.rng
        mid = "msg_01" + "".join(rng.choices(_B62, k=22))
        req = "req_011" + "".join(rng.choices(_B62, k=21))
        if r.event == "provider-error":  # the harness's own <synthetic> line, nothing else
            error = ('API Error: 529 {"type":"error","error":{"type":"overloaded_error",'
                     '"message":"Overloaded"},"request_id":null}')
            u = line({"type": "assistant", "isApiErrorMessage": True, "message": {
                "id": uuid_of(rng), "container": None, "model": "<synthetic>", "role": "assistant",
                "stop_reason": "stop_sequence", "stop_sequence": "", "type": "message",
                "usage": {"input_tokens": 0, "output_tokens": 0},
                "content": [{"type": "text", "text": error}]}})
            plants.anchor(u, r.mark)
            return
        blocks: list[dict] = []
        if r.reasoning:
            blocks.append({"type": "thinking", "thinking": r.reasoning,
                           "signature": self.blobs.b64_of(rng, draw(rng, SIGNATURE))})
        if r.text:
            blocks.append({"type": "text", "text": r.text})
        ids = []
        for c in r.calls:
            cid = "toolu_01" + "".join(rng.choices(_B62, k=22))
            ids.append(cid)
            blocks.append({"type": "tool_use", "id": cid, "name": self.TOOL[c.kind],
                           "input": self.tool_input(c)})
        if not blocks:
            blocks.append({"type": "text", "text": "(no content)"})
        usage = {"input_tokens": 4, "cache_creation_input_tokens": 900,
                 "cache_read_input_tokens": 15000,
                 "cache_creation": {"ephemeral_5m_input_tokens": 900,
                                    "ephemeral_1h_input_tokens": 0},
                 "output_tokens": 20 + len(r.text) // 4, "service_tier": "standard"}
        # The mark goes on the line a finding anchors on: the first tool_use line for a rule
        # about a call (docs/rules.md), else the first line of the message.
        marked = next((i for i, b in enumerate(blocks) if b["type"] == "tool_use"), 0) \
            if r.mark in CALL_RULES else 0
        for i, b in enumerate(blocks):
            last = i == len(blocks) - 1
            stop = ("tool_use" if r.calls else "end_turn") if last else None
            u = line({"type": "assistant", "requestId": req, "message": {
                "model": "claude-sonnet-4-5-20250929", "id": mid, "type": "message",
                "role": "assistant", "content": [b], "stop_reason": stop,
                "stop_sequence": None, "usage": usage}})
            plants.anchor(u, r.mark if i == marked and not r.event else None)
        stopped = INTERRUPTED + (" for tool use" if r.calls else "") + "]"
        for c, cid in zip(r.calls, ids):
            if c.dangling:
                continue
            self.progress(c, cid, line)
            if c.interrupted:
                u = line({"type": "user", "message": {"role": "user", "content": [
                    {"tool_use_id": cid, "type": "tool_result", "content": stopped,
                     "is_error": True}]}, "toolUseResult": f"Error: {stopped}"})
                plants.anchor(u)
                continue
            failed = c.exit != 0
            content = f"Exit code {c.exit}\n{c.output}" if failed else c.output
            u = line({"type": "user",
                      "message": {"role": "user", "content": [
                          {"tool_use_id": cid, "type": "tool_result", "content": content,
                           "is_error": failed}]},
                      "toolUseResult": self.tool_result(c, content)})
            plants.anchor(u)
        if r.event == "interrupt":  # the interrupt line is the stop's own record
            u = line({"type": "user", "message": {"role": "user", "content": [
                {"type": "text", "text": stopped}]}})
            plants.anchor(u, r.mark)

    def progress(self, c: Call, cid: str, line) -> None:
        """``progress`` bookkeeping lines: a quarter of real Claude Code records, 9 % of bytes."""
        ids = {"parentToolUseID": cid, "toolUseID": cid, "slug": "synthetic-bench"}
        if c.kind == "shell":
            for i in range(PROGRESS_PER_SHELL):
                line({"type": "progress", **ids, "data": {
                    "type": "bash_progress", "output": "", "fullOutput": "",
                    "elapsedTimeSeconds": i + 1, "totalLines": 0, "totalBytes": 0,
                    "taskId": f"{self.rng.getrandbits(36):09x}", "timeoutMs": 120000}})
        if self.rng.random() < HOOK_PROGRESS_RATE:
            line({"type": "progress", **ids, "data": {
                "type": "hook_progress", "hookEvent": "PostToolUse",
                "hookName": f"PostToolUse:{self.TOOL[c.kind]}", "command": "callback"}})

    @staticmethod
    def tool_input(c: Call) -> dict:
        if c.kind == "shell":
            return {"command": c.command, "description": "Run it"}
        if c.kind == "read":
            return {"file_path": c.path}
        if c.kind == "edit":
            return {"file_path": c.path, "old_string": c.old, "new_string": c.new}
        if c.kind == "write":
            return {"file_path": c.path, "content": c.new}
        if c.kind == "grep":
            return {"pattern": c.old, "path": c.path}
        if c.kind == "glob":
            return {"pattern": c.old}
        return {"todos": [{"content": c.new, "status": "pending", "activeForm": c.new[:40]}]}

    @staticmethod
    def tool_result(c: Call, content: str):
        if c.exit != 0:
            return f"Error: {content}"
        if c.kind == "shell":
            return {"stdout": c.output, "stderr": "", "interrupted": False, "isImage": False}
        if c.kind == "read":
            n = c.output.count("\n") + 1
            return {"type": "text", "file": {"filePath": c.path, "content": c.output,
                                             "numLines": n, "startLine": 1, "totalLines": n}}
        if c.kind == "edit":
            return {"filePath": c.path, "oldString": c.old, "newString": c.new,
                    "structuredPatch": [], "userModified": False, "replaceAll": False}
        return {"type": "text", "content": c.output}


class CodexWriter:
    """Codex CLI rollout JSONL: session_meta, then per prompt a task with response items."""

    ext = ".jsonl"

    def __init__(self, rng: random.Random, blobs: Blobs) -> None:
        self.rng, self.blobs = rng, blobs

    def write(self, exchanges: Iterable[Exchange], out_dir: Path, rel_dir: str) -> Written:
        rng, clock = self.rng, Clock(self.rng)
        sid = uuid_of(rng)
        stamp = datetime.fromtimestamp(clock.t, timezone.utc).strftime("%Y-%m-%dT%H-%M-%S")
        rel = f"{rel_dir}/rollout-{stamp}-{sid}.jsonl"
        plants = Plants(rel, sid)
        size = n = turns = 0
        dumps = orjson.dumps
        with open(out_dir / rel, "wb") as fh:
            def line(kind: str, payload: dict, mark: str | None = None, lo=0.05, hi=3.0) -> None:
                nonlocal size, n
                b = dumps({"timestamp": iso(clock.tick(lo, hi)), "type": kind,
                           "payload": payload}) + b"\n"
                n += 1
                size += len(b)
                fh.write(b)
                plants.anchor(f"L{n}", mark)

            line("session_meta", {"id": sid, "timestamp": iso(clock.t), "cwd": "/home/dev/app",
                                  "originator": "codex_cli_rs", "cli_version": "0.58.0",
                                  "instructions": None, "source": "cli",
                                  "model_provider": "openai"})
            line("response_item", {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "<environment_context>\n  <cwd>/home/dev/app</cwd>"
                 "\n  <approval_policy>on-request</approval_policy>\n  <sandbox_mode>workspace-"
                 "write</sandbox_mode>\n  <shell>bash</shell>\n</environment_context>"}]})
            for ex in exchanges:
                turns += ex.turns()
                plants.start()
                line("event_msg", {"type": "task_started", "model_context_window": 272000},
                     lo=5, hi=120)
                line("turn_context", {"cwd": "/home/dev/app", "approval_policy": "on-request",
                                      "sandbox_policy": {"type": "workspace-write",
                                                         "network_access": False},
                                      "model": "gpt-5-codex", "effort": "medium",
                                      "summary": "auto"})
                line("response_item", {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": ex.user}]}, ex.user_mark)
                line("event_msg", {"type": "user_message", "message": ex.user, "images": []})
                if ex.compaction:  # Codex compacts inside the turn: two records, one event
                    line("compacted", {"message": "Summary of the work so far: "
                                       + self.blobs.text_of(rng, 600)}, "context-compaction")
                    line("event_msg", {"type": "context_compacted"})
                last_text = None
                for r in ex.replies:
                    self.reply(r, line)
                    if r.text:
                        last_text = r.text
                if ex.replies and ex.replies[-1].event == "interrupt":
                    # turn_aborted ends the turn: no task_complete
                    line("event_msg", {"type": "turn_aborted", "reason": "interrupted"},
                         ex.replies[-1].mark)
                else:
                    empty = [r.mark for r in ex.replies if r.mark == "empty-response"]
                    line("event_msg", {"type": "task_complete", "last_agent_message": last_text},
                         empty[0] if empty else None)
                plants.close()
        return Written(rel, "codex", sid, turns, size, plants.entries)

    def reply(self, r: Reply, line) -> None:
        rng = self.rng
        # The mark goes on the reply's first line, where a reader anchors the assistant turn,
        # or on its first call's line for a rule about a call (docs/rules.md).
        if r.event == "provider-error":  # an error event, no response item
            line("event_msg", {"type": "error", "message": "stream error: exceeded retry limit, "
                               "last status: 529 Overloaded"}, r.mark)
            return
        pending = [r.mark if r.mark not in ("empty-response", "interrupted-turn") else None]
        if r.mark in CALL_RULES and r.calls:
            call_mark, pending[0] = pending[0], None
        else:
            call_mark = None

        def mark() -> str | None:
            m, pending[0] = pending[0], None
            return m

        if r.reasoning:
            line("response_item", {"type": "reasoning", "summary": [
                {"type": "summary_text", "text": r.reasoning}], "content": None,
                "encrypted_content": self.blobs.b64_of(rng, draw(rng, ENCRYPTED))}, mark())
            line("event_msg", {"type": "agent_reasoning", "text": r.reasoning})
        if r.text:
            line("response_item", {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": r.text}]}, mark())
            line("event_msg", {"type": "agent_message", "message": r.text})
        for c in r.calls:
            cid = "call_" + "".join(rng.choices(_B62, k=24))
            self.call(c, cid, line, call_mark or mark())
            call_mark = None
        if (r.text or r.calls) and not r.event:
            line("event_msg", {"type": "token_count", "info": {
                "total_token_usage": {"input_tokens": 9120, "cached_input_tokens": 7936,
                                      "output_tokens": 412, "reasoning_output_tokens": 256,
                                      "total_tokens": 9532},
                "last_token_usage": {"input_tokens": 9120, "cached_input_tokens": 7936,
                                     "output_tokens": 412, "reasoning_output_tokens": 256,
                                     "total_tokens": 9532},
                "model_context_window": 272000}, "rate_limits": None})

    def call(self, c: Call, cid: str, line, mark: str | None) -> None:
        if c.kind in ("edit", "write"):
            verb = "Update" if c.kind == "edit" else "Add"
            body = "\n".join("+" + s for s in c.new.split("\n"))
            patch = f"*** Begin Patch\n*** {verb} File: {c.path}\n@@\n{body}\n*** End Patch"
            line("response_item", {"type": "custom_tool_call", "status": "completed",
                                   "call_id": cid, "name": "apply_patch", "input": patch}, mark)
            out = orjson.dumps({"output": f"Success. Updated the following files:\nM {c.path}\n",
                                "metadata": {"exit_code": 0, "duration_seconds": 0.0}}).decode()
            line("response_item", {"type": "custom_tool_call_output", "call_id": cid,
                                   "output": out})
            return
        if c.kind == "plan":
            args = orjson.dumps({"plan": [{"status": "in_progress", "step": c.new}]}).decode()
            line("response_item", {"type": "function_call", "name": "update_plan",
                                   "arguments": args, "call_id": cid}, mark)
            line("response_item", {"type": "function_call_output", "call_id": cid,
                                   "output": "Plan updated"})
            return
        cmd = {"shell": c.command, "read": f"sed -n '1,200p' {c.path}",
               "grep": f"rg -n {c.old} {c.path}", "glob": f"rg --files -g '{c.old}'"}[c.kind]
        args = orjson.dumps({"command": ["bash", "-lc", cmd], "workdir": "/home/dev/app",
                             "timeout_ms": 120000}).decode()
        line("response_item", {"type": "function_call", "name": "shell", "arguments": args,
                               "call_id": cid}, mark)
        if c.dangling or c.interrupted:  # no function_call_output (the abort cut it off)
            return
        out = orjson.dumps({"output": c.output, "metadata": {
            "exit_code": c.exit, "duration_seconds": round(self.rng.uniform(0.01, 5), 1)}}).decode()
        line("response_item", {"type": "function_call_output", "call_id": cid, "output": out})


WRITERS = {"opencode-export": (OpencodeWriter, "opencode"), "claude-code": (ClaudeWriter, "claude"),
           "codex": (CodexWriter, "codex")}


def session_turns(rng: random.Random, median: int, many: bool) -> int:
    """Exactly ``median`` for a single session; log-normal around it (capped at 4x) in archives."""
    if not many:
        return median
    return int(min(4 * median, max(20, rng.lognormvariate(math.log(median), 0.8))))


def generate(formats: list[str], sessions: int, turns: int, out: Path, seed: int,
             target_mb: float = 0.0, log=None) -> dict:
    """Write the sessions and ``planted.json`` under ``out``; return the manifest."""
    blobs = Blobs(seed)
    out.mkdir(parents=True, exist_ok=True)
    for fmt in formats:
        (out / WRITERS[fmt][1]).mkdir(exist_ok=True)
    files: list[dict] = []
    planted: list[dict] = []
    total = 0
    index = 0
    many = sessions > 1 or target_mb > 0
    started = time.perf_counter()
    while index < sessions or total < target_mb * 1e6:
        for fmt in formats:
            rng = random.Random(f"{seed}:{fmt}:{index}")
            n = session_turns(rng, turns, many)
            exchanges = Planner(fmt, rng, blobs).session(n)
            cls, sub = WRITERS[fmt]
            w = cls(rng, blobs).write(exchanges, out, sub)
            files.append({"file": w.file, "format": w.format, "session_id": w.session_id,
                          "turns": w.turns, "bytes": w.bytes})
            planted.extend(w.planted)
            total += w.bytes
        index += 1
        if log and index % 100 == 0:
            log(f"  {index} sessions per format, {total / 1e6:.0f} MB, "
                f"{time.perf_counter() - started:.0f} s")
    manifest = {"seed": seed, "formats": formats, "sessions": len(files), "bytes": total,
                "turns": sum(f["turns"] for f in files), "files": files, "planted": planted,
                "plant_notes": {rule: {f: how[f] for f in formats}
                                for rule, how in PLANT_NOTES.items()}}
    (out / "planted.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return manifest


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--format", choices=(*FORMATS, "all"), default="all")
    ap.add_argument("--sessions", type=int, default=1, help="sessions per format (a minimum "
                    "when --target-mb asks for more)")
    ap.add_argument("--turns", type=int, default=10_000, help="typed turns per session (the "
                    "median, when there are several sessions)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data" / "generated")
    ap.add_argument("--target-mb", type=float, default=0.0, help="keep adding sessions until "
                    "the archive holds this many MB")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    formats = list(FORMATS) if args.format == "all" else [args.format]
    t = time.perf_counter()
    m = generate(formats, args.sessions, args.turns, args.out, args.seed, args.target_mb,
                 log=lambda s: print(s, file=sys.stderr))
    secs = time.perf_counter() - t
    print(f"{args.out}: {m['sessions']} sessions, {m['turns']} turns, {m['bytes'] / 1e6:.1f} MB, "
          f"{len(m['planted'])} planted incidents, {secs:.1f} s "
          f"({m['bytes'] / 1e6 / max(secs, 1e-9):.0f} MB/s)")


if __name__ == "__main__":
    main()
