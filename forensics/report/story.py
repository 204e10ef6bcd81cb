"""Turn one incident into a case study: the facts a reader needs, pulled from the transcript.

The seeds in ``docs/examples/`` show the arc users expect: what was flagged and where, what the
session was doing, the chain of events, the mistake, what the user did, what one needs to know,
which assumptions failed, and the lesson. This module gathers those facts; templates only lay them
out. Every sentence is built from turns (quoted, with their turn number and anchor) or from the
rule file; where the transcript cannot settle something, the sentence says so ("as far as the
transcript shows"). Nothing here guesses at motives.

Sentences are tuples of ``Piece``s (plain words, code, quoted transcript text, references to a
turn) so that Markdown and HTML can each escape and link them their own way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from forensics.findings import Incident
from forensics.model import (
    AssistantTurn,
    EventTurn,
    Session,
    ToolCall,
    ToolResultTurn,
    Turn,
    UserTurn,
)


# -- sentence pieces -------------------------------------------------------------------------


def shorten(text: str | None, width: int = 100) -> str:
    """``text`` on one line, cut to ``width`` with an ellipsis. Looks only at the head, so a
    pasted megabyte costs no more than a short message."""
    text = text or ""
    head = text[: width * 4 + 64]
    flat = " ".join(head.split())
    if len(flat) <= width and len(head) == len(text):
        return flat
    return flat[: width - 1].rstrip() + "…"


@dataclass(frozen=True)
class Piece:
    kind: str
    """``text`` (our words), ``words`` (a rule's or transcript's words, unquoted), ``code``,
    ``quote`` (transcript words), ``ref`` (a turn)."""
    text: str
    ordinal: int = 0


Sentence = tuple[Piece, ...]


def S(*parts: str | Piece) -> Sentence:
    """A sentence from plain strings (our words) and pieces."""
    return tuple(Piece("text", p) if isinstance(p, str) else p for p in parts if p != "")


def code(text: str) -> Piece:
    return Piece("code", text)


def quote(text: str, width: int = 240) -> Piece:
    return Piece("quote", shorten(text, width))


def prose(text: str) -> list[Piece]:
    """A rule's message: its `backticked` spans become code, the rest stays words."""
    out: list[Piece] = []
    for i, chunk in enumerate(re.split(r"`([^`\n]+)`", text)):
        if chunk:
            out.append(Piece("code" if i % 2 else "words", chunk))
    return out


def ref(turn: Turn) -> Piece:
    return Piece("ref", f"turn {turn.ordinal}", turn.ordinal)


# -- the case study ----------------------------------------------------------------------------


@dataclass
class Step:
    """One row of the chain of events."""

    ordinal: int
    anchor: str
    when: str
    label: str
    what: str
    flagged: bool = False
    evidence: bool = False


@dataclass
class Fact:
    """One line of the knowledge section: a label and the values it lists."""

    label: str
    values: list[str]
    block: bool = False
    """Values are multi-line commands, shown as code blocks rather than inline."""


@dataclass
class CaseStudy:
    incident: Incident
    title: str
    rule_title: str
    summary: str = ""
    rationale: str = ""
    """The first paragraph of the rule's rationale: why it matters (the rest defines the rule,
    which ``forensics rules CODE`` prints)."""
    remediation: str = ""
    falsepositives: list[str] = field(default_factory=list)
    flagged_kind: str = ""
    message_number: int | None = None
    location: str = ""
    when: str = ""
    flagged_quote: str | None = None
    """The flagged message's words, or None when it was empty (the intro says so)."""
    flagged_command: str | None = None
    flagged_empty: bool = False
    """The flagged message showed the user nothing (the intro says so; no quote)."""
    introduction: list[Sentence] = field(default_factory=list)
    context: list[Sentence] = field(default_factory=list)
    figures: list[Sentence] = field(default_factory=list)
    instructions: list[Sentence] = field(default_factory=list)
    timeline: list[Step] = field(default_factory=list)
    timeline_omitted: int = 0
    mistake: list[Sentence] = field(default_factory=list)
    reaction: list[Sentence] = field(default_factory=list)
    recovery: list[Sentence] = field(default_factory=list)
    """What the assistant did after the user's reaction, one sentence per action."""
    knowledge: list[Fact] = field(default_factory=list)
    assumptions: list[Sentence] = field(default_factory=list)
    related: list[Sentence] = field(default_factory=list)

    @property
    def file_stem(self) -> str:
        return f"{self.incident.code}-{safe_name(self.incident.anchor)}"


def safe_name(text: str) -> str:
    """A file-name-safe version of an anchor or session id."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "x"
    return cleaned[:80]


# -- shell knowledge ---------------------------------------------------------------------------

_BACKGROUND = re.compile(
    r"(^|[\s;(])(nohup|setsid)\s|&\s*(disown)?\s*$|&\s*\n|\bdocker\s+run\b[^\n]*\s-d\b|"
    r"\bdocker[- ]compose\b[^\n]*\bup\b[^\n]*\s-d\b|\btmux\s+new(-session)?\b[^\n]*\s-d\b|"
    r"\bscreen\s+-d?m|\bStart-Process\b")
_SERVER = re.compile(
    r"\b(launch_server|vllm\s+serve|uvicorn|gunicorn|flask\s+run|http\.server|"
    r"(npm|pnpm|yarn|bun)\s+(run\s+)?(dev|start|serve)\b|next\s+dev|\bvite\b|streamlit\s+run|"
    r"jupyter\s+(lab|notebook)|rails\s+s(erver)?\b|manage\.py\s+runserver|\bserve\b)")
_KILL = re.compile(r"(^|[\s;&|(])(kill|pkill|killall|fuser\s+-k|docker\s+(stop|kill|rm\s+-f)|"
                   r"docker[- ]compose\s+(down|stop)|tmux\s+kill-|Stop-Process|taskkill)\b")
_CHECK = re.compile(r"(^|[\s;&|(])(curl|wget|ss|lsof|netstat|ps|pgrep|nvidia-smi|"
                    r"docker\s+ps|systemctl\s+status|tail|cat\s+\S+\.log|head)\b")
_PORT_PATTERNS = (
    re.compile(r"--port[= ](\d{2,5})\b"),
    re.compile(r"(?:^|\s)-p\s+(\d{2,5})(?::\d+)?\b"),
    re.compile(r"\bPORT=(\d{2,5})\b"),
    re.compile(r"(?:localhost|127\.0\.0\.1|0\.0\.0\.0):(\d{2,5})\b"),
)
_DEFAULT_PORTS = (
    (re.compile(r"sglang"), "30000", "sglang"),
    (re.compile(r"vllm\s+serve|vllm\.entrypoints"), "8000", "vllm"),
    (re.compile(r"\buvicorn\b"), "8000", "uvicorn"),
    (re.compile(r"\bvite\b|(npm|pnpm|yarn)\s+(run\s+)?dev"), "5173", "vite"),
    (re.compile(r"next\s+dev"), "3000", "next"),
    (re.compile(r"flask\s+run"), "5000", "flask"),
    (re.compile(r"http\.server"), "8000", "python -m http.server"),
)
_FLAG = re.compile(r"(?<![\w/.-])(--[A-Za-z][\w-]*)")
_ENV_PREFIX = re.compile(r"^(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=\S*\s*(?:&&\s*|;\s*)?")
_DEATH = re.compile(r"\bKilled\b|Segmentation fault|core dumped|EADDRINUSE|address already in use|"
                    r"port is already allocated|is (?:already )?in use|Traceback|Error\b|error:|"
                    r"Exception\b|FAILED|fatal:|No such file|command not found|Permission denied")
_TAG_ONLY = re.compile(r"^\s*</?[\w:-]+>\s*$")  # harness wrappers such as </shell_metadata>
_FIGURE = re.compile(
    r"\d[\d,]*(?:\.\d+)?\s?(?:[KMGT]?tok/s|tokens?/s|it/s|samples?/s|req/s|[KMGTP]?FLOPS|"
    r"[KMGT]i?B/s|[KMGT]i?B\b|ms\b|µs\b|%|°C|\s?days?\b|\s?hours?\b|\s?h\b|\s?min(?:utes?)?\b|"
    r"[x×](?=\W|$)|W\b|\s?epochs?\b|\s?tests?\b|\s?passed\b|\s?failed\b)")


def launches(command: str | None, call: ToolCall | None = None) -> bool:
    if not command:
        return bool(call and call.background)
    return bool((call and call.background) or _BACKGROUND.search(command)
                or _SERVER.search(command))


def kills(command: str | None) -> bool:
    return bool(command and _KILL.search(command))


def checks(command: str | None) -> bool:
    return bool(command and _CHECK.search(command))


def ports_in(command: str) -> list[tuple[str, str]]:
    """(port, how we know) pairs: explicit ports first, then a tool's well-known default."""
    found: list[tuple[str, str]] = []
    for pattern in _PORT_PATTERNS:
        for m in pattern.finditer(command):
            if (m.group(1), "explicit") not in found:
                found.append((m.group(1), "explicit"))
    if not found and _SERVER.search(command):
        for pattern, port, tool in _DEFAULT_PORTS:
            if pattern.search(command):
                found.append((port, f"default of {tool}"))
                break
    return found


def program(command: str) -> str:
    """What a command runs, for titles: ``sglang.launch_server``, ``pytest``, ``npm run dev``."""
    text = command.strip()
    variables = dict(re.findall(r"\$(\w+)\s*=\s*[\"']([^\"']+)[\"']", text))
    start = re.search(r"\bStart-Process\s+(?:-FilePath\s+)?([\"']?)([^\s\"']+)\1", text)
    if start:  # PowerShell: the program is the file it starts, often through a variable
        target = start.group(2)
        if target.startswith("$"):
            target = variables.get(target[1:], target)
        return re.split(r"[\\/]", target)[-1]
    for line in text.splitlines():
        line = line.strip().rstrip("\\").strip()
        if not line or line.startswith("#"):
            continue
        parts = [p for p in re.split(r"\s*(?:&&|;|\|\|)\s*", line) if p.strip()]
        useful = [p for p in parts if not re.match(
            r"^(export|cd|source|\.|set|sleep|echo|printf|true|wait|Write-Output|"
            r"Start-Sleep)\b|^\$\w+\s*=", p.strip())]
        for part in useful or parts:
            part = part.strip()
            while _ENV_PREFIX.match(part) and _ENV_PREFIX.sub("", part, count=1) != part:
                part = _ENV_PREFIX.sub("", part, count=1)
            quoted = re.match(r"^(?:&\s*)?([\"'])(.+?)\1", part)
            if quoted:  # a quoted path with spaces: C:\Program Files\...\gh.exe
                return re.split(r"[\\/]", quoted.group(2))[-1]
            words = part.split()
            while words and words[0] in ("nohup", "setsid", "sudo", "exec", "time", "env", "&"):
                words = words[1:]
            if words and words[0].startswith("$") and words[0][1:] in variables:
                words[0] = variables[words[0][1:]]
            if not words:
                continue
            m = re.search(r"-m\s+([\w.]+)", " ".join(words))
            if m and re.search(r"python", words[0]):
                return m.group(1)
            head = re.split(r"[\\/]", words[0].strip("\"'"))[-1]
            if head in ("npm", "pnpm", "yarn", "bun", "docker", "cargo", "uv", "git") \
                    and len(words) > 1:
                return " ".join([head] + [w for w in words[1:3] if not w.startswith("-")][:2])
            return head
    return shorten(text, 40)


def strip_env(command: str) -> str:
    """A command without its leading ``export X=…``/``cd …`` set-up, for quoting in prose."""
    text = command.strip()
    while True:
        m = re.match(r"^(?:export\s+[A-Za-z_]\w*=(?:\"[^\"]*\"|'[^']*'|\S*)|cd\s+\S+|"
                     r"source\s+\S+)\s*(?:&&|;)\s*", text)
        if not m:
            return text
        text = text[m.end():]


def result_failed(result: ToolResultTurn) -> bool:
    return bool(result.is_error or result.killed or result.timed_out
                or result.exit_code not in (None, 0)
                or re.search(r"(^|\s)Killed(\s|$)", result.output or ""))


def result_status(result: ToolResultTurn) -> str:
    """How a tool result ended, in words."""
    if result.aborted:
        return "was aborted"
    if result.timed_out:
        return "timed out"
    if result.killed or re.search(r"(^|\s)Killed(\s|$)", result.output or ""):
        return "was killed"
    if result.exit_code not in (None, 0):
        return f"exited with code {result.exit_code}"
    if result.is_error:
        return "failed"
    return "succeeded" if result.exit_code == 0 else "came back"


_REMINDER = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.S)


def telling_lines(text: str, limit: int = 3, *, fallback: int | None = None) -> list[str]:
    """The lines of an output that report the failure, or its last ``fallback`` lines (default
    ``limit``) if none do. Harness reminders appended to outputs are not the tool's words."""
    if "<system-reminder>" in (text or ""):
        text = _REMINDER.sub("", text)
    lines = [ln.rstrip() for ln in (text or "").splitlines()
             if len(re.findall(r"\w", ln)) >= 3 and not _TAG_ONLY.match(ln)]
    hits = [ln for ln in lines if _DEATH.search(ln)]
    chosen = hits[-limit:] if hits else lines[-(fallback or limit):]
    return [shorten(ln, 200) for ln in chosen]


def figure_sentences(text: str, limit: int = 4) -> list[str]:
    """Sentences of ``text`` that report figures (numbers with units), the first ``limit`` of
    them (a report leads with its headline numbers)."""
    out: list[str] = []
    for chunk in re.split(r"(?<=[.!?])\s+|\n+", text or ""):
        chunk = re.sub(r"\*\*|__", "", chunk).strip(" -*#|>")
        if len(chunk) > 8 and _FIGURE.search(chunk) and not chunk.startswith(("$", "```")):
            out.append(shorten(chunk, 220))
    return out[:limit]


# -- the session around an incident ------------------------------------------------------------


def _when(turn: Turn) -> str:
    if turn.time is None:
        return ""
    return datetime.fromtimestamp(turn.time, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def message_number(session: Session, turn: Turn) -> int | None:
    """The flagged message's place among the transcript's own messages (distinct anchors)."""
    if session.agent == "codex" or turn.anchor.startswith("L"):
        return None
    seen: dict[str, int] = {}
    for t in session.turns:
        if t.anchor not in seen:
            seen[t.anchor] = len(seen) + 1
        if t is turn:
            break
    return seen.get(turn.anchor)


def location(session: Session, turn: Turn) -> str:
    if turn.line is not None:
        return f"{turn.file or session.source}:{turn.line}"
    return turn.file or session.source


def _calls_of(turn: Turn) -> list[ToolCall]:
    return turn.tool_calls if isinstance(turn, AssistantTurn) else []


def _commands_of(turn: Turn) -> list[str]:
    return [c.command for c in _calls_of(turn) if c.command]


def _label(session: Session, turn: Turn) -> str | None:
    """Why a turn belongs in the chain of events, or None when it does not."""
    if isinstance(turn, UserTurn):
        return "user"
    if isinstance(turn, AssistantTurn):
        if turn.aborted:
            return "aborted reply"
        if turn.error is not None:
            return "provider error"
        cmds = [(c, c.command) for c in turn.tool_calls]
        if any(kills(cmd) for _, cmd in cmds):
            return "kill"
        if any(launches(cmd, c) for c, cmd in cmds):
            return "launch"
        if any(checks(cmd) for _, cmd in cmds):
            return "check"
        if not turn.visible:
            return "empty reply"
        if turn.tool_calls:
            results = [session.result_for(c) for c in turn.tool_calls]
            return "call" if any(r is not None and result_failed(r) for r in results) else None
        return "reply"
    if isinstance(turn, ToolResultTurn):
        if turn.aborted:
            return "aborted call"
        if result_failed(turn):
            return "failed call"
        pair = session.call_for(turn)
        if pair and (launches(pair[1].command, pair[1]) or kills(pair[1].command)
                     or checks(pair[1].command)):
            return "result"
        return None
    if isinstance(turn, EventTurn):
        if turn.event in ("abort", "interrupt", "api_error", "retry", "compaction",
                          "notification", "shell"):
            return turn.event.replace("_", " ")
        if turn.event == "turn_complete":
            return "turn ended"
        return None
    return None


def _step_text(session: Session, turn: Turn) -> str:
    if isinstance(turn, AssistantTurn) and turn.tool_calls:
        bits = []
        if turn.text.strip():
            bits.append(shorten(turn.text, 90))
        for c in turn.tool_calls[:3]:
            bits.append(f"{c.name}: {shorten(c.command or summarize_call(c), 110)}")
        return " · ".join(bits)
    if isinstance(turn, AssistantTurn) and not turn.visible:
        parts = ", ".join(turn.part_kinds) if turn.part_kinds else "no parts"
        if turn.reasoning.strip():
            return f"(nothing visible; reasoning only, {len(turn.reasoning)} characters)"
        return f"(nothing visible; {parts})"
    if isinstance(turn, ToolResultTurn):
        lines = telling_lines(turn.error or turn.output, 1)
        tail = f": {lines[0]}" if lines else ""
        return f"{turn.name or 'tool'} {result_status(turn)}{tail}"
    if isinstance(turn, UserTurn):
        return shorten(_user_words(turn), 160) or "(empty)"
    if isinstance(turn, AssistantTurn):
        bits = [f"[{turn.error.name}]"] if turn.error else []
        bits += ["[aborted]"] if turn.aborted else []
        return shorten(" ".join(bits + [turn.text]), 160)
    if isinstance(turn, EventTurn):
        return shorten(f"{turn.event}: {turn.text}" if turn.text else turn.event, 160)
    return shorten(getattr(turn, "text", ""), 160)


def summarize_call(call: ToolCall) -> str:
    return ", ".join(f"{k}={shorten(str(v), 60)}" for k, v in list(call.input.items())[:2])


def _window(session: Session, incident: Incident) -> tuple[int, int]:
    """First and last ordinal of the turns the story draws on."""
    ordinals = [incident.turn] + [o for o in incident.evidence_turns if o > 0]
    first = max(1, min(ordinals) - 6)
    first = max(first, incident.turn - 60)
    last = max(ordinals)
    # Follow the story until the assistant answered visibly after the user's next message.
    seen_user = False
    for turn in session.turns[last:last + 40]:
        last = turn.ordinal
        if isinstance(turn, UserTurn):
            if seen_user:
                last -= 1
                break
            seen_user = True
        elif seen_user and isinstance(turn, AssistantTurn) and turn.visible and not turn.tool_calls:
            break
    return first, min(last, len(session.turns))


KEY_LABELS = frozenset({"user", "launch", "kill", "failed call", "empty reply", "provider error",
                        "aborted reply", "abort", "interrupt", "api error", "compaction"})


def build_timeline(session: Session, incident: Incident, first: int, last: int,
                   limit: int = 30, lead_in: int = 40) -> tuple[list[Step], int]:
    """The relevant turns from ``first`` to ``last``, preceded by the key turns (launches,
    kills, failures, user messages) of the ``lead_in`` turns before, which set the scene."""
    evidence = set(incident.evidence_turns)
    rows: list[Step] = []
    start = max(1, first - lead_in)
    for turn in session.turns[start - 1:last]:
        flagged = turn.ordinal == incident.turn
        label = _label(session, turn)
        if turn.ordinal < first and label not in KEY_LABELS and turn.ordinal not in evidence:
            continue
        if label is None and not flagged and turn.ordinal not in evidence:
            continue
        rows.append(Step(turn.ordinal, turn.anchor, _when(turn), label or turn.kind.replace(
            "_", " "), _step_text(session, turn), flagged, turn.ordinal in evidence))
    omitted = 0
    if len(rows) > limit:
        keep = sorted(rows, key=lambda r: (not (r.flagged or r.evidence),
                                           abs(r.ordinal - incident.turn)))[:limit]
        omitted = len(rows) - limit
        rows = sorted(keep, key=lambda r: r.ordinal)
    return rows, omitted


# -- the parts every rule shares ---------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _users_before(session: Session, ordinal: int, limit: int = 3) -> list[UserTurn]:
    out: list[UserTurn] = []
    for turn in reversed(session.turns[: ordinal - 1]):
        if isinstance(turn, UserTurn) and turn.text.strip():
            out.append(turn)
            if len(out) == limit:
                break
    return list(reversed(out))


def _user_words(turn: UserTurn) -> str:
    if turn.command:
        return f"{turn.command} {turn.arguments or ''}".strip()
    return turn.text


def gist(text: str, width: int = 240) -> list[Piece | str]:
    """A long message as its telling end: pasted tables and logs usually close on the question.

    Short messages are quoted whole; a long one becomes "a message of N lines ending with “…”",
    which says plainly that the quote is partial."""
    text = text.strip()
    if len(text) <= width or len(" ".join(text[: width * 2].split())) <= width \
            and len(text) <= width * 2:
        return [quote(text, width)]
    n_lines = sum(1 for ln in text.splitlines() if ln.strip())
    lines = [ln.strip() for ln in text[-4000:].splitlines() if ln.strip()]
    questions = [ln for ln in lines if ln.endswith(("?", "？"))]
    tail = questions[-1] if questions else (lines[-1] if lines else text[-width:])
    if len(tail) > width:
        tail = "…" + " ".join(tail[-width:].split())
    return [f"a message of {n_lines} line{'s' * (n_lines != 1)} "
            f"({len(text)} characters) ending with ", quote(tail, width + 2)]


def context_section(cs: CaseStudy, session: Session, incident: Incident, first: int) -> None:
    flagged = session.turns[incident.turn - 1]
    facts: list[str | Piece] = []
    if session.title:
        facts += ["The session is titled ", quote(session.title, 120)]
    if session.project_dir:
        facts += [" and ran in " if facts else "The session ran in ", code(session.project_dir)]
    if facts:
        cs.context.append(S(*facts, "."))
    counts = session.counts()
    span = ""
    if flagged.time is not None and session.turns and session.turns[0].time is not None:
        span = _duration(flagged.time - session.turns[0].time)
    total = len(session.turns)
    cs.context.append(S(
        f"The incident comes at turn {incident.turn} of {total}",
        f", {span} after the session's first turn" if span else "",
        f". The whole session holds {_plural(counts['user'], 'user message')}, "
        f"{_plural(counts['assistant'], 'assistant message')} and "
        f"{_plural(counts['tool_calls'], 'tool call')}",
        f", {counts['failed_tools']} of which failed" if counts["failed_tools"] else "", "."))
    users = _users_before(session, incident.turn)
    if users:
        for u in users:
            cs.instructions.append(S(ref(u), ": ", *gist(_user_words(u))))
    # Figures: the last assistant messages before the incident that reported numbers.
    found = 0
    for turn in reversed(session.turns[max(0, incident.turn - 200): incident.turn - 1]):
        if isinstance(turn, AssistantTurn) and turn.text.strip():
            sentences = figure_sentences(turn.text)
            if sentences:
                cs.figures.append(S(ref(turn), ": ", *_joined_quotes(sentences)))
                found += 1
                if found == 2:
                    break
    cs.figures.reverse()
    last_words = next((t for t in reversed(session.turns[max(0, incident.turn - 60):
                                                         incident.turn - 1])
                       if isinstance(t, AssistantTurn) and t.text.strip()), None)
    if last_words is not None:
        cs.context.append(S("The assistant's last words before it, at ", ref(last_words), ": ",
                            quote(opening(last_words.text), 300)))


def opening(text: str) -> str:
    """The first paragraph of a reply (before a blank line, a table or a list), unformatted."""
    lines: list[str] = []
    for line in _plain(text).strip().splitlines():
        if not line.strip():
            if lines:
                break
            continue
        if line.lstrip().startswith(("|", "```")) and lines:
            break
        lines.append(line.strip())
    return " ".join(lines)


def _plain(text: str) -> str:
    """Transcript prose without Markdown emphasis markers (they are noise inside a quote)."""
    return re.sub(r"\*\*|__", "", text)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _joined_quotes(items: Sequence[str]) -> list[Piece | str]:
    out: list[Piece | str] = []
    for i, item in enumerate(items):
        if i:
            out.append(" … ")
        out.append(quote(item, 220))
    return out


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} seconds"
    if seconds < 5400:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} hours"
    return f"{seconds / 86400:.1f} days"


def next_reply(session: Session, ordinal: int, limit: int = 40) -> list[Turn]:
    """What the assistant did after ``ordinal`` until its first visible text, in order."""
    out: list[Turn] = []
    for turn in session.turns[ordinal: ordinal + limit]:
        if isinstance(turn, UserTurn):
            break
        if isinstance(turn, AssistantTurn):
            out.append(turn)
            if turn.text.strip() and not turn.tool_calls:
                break
        elif isinstance(turn, ToolResultTurn) and out:
            out.append(turn)
    return out


def describe_actions(session: Session, turns: Sequence[Turn], limit: int = 3) -> list[Sentence]:
    """Sentences for what the assistant did: its calls and their outcomes, then its words."""
    out: list[Sentence] = []
    for turn in turns:
        if len(out) >= limit:
            break
        if isinstance(turn, AssistantTurn):
            for call in turn.tool_calls[:2]:
                result = session.result_for(call)
                outcome: list[str | Piece] = []
                if result is not None:
                    lines = telling_lines(result.error or result.output, 1)
                    outcome = [", which ", result_status(result)]
                    if lines:
                        outcome += [": ", quote(lines[0], 160)]
                out.append(S(ref(turn), ": it ran ", code(shorten(
                    strip_env(call.command) if call.command
                    else f"{call.name} {summarize_call(call)}", 200)), *outcome, "."))
            if turn.text.strip() and not turn.tool_calls:
                out.append(S(ref(turn), ": it replied ", quote(opening(turn.text), 320)))
            elif not turn.visible:
                out.append(S(ref(turn), ": again nothing the user could see."))
    return out[:limit + 1]


def reaction_section(cs: CaseStudy, session: Session, incident: Incident, start: int) -> None:
    """The user's next message after ``start`` and what the assistant did with it."""
    user = None
    for turn in session.turns[start: start + 80]:
        if isinstance(turn, UserTurn):
            user = turn
            break
    if user is None:
        last = max([start, *incident.evidence_turns])
        after = next_reply(session, last)
        if after:
            cs.reaction.append(S("The user did not write again; the assistant went on by "
                                 "itself:"))
            cs.recovery.extend(describe_actions(session, after))
        else:
            cs.reaction.append(S("The session ends there: the user did not write again."))
        return
    earlier = _same_as_earlier(session, user)
    flagged = session.turns[incident.turn - 1]
    gap = ""
    if user.time is not None and flagged.time is not None and user.ordinal != flagged.ordinal:
        gap = f", {_duration(user.time - flagged.time)} later"
    if user.ordinal == incident.turn:
        pass  # the flagged message is the reaction itself (a re-send): the mistake tells it
    elif earlier is not None:
        cs.reaction.append(S("The user re-sent their message from ", ref(earlier), gap, ", at ",
                             ref(user), ": ", *gist(_user_words(user))))
    else:
        cs.reaction.append(S("The user wrote next", gap, ", at ", ref(user), ": ",
                             *gist(_user_words(user), 300)))
    after = next_reply(session, user.ordinal)
    if after:
        what = "that message:"
        if user.ordinal == incident.turn:
            first = _same_as_earlier(session, user)
            what = "the re-sent message:" if first is not None else "the request to try again:"
        cs.reaction.append(S("What the assistant did with ", what))
        cs.recovery.extend(describe_actions(session, after))
    else:
        cs.reaction.append(S("The transcript shows no assistant reply after that message."))


def _same_as_earlier(session: Session, user: UserTurn) -> UserTurn | None:
    raw = _user_words(user)
    words = _norm(raw)
    if len(words) < 2:
        return None
    for turn in reversed(session.turns[: user.ordinal - 1]):
        if not isinstance(turn, UserTurn):
            continue
        other = _user_words(turn)
        if abs(len(other) - len(raw)) > len(raw) // 4 + 16:
            continue  # whitespace alone cannot bridge that difference; skip the normalising
        if _norm(other) == words:
            return turn
    return None


def knowledge_section(cs: CaseStudy, session: Session, incident: Incident,
                      steps: Sequence[Step]) -> None:
    ordinals = {s.ordinal for s in steps if s.flagged or s.evidence
                or (s.label in ("check", "kill", "launch") and s.ordinal > incident.turn)}
    commands: list[str] = []
    tools: list[str] = []
    for o in sorted(ordinals):
        turn = session.turns[o - 1]
        calls = _calls_of(turn)
        if isinstance(turn, ToolResultTurn):
            pair = session.call_for(turn)
            calls = [pair[1]] if pair else []
        for call in calls:
            if call.name and call.name not in tools:
                tools.append(call.name)
            if call.command and call.command.strip() not in commands:
                commands.append(call.command.strip())
    if not commands and not tools:
        return
    flags: list[str] = []
    ports: list[str] = []
    programs: list[str] = []
    for cmd in commands:
        p = program(cmd)
        if p and p not in programs:
            programs.append(p)
        for f in _FLAG.findall(cmd):
            if f not in flags:
                flags.append(f)
        for port, how in ports_in(cmd):
            label = port if how == "explicit" else f"{port} ({how})"
            if not any(x.split()[0] == port for x in ports):
                ports.append(label)
    errors: list[str] = []
    for o in sorted(ordinals):
        turn = session.turns[o - 1]
        if isinstance(turn, ToolResultTurn) and result_failed(turn):
            for line in telling_lines(turn.error or turn.output, 2, fallback=1):
                if line not in errors:
                    errors.append(line)
    if programs:
        cs.knowledge.append(Fact("Programs", programs[:8]))
    if tools:
        cs.knowledge.append(Fact("Agent tools", tools[:8]))
    shown = (cs.flagged_command or "").strip()
    listed = [c for c in commands if c != shown]
    if listed:
        cs.knowledge.append(Fact("Other commands involved" if shown else "Commands",
                                 [shorten_block(c) for c in listed[:5]], block=True))
    if flags:
        cs.knowledge.append(Fact("Flags", flags[:20]))
    if ports:
        cs.knowledge.append(Fact("Ports", ports[:6]))
    if errors:
        cs.knowledge.append(Fact("Errors seen", errors[:6]))


def shorten_block(text: str, width: int = 1200) -> str:
    """Keep a command's lines, cut only when very long."""
    text = text.strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def related_section(cs: CaseStudy, others: Sequence[Incident], incident: Incident) -> None:
    mine = {incident.turn, *incident.evidence_turns}
    for other in others:
        if other is incident or other.fingerprint == incident.fingerprint:
            continue
        theirs = {other.turn, *other.evidence_turns}
        if mine & theirs:
            cs.related.append(S(f"{other.code} {other.rule} at ",
                                Piece("ref", f"turn {other.turn}", other.turn), " (",
                                code(other.anchor), "): ", *prose(other.message)))


# -- per-rule chapters -------------------------------------------------------------------------

Chapter = Callable[[CaseStudy, Session, Incident], None]


def _previous(session: Session, ordinal: int, kinds: tuple[type, ...]) -> Turn | None:
    for turn in reversed(session.turns[: ordinal - 1]):
        if isinstance(turn, kinds):
            return turn
    return None


def _empty_response(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    prev = session.turns[incident.turn - 2] if incident.turn >= 2 else None
    failed = prev if isinstance(prev, ToolResultTurn) else None
    if isinstance(turn, AssistantTurn):
        if turn.reasoning.strip():
            what = S("The assistant's reply at ", ref(turn), " holds reasoning only (",
                     f"{len(turn.reasoning)} characters) and no text or tool call, so the user "
                     "saw nothing.")
        else:
            parts = ", ".join(turn.part_kinds) if turn.part_kinds else ""
            what = S("The assistant's reply at ", ref(turn), " is empty: no text and no tool "
                     "call", f" (its only parts: {parts})" if parts else "", ".")
    else:
        what = S("At ", ref(turn), " the harness closed the turn with no assistant message at "
                 "all.")
    cs.mistake.append(what)
    if isinstance(turn, AssistantTurn) and turn.reasoning.strip():
        cs.mistake.append(S("Its reasoning, which the user never saw, begins: ",
                            quote(turn.reasoning, 300)))
    if failed is not None:
        pair = session.call_for(failed)
        cmd = pair[1].command if pair else None
        lines = telling_lines(failed.error or failed.output, 2)
        status = result_status(failed)
        holder = pair[0] if pair else None
        if cmd and holder is not None and launches(cmd, pair[1]):
            what: list[Piece | str] = ["the ", code(program(cmd)), " launch at ", ref(holder)]
        elif cmd:
            what = [code(shorten(strip_env(cmd), 160))]
        else:
            what = [failed.name or "a tool call"]
        cs.mistake.append(S(
            "It came right after the result of ", *what,
            *([" (result at ", ref(failed), ")"] if holder is not None and
              holder.ordinal != failed.ordinal and launches(cmd, pair[1]) else
              [" at ", ref(failed)]),
            f", which {status}",
            *([": ", *_joined_quotes(lines)] if lines and result_failed(failed) else []), "."))
        if result_failed(failed):
            cs.mistake.append(S("Instead of saying what failed and what it would do next, the "
                                "assistant ended its turn without a word."))
            cs.assumptions.append(S("That the failed call at ", ref(failed), " needed no "
                                    "explanation: the transcript shows no reaction to it before "
                                    "the user wrote again."))
        else:
            cs.mistake.append(S("The assistant ended its turn after that result without telling "
                                "the user what it meant."))
    else:
        user = _previous(session, incident.turn, (UserTurn,))
        if user is not None:
            cs.mistake.append(S("The user's request it should have answered was ", ref(user),
                                ": ", *gist(_user_words(user))))
    if incident.severity == "high":
        cs.mistake.append(S("The empty reply was the last thing the user saw before they wrote "
                            "again: they were left with silence."))


def _duplicate_launch(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    new_cmds = [(c, c.command) for c in _calls_of(turn) if launches(c.command, c)]
    new_call, new_cmd = new_cmds[0] if new_cmds else (None, (_commands_of(turn) or [None])[0])
    earlier = None
    for o in incident.evidence_turns:
        t = session.turns[o - 1]
        if o < incident.turn and any(launches(c.command, c) for c in _calls_of(t)):
            earlier = t
            break
    if earlier is not None:
        old = next((c.command for c in _calls_of(earlier) if launches(c.command, c)), None)
        same = bool(old and new_cmd and _norm(old) == _norm(new_cmd))
        what = code(program(new_cmd)) if new_cmd else "a long-running process"
        if same:
            cs.mistake.append(S("At ", ref(turn), " the assistant sent the launch of ", what,
                                " from ", ref(earlier), " again, unchanged."))
        else:
            cs.mistake.append(S("At ", ref(turn), " the assistant started ", what, " again; "
                                "the same kind of process had been started at ", ref(earlier),
                                *([" with ", code(shorten(strip_env(old), 200))] if old else []),
                                "."))
        cs.mistake.append(S("Nothing between the two launches stopped the first one: no kill "
                            "aimed at it and no output showing it had exited, as far as the "
                            "transcript shows."))
        history = _launch_history(session, program(new_cmd) if new_cmd else "", turn.ordinal)
        if len(history) > 1:
            cs.mistake.append(S(f"It was launch number {len(history) + 1} of ",
                                code(program(new_cmd or "")), " in the session: ",
                                *_history_pieces(history), "."))
        between = [t for t in session.turns[earlier.ordinal: turn.ordinal - 1]]
        users = [t for t in between if isinstance(t, UserTurn)]
        said: list[Piece | str] = []
        for u in users[-2:]:
            said += [", and at " if said else "In between, the user wrote at ", ref(u), ": ",
                     *gist(_user_words(u), 200)]
        if said:
            cs.mistake.append(S(*said))
        checked = [t for t in between if any(checks(c.command) for c in _calls_of(t))]
        port_list = ports_in(new_cmd or "")
        if not checked:
            where = f" on port {port_list[0][0]}" if port_list else ""
            cs.assumptions.append(S("That the earlier process was gone and a new one could start"
                                    f"{where}: no check of the port, the process list or a "
                                    "health endpoint appears between the two launches."))
        else:
            cs.assumptions.append(S("That the earlier process was gone, although checks ran in "
                                    "between (", ref(checked[-1]), ")."))
        later_user = next((t for t in session.turns[turn.ordinal:]
                           if isinstance(t, UserTurn)), None)
        if users and later_user is not None and users[-1].ordinal in incident.evidence_turns:
            cs.assumptions.append(S("That the user's ", quote(_user_words(users[-1]), 120),
                                    " at ", ref(users[-1]), " asked for a new launch. The "
                                    "user's next message, at ", ref(later_user), ", reads ",
                                    *gist(_user_words(later_user), 200)))
    else:
        cs.mistake.append(S("At ", ref(turn), " the assistant started ",
                            code(shorten(new_cmd, 200)) if new_cmd else "a process",
                            " while an equivalent process it had started was still running, as "
                            "far as the transcript shows."))
    if new_call is not None:
        result = session.result_for(new_call)
        if result is not None:
            lines = telling_lines(result.error or result.output, 2)
            cs.mistake.append(S("At ", ref(result), " the relaunch's result shows it ",
                                result_status(result),
                                *([": ", *_joined_quotes(lines)] if lines else
                                  [" with no output"]), "."))
        ports = ports_in(new_cmd or "")
        if ports:
            port, how = ports[0]
            cs.mistake.append(S("Both compete for port ", code(port),
                                f" ({how})" if how != "explicit" else "", ": only one process "
                                "can hold it, so the second launch can at best fail and at "
                                "worst disturb the running one."))


def _launch_history(session: Session, prog: str, before: int) -> list[tuple[Turn, str]]:
    """Earlier launches of ``prog`` and what became of each, as the transcript shows it."""
    launches_: list[Turn] = []
    for t in session.turns[: before - 1]:
        if any(launches(c.command, c) and c.command and program(c.command) == prog
               for c in _calls_of(t)):
            launches_.append(t)
    out: list[tuple[Turn, str]] = []
    for i, t in enumerate(launches_):
        end = launches_[i + 1].ordinal if i + 1 < len(launches_) else before
        fate = "no kill or exit recorded before the relaunch" if i + 1 == len(launches_) else \
            "no kill or exit recorded before the next launch"
        for later in session.turns[t.ordinal: end - 1]:
            if isinstance(later, ToolResultTurn) and later.anchor == t.anchor \
                    and result_failed(later):
                fate = f"its launch {result_status(later)}"
                break
            if any(kills(c.command) for c in _calls_of(later)):
                fate = f"killed at turn {later.ordinal}"
                break
        out.append((t, fate))
    return out


def _history_pieces(history: list[tuple[Turn, str]]) -> list[Piece | str]:
    out: list[Piece | str] = []
    for i, (t, fate) in enumerate(history):
        if i:
            out.append("; ")
        out += [ref(t), f" ({fate})"]
    return out


def _ignored_tool_error(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    failed: list[tuple[ToolCall, ToolResultTurn]] = []
    for call in _calls_of(turn):
        result = session.result_for(call)
        if result is not None and result_failed(result):
            failed.append((call, result))
    if not failed and isinstance(turn, ToolResultTurn):
        pair = session.call_for(turn)
        if pair:
            failed.append((pair[1], turn))
    for call, result in failed[:2]:
        lines = telling_lines(result.error or result.output, 3)
        named: list[Piece | str] = (
            ["The ", code(program(call.command)), " launch"]
            if call.command and launches(call.command, call) else
            ["The call ", code(shorten(strip_env(call.command) if call.command
                                       else f"{call.name} {summarize_call(call)}", 200))])
        cs.mistake.append(S(*named,
                            " at ", ref(turn), f" {result_status(result)}",
                            *([": ", *_joined_quotes(lines)] if lines else []), "."))
    later = [session.turns[o - 1] for o in incident.evidence_turns if o > incident.turn]
    for t in later[:2]:
        if isinstance(t, AssistantTurn):
            if not t.visible:
                cs.mistake.append(S("The next reply, at ", ref(t), ", is empty: the failure "
                                    "was never mentioned."))
            elif t.text.strip():
                cs.mistake.append(S("The assistant went on at ", ref(t), " without a word about "
                                    "the failure: ", quote(t.text, 240)))
            else:
                cmds = ", ".join(shorten(c, 80) for c in _commands_of(t)) or \
                    ", ".join(c.name for c in t.tool_calls)
                cs.mistake.append(S("The assistant went on at ", ref(t), " with ",
                                    code(cmds), ", which does not deal with the failure."))
    if failed:
        cs.assumptions.append(S("That the call at ", ref(turn), " had done its job; its result "
                                "says it ", result_status(failed[0][1]), "."))


def _user_resend(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    earlier = next((session.turns[o - 1] for o in incident.evidence_turns
                    if o < incident.turn and isinstance(session.turns[o - 1], UserTurn)), None)
    words = _user_words(turn) if isinstance(turn, UserTurn) else ""
    between = [session.turns[o - 1] for o in incident.evidence_turns
               if earlier is not None and earlier.ordinal < o < incident.turn]
    replies = [t for t in between if isinstance(t, (AssistantTurn, EventTurn, ToolResultTurn))]
    if not replies and earlier is not None:
        replies = [t for t in session.turns[earlier.ordinal: incident.turn - 1]
                   if isinstance(t, (AssistantTurn, EventTurn))]
    for t in replies[-2:]:
        if isinstance(t, AssistantTurn):
            if t.error is not None:
                cs.mistake.append(S("The reply in between, at ", ref(t), ", was a provider "
                                    "error: ", quote(f"{t.error.name}: {t.error.message}", 200)))
            elif t.aborted:
                cs.mistake.append(S("The reply in between, at ", ref(t), ", was aborted."))
            elif not t.visible:
                cs.mistake.append(S("The assistant's final reply to ", ref(earlier) if earlier
                                    else "it", ", at ", ref(t), ", showed the user nothing",
                                    " (it held reasoning only)" if t.reasoning.strip() else "",
                                    "."))
            else:
                cs.mistake.append(S("The reply in between, at ", ref(t), ", was: ",
                                    quote(t.text or _step_text(session, t), 240)))
        elif isinstance(t, EventTurn):
            cs.mistake.append(S("In between, the harness recorded ", code(t.event), " at ",
                                ref(t), *([": ", quote(t.text, 200)] if t.text else []), "."))
        elif isinstance(t, ToolResultTurn) and result_failed(t):
            cs.mistake.append(S("In between, a tool call failed at ", ref(t), "."))
    if earlier is not None:
        likeness = _likeness(_user_words(earlier), words)
        gap = ""
        if turn.time is not None and earlier.time is not None:
            gap = f", {_duration(turn.time - earlier.time)} after the first time"
        if likeness == "retry":
            cs.mistake.append(S("So at ", ref(turn), gap.replace("the first time", "the request"),
                                ", the user asked for another try: ", *gist(words)))
        else:
            cs.mistake.append(S("So at ", ref(turn), gap, ", the user sent ",
                                "the same message again, word for word" if likeness == "same"
                                else "the message again, nearly unchanged", ": ", *gist(words)))
    if earlier is not None:
        cs.assumptions.append(S("That the earlier message had been served: the user's repeat "
                                "shows the reply to ", ref(earlier), " did not answer it."))


def _likeness(first: str, again: str) -> str:
    """``same`` (equal after whitespace and case), ``near`` (a small edit) or ``retry`` (a
    different, usually short message asking for another try, such as "retry" or "重试")."""
    a, b = _norm(first), _norm(again)
    if a == b:
        return "same"
    short, long_ = sorted((len(a), len(b)))
    if long_ and short / long_ >= 0.6 and long_ <= 20_000:
        from difflib import SequenceMatcher

        if SequenceMatcher(None, a, b, autojunk=False).ratio() >= 0.75:
            return "near"
    return "retry"


CHAPTERS: dict[str, Chapter] = {
    "empty-response": _empty_response,
    "duplicate-launch": _duplicate_launch,
    "ignored-tool-error": _ignored_tool_error,
    "user-resend": _user_resend,
}


# -- titles and introductions ------------------------------------------------------------------


def _title(session: Session, incident: Incident, rule_title: str) -> str:
    turn = session.turns[incident.turn - 1]
    n = incident.turn
    prev = session.turns[n - 2] if n >= 2 else None
    if incident.rule == "empty-response":
        if isinstance(prev, ToolResultTurn) and result_failed(prev):
            pair = session.call_for(prev)
            what = program(pair[1].command) if pair and pair[1].command else prev.name or "tool"
            return f"Silence after a failed {what}: the empty reply at turn {n}"
        return f"The empty reply at turn {n}"
    if incident.rule == "duplicate-launch":
        cmd = next((c.command for c in _calls_of(turn) if c.command), None)
        what = program(cmd) if cmd else "process"
        return f"A second {what} launched at turn {n} while the first was still running"
    if incident.rule == "ignored-tool-error":
        cmd = next((c.command for c in _calls_of(turn) if c.command), None)
        what = program(cmd) if cmd else next((c.name for c in _calls_of(turn)), "tool call")
        return f"The failed {what} at turn {n} that nobody dealt with"
    if incident.rule == "user-resend":
        between = [session.turns[o - 1] for o in incident.evidence_turns if o < n]
        why = ""
        for t in between:
            if isinstance(t, AssistantTurn):
                why = (" after a provider error" if t.error is not None else
                       " after an aborted reply" if t.aborted else
                       " after an empty reply" if not t.visible else why)
        return f"The user had to ask again at turn {n}{why}"
    return f"{rule_title} (turn {n})"


def _introduction(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    where = [ref(turn), " (anchor ", code(incident.anchor)]
    if cs.message_number is not None:
        where += [f", message {cs.message_number} of the transcript"]
    where += [")"]
    who = {"user": "user message", "assistant": "assistant message",
           "tool_result": "tool result", "event": "harness event"}[turn.kind]
    cs.introduction.append(S(f"forensics flagged the {who} at ", *where, " in session ",
                             code(session.id), f" ({session.agent}). ", *prose(incident.message)))
    if isinstance(turn, AssistantTurn):
        if not turn.visible:
            cs.flagged_quote = None
            cs.flagged_empty = True
            cs.introduction.append(S("The message is empty: it holds no text and no tool call",
                                     " (only reasoning the user never saw)"
                                     if turn.reasoning.strip() else "", "."))
        else:
            cs.flagged_quote = turn.text.strip() or None
            cmds = _commands_of(turn)
            if cmds:
                cs.flagged_command = cmds[0].strip()
            elif turn.tool_calls:
                c = turn.tool_calls[0]
                cs.flagged_command = f"{c.name} {summarize_call(c)}"
    elif isinstance(turn, UserTurn):
        cs.flagged_quote = _user_words(turn)
    elif isinstance(turn, ToolResultTurn):
        cs.flagged_quote = turn.error or turn.output or None
    elif isinstance(turn, EventTurn):
        cs.flagged_quote = turn.text or None
        if not turn.text:
            cs.introduction.append(S("No assistant message exists for this point: the flagged "
                                     "turn is the harness closing the turn."))
    if cs.summary:
        cs.introduction.append(S(f"Rule {incident.code} ({incident.rule}) looks for this: ",
                                 *prose(" ".join(cs.summary.split()))))
    cs.introduction.append(S("Severity ", code(incident.severity), ": ",
                             *prose(incident.severity_reason), "."))


# -- entry point -------------------------------------------------------------------------------


def build(session: Session, incident: Incident, spec=None,
          others: Iterable[Incident] = ()) -> CaseStudy:
    """The case study of ``incident`` in ``session``; ``spec`` is its RuleSpec when known."""
    if not 0 < incident.turn <= len(session.turns):
        return _unplaced(session, incident, spec)
    turn = session.turns[incident.turn - 1]
    rule_title = spec.title if spec is not None else incident.title
    cs = CaseStudy(
        incident=incident,
        title=_title(session, incident, rule_title),
        rule_title=rule_title,
        summary=getattr(spec, "summary", "") or "",
        rationale=_para(getattr(spec, "rationale", "")).split("\n\n")[0],
        remediation=_para(getattr(spec, "remediation", "")),
        falsepositives=list(getattr(spec, "falsepositives", ()) or ()),
        flagged_kind=turn.kind,
        message_number=message_number(session, turn),
        location=location(session, turn),
        when=_when(turn),
    )
    _introduction(cs, session, incident)
    first, last = _window(session, incident)
    context_section(cs, session, incident, first)
    cs.timeline, cs.timeline_omitted = build_timeline(session, incident, first, last)
    chapter = CHAPTERS.get(incident.rule)
    if chapter is not None:
        chapter(cs, session, incident)
    else:
        cs.mistake.append(S(*prose(incident.message)))
    if isinstance(turn, AssistantTurn) and turn.visible and turn.reasoning.strip():
        cs.mistake.insert(1, S("The assistant's reasoning in that message: ",
                               quote(turn.reasoning, 300)))
    reaction_start = incident.turn
    if incident.rule == "user-resend":
        reaction_start = incident.turn - 1  # the resend is the reaction; tell what came of it
    reaction_section(cs, session, incident, reaction_start)
    knowledge_section(cs, session, incident, cs.timeline)
    related_section(cs, list(others), incident)
    return cs


def _unplaced(session: Session, incident: Incident, spec) -> CaseStudy:
    """A finding that names a turn the session does not have (a rule bug): say so, plainly."""
    cs = CaseStudy(incident=incident, title=f"{incident.title} (turn {incident.turn})",
                   rule_title=spec.title if spec is not None else incident.title,
                   summary=getattr(spec, "summary", "") or "",
                   rationale=_para(getattr(spec, "rationale", "")),
                   remediation=_para(getattr(spec, "remediation", "")),
                   falsepositives=list(getattr(spec, "falsepositives", ()) or ()),
                   location=session.source)
    cs.introduction.append(S(f"The rule named turn {incident.turn}, but the session has "
                             f"{len(session.turns)} turns, so the finding cannot be placed: ",
                             *prose(incident.message)))
    return cs


def _para(text: str) -> str:
    """Rule-file prose wraps lines at 100 columns; join them back into paragraphs."""
    paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", (text or "").strip())]
    return "\n\n".join(p for p in paras if p)
