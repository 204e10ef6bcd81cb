"""FX003 ignored-tool-error: a tool call failed and the assistant carried on as if it had not.

Dealt with means the assistant reacted to *this* failure before the user wrote again (docs/rules.md,
"ignored-tool-error"; in full in rules/FX003-ignored-tool-error.toml):

* its words name the error itself: the exception or error code, the missing module, a quoted
  name, three words of the message, the failed command's own target (the file it could not
  read, the service it could not find), or hand the step to the user;
* its first words after the failure use a failure word, or a later sentence puts a failure
  word next to the file the error names or the failed program ("Tooltip.tsx still fails");
* its calls retry the step or touch what the error names (read the file or log, install the
  module, check the port, create the missing file).

A word that merely recurs from the output (a file name a feature summary would mention anyway, a
localhost URL, a subcommand such as ``build``) is not a reaction. A claim that the failed kind
of step succeeded (tests pass, the build succeeds, the server is running), with no passing rerun
before it and no words about the failure, makes the finding high whatever the calls did.
"""

from __future__ import annotations

import heapq
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property, partial
from itertools import islice
from types import MappingProxyType
from typing import Any, ClassVar

import orjson

from forensics import knowledge_cache
from forensics.analysis.commands import program
from forensics.analysis.ledger import holds_cased_needle, holds_needle, needles_of
from forensics.analysis.outcome import OutcomeRules
from forensics.analysis.outcome import any_of as _any_of
from forensics.analysis.outcome import telling_lines
from forensics.analysis.phrases import compile_later
from forensics.analysis.phrases import phrase_pattern as _phrases
from forensics.analysis.session import analysis_of
from forensics.analysis.shell import command_of as _script_of
from forensics.analysis.shell import FILE_KEYS, split_commands
from forensics.analysis.text import edges as _edges
from forensics.analysis.text import shorten
from forensics.findings import Evidence, Finding
from forensics.model import (AssistantTurn, EventTurn, Session, ToolCall, ToolResultTurn,
                             UserTurn)
from forensics.rules import rule

_PATH = knowledge_cache.compile(r"(?:[A-Za-z]:)?[\w.~-]*[/\\][\w./\\@+-]+")
_QUOTED = knowledge_cache.compile(r"[`'\"“‘]([^`'\"”’\n]{3,80})[`'\"”’]")
_NAMES = knowledge_cache.compile(
    r"\b[A-Z][A-Za-z]*(?:Error|Exception|Exit|Fault)\b|\bE[A-Z][A-Z_]{2,}\b"
    r"|\b[A-Z]{1,4}\d{3,5}\b")
_MODULE = knowledge_cache.compile(
    r"No module named ['\"]?([\w.]+)|Cannot find module ['\"]([^'\"]+)"
    r"|command not found: (\S+)|(\S+): command not found")


@rule("FX003")
def ignored_tool_error(session: Session, params: IgnoredToolErrorParams) -> Iterator[Finding]:
    k = params
    analysis = analysis_of(session)
    claims = _Claims(analysis.assistant_turns, k)
    index = _ReplyIndex(analysis, k)
    for result in session.turns:
        if not isinstance(result, ToolResultTurn) or result.aborted:
            continue
        owner = session.call_for(result)
        call = owner[1] if owner else None
        failure = _failure(analysis.outcome(result, k.outcome_rules))
        if failure is None:
            continue
        if owner and _user_wrote_between(session, owner[0].ordinal, result.ordinal):
            continue  # the user spoke before the result came back: the next step answers them
        found = _judge(session, result, owner, failure, k, claims, index)
        if found is not None:
            yield found
    yield from _launch_deaths(session, k, claims, index)


def _judge(session: Session, result: ToolResultTurn, owner, failure: str, k: IgnoredToolErrorParams,
           claims: "_Claims", index: "_ReplyIndex", *,
           died: "_Death | None" = None) -> Finding | None:
    """The finding for this failure, or None when the assistant dealt with it.

    ``result`` is the output that showed the failure: the call's own result, or, for a launch
    that died later, the read of its log (``died`` then says how, with the launch's own result).
    """
    call = owner[1] if owner else None
    analysis = analysis_of(session)
    if analysis.stopped_after(result.ordinal):
        return None
    lo, hi = analysis.replies_after(result.ordinal)
    replies = analysis.assistant_turns[lo:hi]
    if not replies:
        later = analysis.rest_of_exchange(result.ordinal)
        if _turn_ended_silently(session, result, later):
            return _finding(session, result, owner, failure, [], k, silent=True,
                            died=died)
        return None
    facts = _Facts(result, call, k)
    claim = claims.first_step_claim(lo, hi, facts.kind)
    reaction = _reaction(session, facts, call, lo, hi, index, k, any_settles=claim is None)
    if reaction is not None:
        return None  # words about it or a passing rerun; else, with no claim, any reaction
    return _finding(session, result, owner, failure, replies, k, step_claim=claim,
                    claimed=claims.last_claim(lo, hi), died=died)


class _Claims:
    """Which of the session's assistant turns claim success, asked of a span of them (the
    replies after a failure, up to the user's next message): the first that claims the failed
    kind of step worked, the last that claims success at all. Each failure read every reply
    after it, so a loop of failures in one long exchange grew with its square; remembered by
    position, each turn is read once per question."""

    def __init__(self, turns: list[AssistantTurn], k: IgnoredToolErrorParams) -> None:
        self.turns, self.k = turns, k
        self._next_step_claim: dict[str, dict[int, int]] = {}
        """Per kind of step: position -> the first claim at or after it, or the span's end."""
        self._last_claim: dict[int, tuple[int, int | None]] = {}
        """Per span end: how far down it was read, and the last claim found there."""

    def first_step_claim(self, lo: int, hi: int, kind: str | None) -> AssistantTurn | None:
        if not kind:
            return None
        memo = self._next_step_claim.setdefault(kind, {})
        passed: list[int] = []
        found = hi
        for p in range(lo, hi):
            known = memo.get(p)
            if known is not None:
                found = known
                break
            if _claims_step(self.turns[p], kind, self.k):
                found = p
                break
            passed.append(p)
        for p in passed:
            memo[p] = found  # every position of a span shares its end
        return self.turns[found] if found < hi else None

    def last_claim(self, lo: int, hi: int) -> AssistantTurn | None:
        read_to, found = self._last_claim.get(hi, (hi, None))
        while found is None and read_to > lo:
            read_to -= 1
            text = self.turns[read_to].text
            if text.strip() and self.k.claims.search(text.lower()):
                found = read_to
        self._last_claim[hi] = (read_to, found)
        return self.turns[found] if found is not None and found >= lo else None


class _ReplyIndex:
    """Where in each exchange the assistant's words and calls could react to a failure, made for
    an exchange only when a failure there goes unanswered for ``READ_IN_FULL`` replies."""

    def __init__(self, analysis, k: IgnoredToolErrorParams) -> None:
        self.analysis, self.k = analysis, k
        self.turns: list[AssistantTurn] = analysis.assistant_turns
        self._exchanges: dict[int, _ExchangeIndex] = {}

    def of_exchange(self, lo: int, hi: int) -> "_ExchangeIndex":
        """The index of the exchange whose replies ``lo:hi`` are the end of (by its end)."""
        made = self._exchanges.get(hi)
        if made is None:
            start, end = self.analysis.exchange_replies(self.turns[lo].ordinal)
            assert end == hi and start <= lo, "a span of replies crossed its exchange"
            made = self._exchanges[hi] = _ExchangeIndex(self.analysis.session, self.turns, start,
                                                        hi, self.k)
        return made


class _Unindexed(Exception):
    """A name whose occurrences the index cannot look up: every reply must be read."""


class _ExchangeIndex:
    """One exchange's replies by what a reaction would be found by: for the words of each reply
    (text and reasoning, as ``_Walk.read`` lowers them) and for the text of each call that is
    not only recording, the runs of word characters (``\\w+``) and of digits in them; the
    replies that hand a step over and the word runs of their sentences with a failure word;
    each call's command as written, its main program, its tool (all calls, and those that came
    back clean, which a rerun must be); the installs.

    A term ``_mentions`` finds is glued to no word character on either side, so each of its
    word runs is a whole run of the text: the replies without its rarest run cannot name it.
    A three-word message run's middle word, a status code, a port are whole runs likewise."""

    def __init__(self, session: Session, turns: list[AssistantTurn], start: int, end: int,
                 k: IgnoredToolErrorParams) -> None:
        self.turns, self.start, self.end = turns, start, end
        self.words: dict[str, list[int]] = {}
        self.word_digits: dict[str, list[int]] = {}
        self.ack_words: dict[str, list[int]] = {}
        self.handoffs: list[int] = []
        self.scripts: dict[str, list[int]] = {}
        self.programs: dict[str, list[int]] = {}
        self.tools: dict[str, list[int]] = {}
        self.clean: tuple[dict[str, list[int]], ...] = ({}, {}, {})
        """The scripts, programs and tools of the calls that came back clean."""
        self.call_words: dict[str, list[int]] = {}
        self.call_digits: dict[str, list[int]] = {}
        self.installs: list[int] = []
        for p in range(start, end):
            reply = turns[p]
            words = _words_of(reply)
            if words.strip():
                _add_runs(self.words, _WORD_RUN.findall(words), p)
                _add_runs(self.word_digits, _DIGIT_RUN.findall(words), p)
                if k.handoffs.search(words):
                    self.handoffs.append(p)
                for sentence in _sentences(words):
                    if k.acks.search(sentence):
                        _add_runs(self.ack_words, _WORD_RUN.findall(sentence), p)
            for later in reply.tool_calls:
                command = command_of(later)
                main = _main_program(command) if command else None
                same = (self.scripts, self.programs, self.tools)
                for tables in (same, self.clean) if _passed(session, later) else (same,):
                    scripts, programs, tools = tables
                    _add_runs(tools, (later.name,), p)
                    if command:
                        _add_runs(scripts, (" ".join(command.split()),), p)
                    if main:
                        _add_runs(programs, (main[0],), p)
                if command and _only_records(command, k):
                    continue
                blob = (command or _input_text(later)).lower()
                _add_runs(self.call_words, _WORD_RUN.findall(blob), p)
                _add_runs(self.call_digits, _DIGIT_RUN.findall(blob), p)
                if command and _step_kind(command, k) == "install" and (
                        not self.installs or self.installs[-1] != p):
                    self.installs.append(p)

    @cached_property
    def _joined(self) -> tuple[str, list[int]]:
        """Every reply's words in one text, and where each reply's begin: a failed tool's
        long input, echoed in a reply, is found there by plain search."""
        starts, parts, at = [], [], 0
        for p in range(self.start, self.end):
            reply = self.turns[p]
            words = _words_of(reply)
            starts.append(at)
            parts.append(words)
            at += len(words) + 1
        return "\0".join(parts), starts

    def could_react(self, facts: _Facts, call: ToolCall | None, walk: "_Walk", p: int,
                    hi: int) -> Iterator[int]:
        """The positions from ``p`` (below ``hi``) of the replies that could react to the
        failure, ascending: every reply that does is among them (``tests/test_fast_paths.py``
        holds them against reading every reply)."""
        try:
            runs = self._runs_to_look_for(facts, call, walk)
        except _Unindexed:
            yield from range(p, hi)
            return
        streams = [_from(positions, p) for positions in runs]
        streams.extend(self._echoes(window, p) for window in walk.echoes)
        last = -1
        for q in heapq.merge(*streams):
            if q >= hi:
                return
            if q != last:
                yield q
                last = q

    def _runs_to_look_for(self, facts: _Facts, call: ToolCall | None,
                          walk: "_Walk") -> list[list[int]]:
        decisive_only = walk.decisive_only
        out = [self.handoffs]
        out.extend(_rarest(self.words, t)
                   for t in (facts.terms if decisive_only else facts.terms | facts.targets))
        out.extend(_rarest(self.words, phrase.split(" ")[1]) for phrase in facts.phrases)
        out.extend(_rarest(self.word_digits, code) for code in facts.codes)
        out.extend(_rarest(self.ack_words, t) for t in walk.about)
        if call is not None:
            scripts, programs, tools = (self.clean if decisive_only
                                        else (self.scripts, self.programs, self.tools))
            failed = command_of(call)
            if failed:
                out.append(scripts.get(" ".join(failed.split()), []))
                if walk.failed_prog:
                    out.append(programs.get(walk.failed_prog[0], []))
            else:
                out.append(tools.get(call.name, []))
        if decisive_only:
            return [positions for positions in out if positions]
        out.extend(_rarest(self.call_words, t) for t in facts.call_names)
        out.extend(self.call_digits.get(port, []) for port in facts.ports)
        if facts.missing_dependency:
            out.append(self.installs)
        return [positions for positions in out if positions]

    def _echoes(self, window: str, p: int) -> Iterator[int]:
        if p >= self.end:
            return
        text, starts = self._joined
        at = text.find(window, starts[p - self.start])
        while at >= 0:
            q = bisect_right(starts, at) - 1
            yield q + self.start
            if q + 1 >= len(starts):
                return
            at = text.find(window, starts[q + 1])


_WORD_RUN = re.compile(r"\w+")
_DIGIT_RUN = re.compile(r"\d+")


def _add_runs(table: dict[str, list[int]], runs, p: int) -> None:
    for run in runs:
        positions = table.get(run)
        if positions is None:
            table[run] = [p]
        elif positions[-1] != p:
            positions.append(p)


def _rarest(table: dict[str, list[int]], term: str) -> list[int]:
    """The replies holding the rarest of ``term``'s word runs (as ``_mentions`` folds it)."""
    folded = _slashes(term)
    needle = folded.lower()
    runs = _WORD_RUN.findall(needle)
    if not runs or _is_word(folded[:1]) != _is_word(needle[:1]) or (
            _is_word(folded[-1:]) != _is_word(needle[-1:])):
        raise _Unindexed(term)  # lowering changed what its edges are glued to
    return min((table.get(run, []) for run in runs), key=len)


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _from(positions: list[int], p: int) -> Iterator[int]:
    return map(positions.__getitem__, range(bisect_left(positions, p), len(positions)))


@dataclass(frozen=True)
class _Death:
    """How a launch whose call came back clean died, as the ledger saw it."""

    result: ToolResultTurn
    """The launch's own (clean) result."""
    status: str
    """``crashed`` or ``port taken``."""
    words: str
    """The line that showed it."""


def _launch_deaths(session: Session, k: IgnoredToolErrorParams, claims: _Claims,
                   index: "_ReplyIndex") -> Iterator[Finding]:
    """Launches that died while the call that started them came back clean: the process
    ledger saw their own output or a later read of their log (``tail``, ``Read``, the harness's
    task output) report a crash or a taken port, and nothing showed them alive again."""
    analysis = analysis_of(session)
    for launch in analysis.process_ledger().launches:
        death = next((c for c in launch.changes
                      if c.kind in ("crash", "crash-after-up", "conflict")), None)
        if death is None or launch.result is None or any(
                c.kind == "revived" and c.clock > death.clock for c in launch.changes):
            continue
        own, shown = session.turn(launch.result), session.turn(death.ordinal)
        if not isinstance(own, ToolResultTurn) or not isinstance(shown, ToolResultTurn):
            continue
        if own.aborted or analysis.outcome(own, k.outcome_rules).failed:
            continue  # its own result failed: judged as the call's failure above
        owner = session.call_for(own)
        if owner is None:
            continue
        words = launch.result_words if death.kind == "conflict" else launch.death_words
        where = "its output" if shown is own else f"its log, read later (turn {shown.ordinal}),"
        failure = (f"came back clean but {where} showed "
                   + ("its port was taken" if death.kind == "conflict" else "it died")
                   + (f": `{shorten(words, 80)}`" if words else ""))
        found = _judge(session, shown, owner, failure, k, claims, index, died=_Death(
            own, "port taken" if death.kind == "conflict" else "crashed", words))
        if found is not None:
            yield found


def _user_wrote_between(session: Session, call_ordinal: int, result_ordinal: int) -> bool:
    return any(isinstance(t, UserTurn) for t in session.turns[call_ordinal:result_ordinal - 1])


def _turn_ended_silently(session: Session, result: ToolResultTurn, later: list) -> bool:
    """No reply at all before the user wrote again: the turn ended on the failure. A session
    that simply ends here (exported while running) is not counted."""
    nxt = result.ordinal + len(later)
    if nxt >= len(session.turns):
        return False
    user = session.turns[nxt]
    if not isinstance(user, UserTurn):
        return False
    # words recorded at the very moment of the result came with it (Cline's feedback on a tool
    # result): the assistant had no step of its own before the user wrote
    return not (user.time is not None and result.time is not None
                and abs(user.time - result.time) < SAME_MOMENT_SECONDS)


SAME_MOMENT_SECONDS = 1.0


@dataclass(frozen=True, eq=False)
class IgnoredToolErrorParams:
    """FX003's ``[params]``, compiled once per parameter set."""

    param_names: ClassVar[frozenset[str]] = frozenset({
        "probe_commands", "probe_patterns", "benign_commands", "death_patterns",
        "exit_text_patterns", "failure_text_patterns", "error_line_patterns",
        "subcommand_words", "missing_dependency_patterns", "acknowledgements", "handoffs",
        "success_claims", "step_commands", "step_claims", "plain_programs", "common_words",
        "recording_commands",
    })
    retired_params: ClassVar[Mapping[str, str]] = MappingProxyType({
        "death_words": "the death patterns' own needles decide which outputs are searched",
    })
    """Parameters of earlier releases a configuration may still set: said, then ignored."""
    probes: frozenset[str]
    probe_patterns: tuple[re.Pattern[str], ...]
    benign: frozenset[str]
    death: re.Pattern[str] | None
    death_needles: tuple[str, ...] | None
    """Texts one of which every ``death`` match holds as written (``ledger.needles_of``): an
    output without any is not searched, one with one is searched whole."""
    exit_text: re.Pattern[str] | None
    exit_needles: tuple[str, ...] | None
    """Folded texts one of which every ``exit_text`` match holds (``ledger.needles_of``, read
    from the patterns' parse): a result without any needs no search. None: always searched."""
    failure_text: re.Pattern[str] | None
    error_line: re.Pattern[str] | None
    subcommands: frozenset[str]
    missing: re.Pattern[str] | None
    acks: re.Pattern[str]
    handoffs: re.Pattern[str]
    claims: re.Pattern[str]
    step_commands: Mapping[str, re.Pattern[str] | None]
    step_claims: Mapping[str, re.Pattern[str]]
    plain: frozenset[str]
    common: frozenset[str]
    recording: tuple[re.Pattern[str], ...]
    """Commands that record or publish changes (git add/commit/push…): not an investigation."""

    @classmethod
    def from_params(cls, raw: Mapping[str, Any]) -> "IgnoredToolErrorParams":
        return cls(
            probes=frozenset(raw["probe_commands"]),
            probe_patterns=tuple(compile_later(p) for p in raw["probe_patterns"]),
            benign=frozenset(raw["benign_commands"]),
            death=_any_of(raw["death_patterns"]),
            death_needles=needles_of(raw["death_patterns"], re.M, cased=True),
            exit_text=_any_of(raw["exit_text_patterns"]),
            exit_needles=needles_of(raw["exit_text_patterns"]),
            failure_text=_any_of(raw["failure_text_patterns"]),
            error_line=_any_of(raw["error_line_patterns"]),
            subcommands=frozenset(w.lower() for w in raw["subcommand_words"]),
            missing=_any_of(raw["missing_dependency_patterns"]),
            acks=_phrases(raw["acknowledgements"], prefix=True),
            handoffs=_phrases(raw["handoffs"], prefix=True),
            claims=_phrases(raw["success_claims"]),
            step_commands=MappingProxyType(
                {kind: _any_of(patterns) for kind, patterns in raw["step_commands"].items()}),
            step_claims=MappingProxyType(
                {kind: _phrases(words) for kind, words in raw["step_claims"].items()}),
            plain=frozenset(raw["plain_programs"]),
            common=frozenset(w.lower() for w in raw["common_words"]),
            recording=tuple(compile_later(p) for p in raw["recording_commands"]),
        )

    @cached_property
    def outcome_rules(self) -> OutcomeRules:
        """How this rule judges results: its death, exit-text and failure lists, its probes."""
        return OutcomeRules(
            death=self.death, exit_text=self.exit_text,
            death_gate=partial(holds_cased_needle, self.death_needles)
            if self.death_needles else None,
            exit_gate=partial(holds_needle, self.exit_needles) if self.exit_needles else None,
            failure_text=self.failure_text, is_probe=lambda command: _is_probe(command, self))


# -- what counts as a failure -------------------------------------------------------------


def command_of(call: ToolCall | None) -> str | None:
    return _script_of(call) if call is not None else None


def _failure(outcome) -> str | None:
    """How the call failed, in words, or None when it did not (or only probed)."""
    return outcome.describe() if outcome.failed else None


def _is_probe(command: str, k: IgnoredToolErrorParams) -> bool:
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


# -- what the failure says ---------------------------------------------------------------------


class _Facts:
    """What a reaction to this failure would name, taken from its error lines only.

    * ``terms``: the error itself (exception and error-code names, the missing module, quoted
      names, runs of three words of the message): naming one is a reference on its own.
    * ``targets``: the failed command's own arguments or file that the error lines name (the
      file it could not read, the service it could not find): the strongest reference.
    * ``subjects``: files and paths the error lines name: a reference only together with a
      failure word in the same sentence ("Tooltip.tsx still fails"), never alone.
    * ``ports``: ports the error lines name, which a check of the port would touch.
    """

    def __init__(self, result: ToolResultTurn, call: ToolCall | None, k: IgnoredToolErrorParams):
        lines = _error_lines(result, k)
        text = "\n".join(lines)
        bare = _URL.sub(" ", text)
        self.terms: set[str] = set(_NAMES.findall(bare))
        self.modules = {g for m in _MODULE.finditer(bare) for g in m.groups() if g}
        self.terms |= self.modules
        self.quoted: set[str] = set()
        for m in _QUOTED.finditer(bare):
            quoted = m.group(1).strip()
            if len(quoted) > 3 and quoted.lower() not in k.common:
                self.quoted.add(quoted)
                if _NAME_LIKE.search(quoted):
                    self.terms.add(quoted)
        self.phrases = _message_runs("\n".join(line for line in bare.splitlines()
                                               if k.error_line.search(line)))
        codes = {m.group(1) for m in _HTTP_STATUS.finditer(bare)}
        if result.exit_code not in (None, 0, 1):
            codes.add(str(result.exit_code))
        self.codes = codes
        self.status = (re.compile(r"(?:exit(?:ed)?(?: with)?(?: code| status)?|status(?: code)?"
                                  r"|code|http)\W{0,3}(?:" + "|".join(sorted(codes)) + r")\b")
                       if codes else None)
        self.subjects: set[str] = set()
        for m in _PATH.finditer(bare):
            path = m.group(0).strip(".,:;()[]'\"")
            if len(path) > 3 and path.lower() not in k.common:
                self.subjects.add(path)
                base = re.split(r"[/\\]", path)[-1]
                base = re.sub(r"[(:]\d.*$", "", base)  # Tooltip.tsx(12,5) / app.py:41
                if len(base) > 3 and "." in base:
                    self.subjects.add(base)
        self.ports = set(_PORT.findall(bare))
        low = _slashes(bare.lower())
        self.own = _own_targets(call, k)
        self.targets = {t for t in self.own if _slashes(t.lower()) in low}
        self.terms = {t for t in self.terms if len(t) > 2 and t.lower() not in k.common}
        self.missing_dependency = bool(self.modules) or bool(k.missing.search(bare))
        self.program = None
        command = command_of(call)
        if command:
            main = _main_program(command)
            if main and main[0] not in k.plain:
                self.program = main[0]
        self.kind = _step_kind(command, k) if command else None

    def names_error(self, words: str) -> bool:
        """Does this text name the error itself (its name, code, module or message)?"""
        if any(_mentions(words, t) for t in self.terms):
            return True
        if self.status is not None and self.status.search(words):
            return True
        return any(p in words for p in self.phrases)

    def names_target(self, words: str) -> bool:
        """Does this text name what the failed call was aimed at, as the error names it?"""
        return any(_mentions(words, t) for t in self.targets)

    def named_in_call(self, blob: str) -> bool:
        """Does a later call touch what the failure is about (the failed call's own file or
        target, a file or module the error names, the port it names)?"""
        if any(_mentions(blob, t) for t in self.call_names):
            return True
        return any(re.search(rf"(?<!\d){p}(?!\d)", blob) for p in self.ports)

    @cached_property
    def call_names(self) -> frozenset[str]:
        """The names a later call touches when it looks at what failed (``named_in_call``)."""
        names = self.own | self.subjects | self.modules | self.quoted | {
            t for t in self.terms if _NAME_LIKE.search(t)}
        names |= {folder for path in self.own | self.subjects for folder in _folders(path)}
        return frozenset(names)


_HTTP_STATUS = knowledge_cache.compile(
    r"(?i)\b(?:HTTP(?:/[\d.]+)?|status(?: code)?)\s*:?\s*([1-5]\d\d)\b")
_URL = knowledge_cache.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_PORT = knowledge_cache.compile(r"(?:port\s+|:)(\d{4,5})\b", re.I)
_NAME_LIKE = knowledge_cache.compile(r"[A-Z_./\\:-]|\d|[a-z][A-Z]")
_WORD = knowledge_cache.compile(r"[^\W\d_]{2,}")


def _error_lines(result: ToolResultTurn, k: IgnoredToolErrorParams) -> list[str]:
    """The lines that carry the failure: the harness's error, then output lines that look like
    errors; the output's last lines when none does (a status sits at the end)."""
    out = [line for line in (result.error or "").splitlines() if line.strip()]
    text = _edges(result.output)
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) <= 6:
        out.extend(lines)  # a short output is all status
    else:
        marked = list(islice((line for line in lines if k.error_line.search(line)), 40))
        out.extend(marked or lines[-3:])
    return [line[:400] for line in out]


def _message_runs(text: str) -> set[str]:
    """Runs of three words from the error messages, the part after ``Error:`` and the like."""
    runs: set[str] = set()
    for line in text.splitlines():
        message = line.split(":", 1)[1] if ":" in line[:60] else line
        words = [w.lower() for w in _WORD.findall(message)]
        runs.update(" ".join(words[i:i + 3]) for i in range(len(words) - 2))
    return {r for r in runs if len(r) > 10}


def _own_targets(call: ToolCall | None, k: IgnoredToolErrorParams) -> set[str]:
    """What the failed call was aimed at: its file input, or its command's positional
    arguments other than subcommand words (``build`` of ``npm run build`` is not a target)."""
    if call is None:
        return set()
    out: set[str] = set()
    for key in _PATH_KEYS:
        value = call.input.get(key)
        if isinstance(value, str) and value:
            out.add(value)
            base = re.split(r"[/\\]", value)[-1]
            if len(base) > 3:
                out.add(base)
    command = command_of(call)
    if command:
        for simple in split_commands(command):
            prog, args = program(simple)
            if not prog or prog in k.benign:
                continue
            for a in args:
                a = a.strip("'\"")
                if (a.startswith("-") or _ASSIGNMENT.match(a) or len(a) < 3
                        or a.lower() in k.subcommands):
                    continue
                out.add(a)
                if "/" in a:
                    out.add(a.rsplit("/", 1)[-1])
    return {t for t in out if len(t) > 2}


_PATH_KEYS = (*FILE_KEYS, "url")  # a fetch tool's target is its URL
_ASSIGNMENT = knowledge_cache.compile(r"^[A-Za-z_][\w.-]*=")


def _slashes(text: str) -> str:
    return text.replace("\\\\", "/").replace("\\", "/")


def _folders(path: str) -> set[str]:
    """Where a path lives, as a later call would name it: its folder, and its last two parts
    (``sdk/dist`` of ``…/node_modules/@x/sdk/dist/index.d.ts``), so that listing the folder or
    reading the file by another relative path counts as looking at it."""
    parts = [p for p in _slashes(path).split("/") if p and p not in (".", "~")]
    out = set()
    if len(parts) >= 2:
        out.add("/".join(parts[-2:]))
    if len(parts) >= 3:
        out.add("/".join(parts[-3:-1]))
    return {f for f in out if len(f) >= 8}


def _mentions(text: str, term: str) -> bool:
    r"""``term`` as a whole word in lower-cased ``text`` (path separators folded to ``/``): an
    occurrence not glued to a word character, ``.`` or ``-`` before it (where the term starts
    with a word character) nor to a word character or ``-`` after it (where it ends with one).

    The same as searching ``(?<![\w.-])term(?![\w-])`` (``tests/test_fast_paths.py`` holds
    the two equal) without compiling a pattern per term: the compiles were a twentieth
    of all the rules' time, since most terms are new in each session."""
    term = _slashes(term)
    text = _slashes(text)
    needle = term.lower()
    at = text.find(needle)
    if at < 0:
        return False
    first, last = term[:1], term[-1:]
    left = first.isalnum() or first == "_"
    right = last.isalnum() or last == "_"
    end = len(needle)
    while at >= 0:
        before = text[at - 1] if at else ""
        after = text[at + end:at + end + 1]
        if not (left and before and (before.isalnum() or before in "_.-")) and not (
                right and after and (after.isalnum() or after in "_-")):
            return True
        at = text.find(needle, at + 1)
    return False


def _step_kind(command: str, k: IgnoredToolErrorParams) -> str | None:
    for kind, pattern in k.step_commands.items():
        if pattern.search(command):
            return kind
    return None


# -- what counts as dealing with it -----------------------------------------------------------


def _opening(text: str, sentences: int = 2, width: int = 300) -> str:
    """The first sentences of a reply: where a reaction to what it just saw is said."""
    return " ".join(_sentences(text)[:sentences])[:width]


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?。！？])\s+|\n+", text) if s.strip()]


def _reaction(session: Session, facts: _Facts, call: ToolCall | None, lo: int, hi: int,
              index: "_ReplyIndex", k: IgnoredToolErrorParams, *,
              any_settles: bool) -> str | None:
    """How the assistant reacted to this failure in its turns ``lo:hi`` (before the user wrote
    again), strongest first:

    * ``"said"``: its words name the error, or use a failure word about this step, or hand the
      step to the user;
    * ``"rerun-ok"``: it ran the failed step again and it passed;
    * ``"target"``: its words name the failed call's own target (weaker: a summary that claims
      the step worked names the same file);
    * ``"call"``: it retried or investigated (read the file, installed the module);
    * None: no reaction.

    ``any_settles``: nothing after it claims the step worked, so any reaction deals with it and
    the walk ends at the first. Else a claim follows, and only ``"said"`` and ``"rerun-ok"``
    deal with it: the weaker reactions are not looked for (None), and the walk reads every
    reply to the user's next message that could say or rerun.
    """
    walk = _Walk(session, facts, call, k, decisive_only=not any_settles)
    for p in _replies_to_read(walk, facts, call, index, lo, hi):
        decided = walk.read(index.turns[p])
        if decided is not None:
            return decided
        if walk.found:
            break
    return "target" if "target" in walk.found else "call" if "call" in walk.found else None


READ_IN_FULL = 16
"""Replies after a failure read one by one before the exchange's index picks the rest."""


def _replies_to_read(walk: "_Walk", facts: _Facts, call: ToolCall | None, index: "_ReplyIndex",
                     lo: int, hi: int) -> Iterator[int]:
    """The positions of the replies ``walk`` must read: the first ``READ_IN_FULL`` each, then
    only those the exchange's index says could react (a failure that nothing answers was read
    against every reply after it, so a loop of them in one long exchange grew with its square).
    The index answers only once the walk's first step and first call are behind it: what it
    looks up is what any later reply is judged by."""
    p = lo
    while p < hi:
        yield p
        p += 1
        if p < hi and p - lo >= READ_IN_FULL and not walk.immediate and not walk.first_call:
            break
    else:
        return
    yield from index.of_exchange(lo, hi).could_react(facts, call, walk, p, hi)


class _Walk:
    """One failure's reading of the replies after it, one reply at a time, in order."""

    __slots__ = ("session", "facts", "call", "k", "decisive_only", "failed_prog", "echoes",
                 "about", "immediate", "first_call", "found")

    def __init__(self, session: Session, facts: _Facts, call: ToolCall | None,
                 k: IgnoredToolErrorParams, *, decisive_only: bool = False) -> None:
        self.session, self.facts, self.call, self.k = session, facts, call, k
        self.decisive_only = decisive_only
        """Look only for ``"said"`` and ``"rerun-ok"``: a claim follows the failure."""
        failed_command = command_of(call)
        self.failed_prog = _main_program(failed_command) if failed_command else None
        self.echoes = _input_windows(call) if call is not None and not failed_command else []
        self.about = {s.lower() for s in facts.subjects} | (
            {facts.program} if facts.program else set())
        self.immediate = True  # the replies before the assistant's next step: a failure word
        self.first_call = True  # there is about the failure it just saw; its next call is a
        self.found: set[str] = set()  # retry when it runs the same program (arguments changed)

    def read(self, reply: AssistantTurn) -> str | None:
        """Read one more reply: ``"said"`` or ``"rerun-ok"`` when it settles the failure, else
        None (a weaker reaction is added to ``found``)."""
        facts, k, call = self.facts, self.k, self.call
        words = _words_of(reply)
        if words.strip():
            if facts.names_error(words) or k.handoffs.search(words):
                return "said"
            if self.immediate and (k.acks.search(_opening(reply.text.lower()))
                                   or k.acks.search(_opening(reply.reasoning.lower()))):
                return "said"
            if self.about:
                for sentence in _sentences(words):
                    if k.acks.search(sentence) and any(_mentions(sentence, t)
                                                       for t in self.about):
                        return "said"
            if any(w in words for w in self.echoes):
                return "said"  # did by hand what the failed tool was for (asked in plain text)
            if not self.decisive_only and facts.names_target(words):
                self.found.add("target")
        if reply.tool_calls or reply.visible:
            self.immediate = False
        for later in reply.tool_calls:
            next_step, self.first_call = self.first_call, False
            if call is not None and _same_call(call, later, self.failed_prog):
                if _passed(self.session, later):
                    return "rerun-ok"
                if not self.decisive_only:
                    self.found.add("call")
                continue
            if self.decisive_only:
                continue
            if next_step and _same_program(self.failed_prog, later):
                self.found.add("call")  # a changed retry: the same program, other arguments
                continue
            later_command = command_of(later)
            if later_command and _only_records(later_command, k):
                continue  # staging or committing the file investigates nothing
            blob = (later_command or _input_text(later)).lower()
            if facts.named_in_call(blob):
                self.found.add("call")
            elif (facts.missing_dependency and later_command
                  and _step_kind(later_command, k) == "install"):
                self.found.add("call")  # installs what the error said was missing
        return None


def _words_of(reply: AssistantTurn) -> str:
    """A reply's text and reasoning, lowered: what its words are searched in (the walk and the
    exchange's index must read the same text)."""
    return f"{reply.text}\n{reply.reasoning}".lower()


def _only_records(command: str, k: IgnoredToolErrorParams) -> bool:
    """Is the command made only of recording steps (git add/commit/push…) and benign ones?"""
    recorded = False
    for step in split_commands(command):
        prog, _args = program(step)
        if any(p.search(step.strip()) for p in k.recording):
            recorded = True
        elif prog and prog not in k.benign:
            return False
    return recorded


def _passed(session: Session, call: ToolCall) -> bool:
    """The rerun's own result came back clean (no failure status, no error, no kill)."""
    result = session.result_for(call)
    return result is not None and not (result.failed or result.timed_out or result.killed)


def _claims_step(reply: AssistantTurn, kind: str | None, k: IgnoredToolErrorParams) -> bool:
    """Does this reply claim the failed kind of step succeeded (tests pass, build succeeds)?"""
    if not kind or not reply.text.strip():
        return False
    pattern = k.step_claims.get(kind)
    return bool(pattern and pattern.search(reply.text.lower()))


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


def _input_text(call: ToolCall) -> str:
    """A non-shell call's arguments as plain text (paths unescaped, unlike its JSON)."""
    return "\n".join(str(v) for v in call.input.values() if isinstance(v, (str, int, float)))


def _same_program(failed_prog, later: ToolCall) -> bool:
    again = _main_program(command_of(later) or "")
    return bool(failed_prog and again and failed_prog[0] == again[0])


def _same_call(call: ToolCall, later: ToolCall, failed_prog) -> bool:
    """A retry: the same command, the same program on the same arguments (a subset either way),
    or the same non-shell tool on the same file."""
    failed, again_cmd = command_of(call), command_of(later)
    if failed and again_cmd:
        if " ".join(failed.split()) == " ".join(again_cmd.split()):
            return True
        again = _main_program(again_cmd)
        if failed_prog and again and failed_prog[0] == again[0]:
            a, b = set(failed_prog[1]), set(again[1])
            return not a or a <= b or (bool(b) and b <= a)
        return False
    if failed or call.name != later.name:
        return False
    target = next((call.input.get(key) for key in _PATH_KEYS if call.input.get(key)), None)
    again_target = next((later.input.get(key) for key in _PATH_KEYS if later.input.get(key)),
                        None)
    return target is None or target == again_target


# -- the finding ------------------------------------------------------------------------------


def _finding(session: Session, result: ToolResultTurn, owner, failure: str,
             replies: list[AssistantTurn], k: IgnoredToolErrorParams, *,
             step_claim: AssistantTurn | None = None, claimed: AssistantTurn | None = None,
             silent: bool = False, died: "_Death | None" = None) -> Finding:
    turn, call = owner if owner else (result, None)
    what = f"`{shorten(command_of(call), 90)}`" if command_of(call) else (
        f"the {result.name or 'tool'} call")
    if silent and any(isinstance(t, EventTurn) and t.event == "turn_complete"
                      for t in analysis_of(session).rest_of_exchange(result.ordinal)):
        severity = "high"
        reason = "the turn completed right after the failure with an empty reply"
        outcome = "the turn completed with nothing said"
    elif silent:
        severity = "medium"
        reason = "the turn ended right after the failure without a word about it"
        outcome = "the turn ended there, with no reply about it"
    elif not replies[0].visible and not replies[0].aborted and replies[0].error is None:
        severity = "high"
        reason = "the reply right after the failure was empty"
        outcome = "the next reply was empty"
    elif step_claim is not None or claimed is not None:
        severity = "high"
        reason = ("the assistant claims this step succeeded without running it again"
                  if step_claim is not None
                  else "the assistant's text claims success despite the failure")
        claim = step_claim or claimed
        outcome = f"the assistant went on to say \"{shorten(claim.text, 80)}\""
    else:
        severity = "medium"
        reason = "the assistant moved on without a word about the failure"
        outcome = "the assistant moved on without mentioning it"
    evidence = [result.ordinal] + [r.ordinal for r in replies[:3]]
    if died is not None and died.result is not result:
        evidence.insert(0, died.result.ordinal)
    said = step_claim or (claimed if not silent else None)
    facts = _facts(session, result, call, replies[:3], said, k, died)
    return Finding(
        turn=turn.ordinal, anchor=call.anchor if call else turn.anchor, severity=severity,
        severity_reason=reason, evidence=evidence,
        message=f"{what} {failure}; {outcome}.", facts=facts,
    )


def _facts(session: Session, result: ToolResultTurn, call: ToolCall | None,
           replies: list[AssistantTurn], said: AssistantTurn | None,
           k: IgnoredToolErrorParams, died: "_Death | None" = None) -> list[Evidence]:
    """The typed evidence: the failure (how, and the lines that show it), what the assistant
    did next, and the success it claimed. For a launch that died, the failure is the read
    that showed it, with the ledger's words for how."""
    outcome = analysis_of(session).outcome(result, k.outcome_rules)
    lines = telling_lines(result.error or result.output, 3)
    if died is not None and died.words and not any(died.words in ln for ln in lines):
        lines = [*lines[:2], died.words]
    elif outcome.cause in ("death", "text") and not any(outcome.words in ln for ln in lines):
        lines = [*lines[:2], shorten(outcome.words, 200)]  # the line the rule judged by
    status = died.status if died is not None else outcome.status() or "failed"
    facts = [Evidence(kind="failure", role="failed call", turn=result.ordinal,
                      anchor=result.anchor, command=command_of(call),
                      status=status, quote="\n".join(lines))]
    for reply in replies:
        if reply is said:
            continue
        if not reply.visible and not reply.aborted and reply.error is None:
            facts.append(Evidence(kind="reply", role="empty reply", turn=reply.ordinal,
                                  anchor=reply.anchor))
        elif reply.text.strip():
            facts.append(Evidence(kind="reply", role="moved on", turn=reply.ordinal,
                                  anchor=reply.anchor, quote=shorten(reply.text, 160)))
        elif reply.tool_calls:
            nxt = reply.tool_calls[0]
            facts.append(Evidence(kind="reply", role="moved on", turn=reply.ordinal,
                                  anchor=nxt.anchor, command=command_of(nxt) or nxt.name))
    if said is not None:
        facts.append(Evidence(kind="claim", role="success claim", turn=said.ordinal,
                              anchor=said.anchor, quote=shorten(said.text, 160)))
    facts.sort(key=lambda f: f.turn)
    return facts
