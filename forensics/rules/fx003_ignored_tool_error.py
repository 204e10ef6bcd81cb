"""FX003 ignored-tool-error: a tool call failed and the assistant carried on as if it had not.

A failure is dealt with when, before the user writes again, the assistant's text or reasoning
refers to it (names the error, quotes a file, code or name from the output, or uses a word for
failure in any language), or a later call retries it or investigates it (touches a file, name or
port the error mentions, reruns the same program on the same target), or the user interrupted.
Structure comes first: quoting the error's own tokens works in every language.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache

import orjson

from forensics.analysis import OutcomeRules, analysis_of, user_stopped
from forensics.analysis.commands import program
from forensics.analysis.outcome import any_of as _any_of
from forensics.analysis.shell import command_of as _script_of
from forensics.analysis.shell import split_commands
from forensics.analysis.text import edges as _edges
from forensics.analysis.text import shorten
from forensics.findings import Evidence, Finding
from forensics.model import AssistantTurn, Session, ToolCall, ToolResultTurn
from forensics.rules import rule

_PATH = re.compile(r"(?:[A-Za-z]:)?[\w.~-]*[/\\][\w./\\@+-]+")
_QUOTED = re.compile(r"[`'\"“‘]([^`'\"”’\n]{3,80})[`'\"”’]")
_NAMES = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception|Exit|Fault)\b|\bE[A-Z]{3,}\b"
                    r"|\b[A-Z]{1,4}\d{3,5}\b")
_MODULE = re.compile(r"No module named ['\"]?([\w.]+)|Cannot find module ['\"]([^'\"]+)"
                     r"|command not found: (\S+)|(\S+): command not found")


@rule("FX003")
def ignored_tool_error(
    session: Session,
    *,
    probe_commands: Sequence[str],
    probe_patterns: Sequence[str],
    benign_commands: Sequence[str],
    death_words: Sequence[str],
    death_patterns: Sequence[str],
    exit_text_patterns: Sequence[str],
    failure_text_patterns: Sequence[str],
    acknowledgements: Sequence[str],
    handoffs: Sequence[str],
    success_claims: Sequence[str],
    plain_programs: Sequence[str],
    common_words: Sequence[str],
) -> Iterator[Finding]:
    k = _knowledge(tuple(probe_commands), tuple(probe_patterns), tuple(benign_commands),
                   tuple(death_words), tuple(death_patterns), tuple(exit_text_patterns),
                   tuple(failure_text_patterns), tuple(acknowledgements), tuple(handoffs),
                   tuple(success_claims), tuple(plain_programs), tuple(common_words))
    analysis = analysis_of(session)
    for result in session.turns:
        if not isinstance(result, ToolResultTurn) or result.aborted:
            continue
        owner = session.call_for(result)
        call = owner[1] if owner else None
        failure = _failure(analysis.outcome(result, k.outcome_rules))
        if failure is None:
            continue
        later = analysis.rest_of_exchange(result.ordinal)
        if user_stopped(later):
            continue
        replies = [t for t in later if isinstance(t, AssistantTurn)]
        if not replies or _dealt_with(result, call, replies, k):
            continue
        yield _finding(session, result, owner, failure, replies, k)


class _Knowledge:
    def __init__(self, probes, probe_patterns, benign, death_words, death, exit_text,
                 failure_text, acks, handoffs, claims, plain, common):
        self.death_words = tuple(death_words)
        self.probes = frozenset(probes)
        self.probe_patterns = [re.compile(p) for p in probe_patterns]
        self.benign = frozenset(benign)
        self.death = _any_of(death)
        self.exit_text = _any_of(exit_text)
        self.failure_text = _any_of(failure_text)
        self.acks = _phrases(acks, prefix=True)
        self.handoffs = _phrases(handoffs, prefix=True)
        self.claims = _phrases(claims)
        self.plain = frozenset(plain)
        self.common = frozenset(w.lower() for w in common)
        self.outcome_rules = OutcomeRules(
            death=self.death, death_words=self.death_words, exit_text=self.exit_text,
            failure_text=self.failure_text, is_probe=lambda command: _is_probe(command, self))


@lru_cache(maxsize=8)
def _knowledge(*params) -> _Knowledge:
    return _Knowledge(*params)


def _phrases(words: Sequence[str], *, prefix: bool = False) -> re.Pattern[str]:
    """Match any phrase; ASCII words at word boundaries (``prefix``: fail -> failed, fails),
    other scripts anywhere."""
    alts = []
    end = "" if prefix else r"\b"
    for w in sorted(words, key=len, reverse=True):
        esc = re.escape(w.lower())
        alts.append(rf"\b{esc}{end}" if w.isascii() and w[:1].isalnum() else esc)
    return re.compile("|".join(alts))


# -- what counts as a failure -------------------------------------------------------------


def command_of(call: ToolCall | None) -> str | None:
    return _script_of(call) if call is not None else None


def _failure(outcome) -> str | None:
    """How the call failed, in words, or None when it did not (or only probed)."""
    return outcome.describe() if outcome.failed else None


def _is_probe(command: str, k: _Knowledge) -> bool:
    simple = split_commands(command)
    if not simple:
        return False
    kinds = []
    for s in simple:
        prog, _args = program(s)
        if prog in k.probes or any(p.search(s) for p in k.probe_patterns):
            kinds.append("probe")
        elif prog in k.benign or not prog:
            kinds.append("benign")
        else:
            kinds.append("other")
    if "other" not in kinds:
        return "probe" in kinds
    # The chain's status is its last command's: a probe at the end answers the question.
    last = next(k_ for k_ in reversed(kinds) if k_ != "benign") if "probe" in kinds else "other"
    return last == "probe"


# -- what counts as dealing with it -----------------------------------------------------------


def salient_tokens(result: ToolResultTurn, call: ToolCall | None, k: _Knowledge) -> set[str]:
    """Names, files, codes and quoted words from the failure that a reaction would mention."""
    text = (result.error or "") + "\n" + _edges(result.output)
    tokens: set[str] = set()
    for m in _PATH.finditer(text):
        path = m.group(0).strip(".,:;()[]'\"")
        if len(path) > 3:
            tokens.add(path)
            base = re.split(r"[/\\]", path)[-1]
            if len(base) > 3 and "." in base:
                tokens.add(base)
    for m in _QUOTED.finditer(text):
        tokens.add(m.group(1).strip())
    tokens.update(_NAMES.findall(text))
    short: set[str] = set()
    for m in _MODULE.finditer(text):
        short.update(g for g in m.groups() if g)
    command = command_of(call)
    if command:
        for simple in split_commands(command):
            prog, args = program(simple)
            if prog and prog not in k.plain:
                tokens.add(prog)
    if call is not None:
        for key in ("filePath", "file_path", "path", "filename", "notebook_path"):
            value = call.input.get(key)
            if isinstance(value, str) and value:
                tokens.add(value)
                tokens.add(re.split(r"[/\\]", value)[-1])
    return {t for t in tokens if len(t) > 3 and t.lower() not in k.common} | short


def _dealt_with(result: ToolResultTurn, call: ToolCall | None, replies: list[AssistantTurn],
                k: _Knowledge) -> bool:
    tokens = salient_tokens(result, call, k)
    lowered = {t.lower() for t in tokens}
    failed_command = command_of(call)
    failed_prog = _main_program(failed_command) if failed_command else None
    echoes = _input_windows(call) if call is not None and not failed_command else []
    for reply in replies:
        words = f"{reply.text}\n{reply.reasoning}".lower()
        if words.strip():
            if k.acks.search(words) or k.handoffs.search(words):
                return True
            if any(t in words for t in lowered):
                return True
            if any(w in words for w in echoes):
                return True  # did by hand what the failed tool was for (asked in plain text)
        for later in reply.tool_calls:
            if call is not None and _same_call(call, later, failed_prog):
                return True
            blob = (command_of(later) or orjson.dumps(later.input).decode()).lower()
            if any(t in blob for t in lowered):
                return True
    return False


def _input_windows(call: ToolCall, size: int = 12, step: int = 6) -> list[str]:
    """Short slices of a failed call's long text arguments, to spot them echoed in a reply."""
    out = []
    for value in call.input.values():
        if isinstance(value, str) and len(value) >= 2 * size:
            text = value[:300].lower()
            out.extend(text[i:i + size] for i in range(0, len(text) - size, step))
    return out


def _main_program(command: str) -> tuple[str, tuple[str, ...]] | None:
    for s in reversed(split_commands(command)):
        prog, args = program(s)
        if prog and prog not in ("cd", "echo", "export", "source", "sleep"):
            return prog, tuple(a for a in args if not a.startswith("-"))
    return None


def _same_call(call: ToolCall, later: ToolCall, failed_prog) -> bool:
    """A retry: the same program on the same arguments, or the same non-shell tool again."""
    failed, again_cmd = command_of(call), command_of(later)
    if failed and again_cmd:
        if " ".join(failed.split()) == " ".join(again_cmd.split()):
            return True
        again = _main_program(again_cmd)
        if failed_prog and again and failed_prog[0] == again[0]:
            if not failed_prog[1] or set(failed_prog[1]) & set(again[1]):
                return True
        return False
    return not failed and call.name == later.name


# -- the finding ------------------------------------------------------------------------------


def _finding(session: Session, result: ToolResultTurn, owner, failure: str,
             replies: list[AssistantTurn], k: _Knowledge) -> Finding:
    turn, call = owner if owner else (result, None)
    what = f"`{shorten(command_of(call), 90)}`" if command_of(call) else (
        f"the {result.name or 'tool'} call")
    first = replies[0]
    claims = [r for r in replies if r.text.strip() and k.claims.search(r.text.lower())]
    if not first.visible and not first.aborted and first.error is None:
        severity = "high"
        reason = "the reply right after the failure was empty"
        outcome = "the next reply was empty"
    elif claims:
        severity = "high"
        reason = "the assistant's text claims success despite the failure"
        outcome = f"the assistant went on to say \"{shorten(claims[-1].text, 80)}\""
    else:
        severity = "medium"
        reason = "the assistant moved on without a word about the failure"
        outcome = "the assistant moved on without mentioning it"
    evidence = [result.ordinal] + [r.ordinal for r in replies[:3]]
    facts = [Evidence(kind="failure", role="failed call", turn=result.ordinal,
                      anchor=result.anchor, command=command_of(call), quote=failure)]
    if claims:
        facts.append(Evidence(kind="claim", role="success claim", turn=claims[-1].ordinal,
                              anchor=claims[-1].anchor, quote=shorten(claims[-1].text, 80)))
    return Finding(
        turn=turn.ordinal, anchor=call.anchor if call else turn.anchor, severity=severity,
        severity_reason=reason, evidence=evidence,
        message=f"{what} {failure}; {outcome}.", facts=facts,
    )
