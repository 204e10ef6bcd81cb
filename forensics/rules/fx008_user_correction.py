"""FX008 user-correction: the user says the assistant got it wrong.

Structure first: a message the user typed right after an exchange in which the assistant acted
or claimed something (empty or failed replies may come between), that did not end with the
assistant asking a question (a message after the user rejected a call still counts: the
rejection is the interruption, the words after it are the correction). Then words: the message opens with
a correction. Strong openers ("that's wrong", "不对", "错了", "you broke") are corrections by
themselves; a bare negation ("no", "不是", "não", "нет") counts only when the message then
states what is actually true ("already", "still", "it worked", "已经", "还") or names something
the assistant just did (a program, file or word of its last action). Polite negatives ("no
worries") and changes of mind ("no, let's do X instead") are not corrections.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from forensics import knowledge_cache
from forensics.findings import Evidence, Finding
from forensics.model import AssistantTurn, Session, UserTurn
from forensics.analysis.phrases import cached_phrase_pattern
from forensics.rules import rule
from forensics.rules._facts import (
    asks_question,
    commands,
    compile_all,
    exchange_before,
    matches_any,
    opening,
)
from forensics.analysis.shell import split_commands
from forensics.analysis.text import shorten

_WORD = knowledge_cache.compile(r"[\w./-]{4,}")
_STOP = frozenset({"that", "this", "with", "from", "have", "what", "when", "then", "there",
                   "they", "will", "just", "your", "into", "about", "it's", "didn't", "don't",
                   "doesn't", "should", "would", "could", "first", "again", "please", "still",
                   "already", "here", "were", "been", "only", "also", "make", "sure"})


@dataclass(frozen=True)
class UserCorrectionParams:
    """FX008's ``[params]``: the phrase lists compiled once per parameter set."""

    param_names: ClassVar[frozenset[str]] = frozenset({
        "strong_openers", "negation_openers", "truth_words", "polite_negatives",
        "change_of_mind", "destructive_commands", "destruction_words", "opening_chars",
    })
    strong: re.Pattern[str] | None
    negation: re.Pattern[str] | None
    truth: re.Pattern[str] | None
    polite: re.Pattern[str] | None
    mind: re.Pattern[str] | None
    destructive: tuple[re.Pattern[str], ...]
    destroyed_words: re.Pattern[str] | None
    opening_chars: int

    @classmethod
    def from_params(cls, raw: Mapping[str, Any]) -> "UserCorrectionParams":
        return cls(
            strong=cached_phrase_pattern(tuple(raw["strong_openers"]), anchored=True),
            negation=cached_phrase_pattern(tuple(raw["negation_openers"]), anchored=True),
            truth=cached_phrase_pattern(tuple(raw["truth_words"])),
            polite=cached_phrase_pattern(tuple(raw["polite_negatives"]), anchored=True),
            mind=cached_phrase_pattern(tuple(raw["change_of_mind"])),
            destructive=tuple(compile_all(raw["destructive_commands"])),
            destroyed_words=cached_phrase_pattern(tuple(raw["destruction_words"])),
            opening_chars=raw["opening_chars"],
        )


@rule("FX008")
def user_correction(session: Session, params: UserCorrectionParams) -> Iterator[Finding]:
    p = params
    strong, negation, truth, polite, mind = p.strong, p.negation, p.truth, p.polite, p.mind
    destructive, destroyed_words, opening_chars = p.destructive, p.destroyed_words, p.opening_chars
    for user in session.turns:
        if not isinstance(user, UserTurn) or user.command:
            continue
        head = opening(user.text, opening_chars)
        if not head or (polite is not None and polite.match(head)):
            continue
        strong_hit = strong.match(head) if strong is not None else None
        negation_hit = None if strong_hit else (negation.match(head) if negation else None)
        if not strong_hit and not negation_hit:
            continue
        exchange = exchange_before(session, user)
        acted = [t for t in exchange if isinstance(t, AssistantTurn) and t.visible]
        if not acted:
            continue
        last_text = next((t.text for t in reversed(acted) if t.text.strip()), "")
        if last_text and asks_question(last_text) and not acted[-1].tool_calls:
            continue  # the user answers the assistant's question
        rest = head[(strong_hit or negation_hit).end():]
        if mind is not None and mind.search(rest[:60]) and not (truth and truth.search(rest)):
            continue  # a change of mind about their own request
        if negation_hit and not _refers(rest, truth, acted):
            continue
        yield _finding(session, user, acted, destructive, destroyed_words, head)


def _refers(rest: str, truth, acted: list[AssistantTurn]) -> bool:
    """After a bare negation: a statement of what is true, or a word of the assistant's action."""
    if truth is not None and truth.search(rest):
        return True
    # "No, the port …" stands apart from what follows; "no module named …" does not, so a
    # negation run into the sentence needs two words of the action, a separated one needs one.
    separated = bool(re.match(r"^\s*[,.!;:，。！—–-]", rest))
    words = {w.lower().strip("./-") for w in _WORD.findall(rest[:300])} - _STOP
    action = " ".join(
        [acted[-1].text[-800:]] + [cmd for _c, cmd in commands(acted[-1])]
        + [str(v) for c in acted[-1].tool_calls for v in c.input.values()
           if isinstance(v, str) and len(v) < 300]).lower()
    shared = sum(1 for w in words if len(w) >= 4 and w in action)
    return shared >= (1 if separated else 2)


def _finding(session: Session, user: UserTurn, acted: list[AssistantTurn], destructive,
             destroyed_words, head: str) -> Finding:
    corrected = acted[-1]
    destroying = [(t, c, cmd) for t in acted for c, cmd in commands(t)
                  if any(matches_any(destructive, s) for s in split_commands(cmd))]
    said_destroyed = destroyed_words is not None and destroyed_words.search(head)
    if destroying or said_destroyed:
        severity = "high"
        reason = ("the corrected action destroyed state (" +
                  (f"`{shorten(destroying[-1][2], 60)}`" if destroying else
                   f"the user says \"{said_destroyed.group(0)}\"") + ")")
    else:
        severity = "medium"
        reason = "the user rejected the premise of the assistant's last action"
    facts = [Evidence(kind="message", role="correction", turn=user.ordinal, anchor=user.anchor,
                      quote=shorten(user.text, 160))]
    if corrected.tool_calls:
        cmds = commands(corrected)
        what = (f"`{shorten(cmds[-1][1], 70)}`" if cmds
                else f"the {corrected.tool_calls[-1].name} call")
        call = cmds[-1][0] if cmds else corrected.tool_calls[-1]
        facts.append(Evidence(kind="call", role="corrected action", turn=corrected.ordinal,
                              anchor=call.anchor, command=cmds[-1][1] if cmds else call.name))
    else:
        what = f"\"{shorten(corrected.text, 70)}\""
        facts.append(Evidence(kind="claim", role="corrected claim", turn=corrected.ordinal,
                              anchor=corrected.anchor, quote=shorten(corrected.text, 160)))
    if destroying:
        turn, call, cmd = destroying[-1]
        facts.append(Evidence(kind="call", role="destroyed state", turn=turn.ordinal,
                              anchor=call.anchor, command=cmd))
    facts.sort(key=lambda f: f.turn)
    return Finding(turn=user.ordinal, anchor=user.anchor, severity=severity,
                   severity_reason=reason,
                   evidence=sorted({t.ordinal for t, _c, _cmd in destroying[-1:]}
                                   | {corrected.ordinal}),
                   message=f"The user corrected the assistant: \"{shorten(user.text, 90)}\" "
                           f"(about {what}).", facts=facts)
