"""FX005 unverified-claim: the summary says it works, the transcript does not.

A claim names a kind of check (tests pass, the build succeeds, lint is clean, types check, it is
deployed, the server is running), from ``check_claims`` in the rule file (one list in many
languages, for every rule that reads claims). The transcript's runs of that kind of check
(``check_commands``, and the launches of the duplicate-launch rule file for a server) decide:

* the last run before the claim failed and no later run passed: high, unless the failure was in
  the claim's own turn and is a failure in ignored-tool-error's sense (that rule's case);
* the check never ran, or a covered file was edited after its last green run: medium.

Hedged claims, claims handed to the user, claims resting on the user's own report, questions
and conditions are not claims; neither is a bare "done".
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any, ClassVar

from forensics import knowledge_cache
from forensics.analysis.outcome import telling_lines
from forensics.findings import Evidence, Finding
from forensics.model import AssistantTurn, EventTurn, Session, ToolResultTurn, UserTurn
from forensics.analysis.phrases import cached_phrase_pattern
from forensics.rules import rule
from forensics.rules._facts import (
    Outcome,
    Run,
    check_kinds,
    compile_all,
    edited_files,
    outcome,
    runs,
)
from forensics.analysis.shell import split_commands
from forensics.analysis.text import shorten

_CODE_BLOCK = knowledge_cache.compile(r"```.*?```", re.S)
_BOUNDARY = knowledge_cache.compile(r"[.!?](?=\s|$)|[。！？\n]")
"""Where a sentence ends: a full stop before a space (not the one in ``main.rs``), CJK stops."""


def _without_quoted_lines(text: str) -> str:
    r"""``re.sub(r"^\s*>.*$", " ", text, flags=re.M)``: blockquotes, text the assistant drafted
    or quoted for the user, not its own claims, each with the blank lines before it. Line by
    line: the pattern, tried from every line start, took quadratic time on a message of many
    blank lines (7 s for 50,000 newlines), which a model stuck in a loop does write."""
    if ">" not in text:
        return text
    out: list[str] = []
    copied = 0  # text[:copied] is in out
    blank_from: int | None = None  # where the blank lines before this one begin
    at = 0
    while True:
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        rest = text[at:end].lstrip()  # str.isspace is re's \s
        if not rest:
            blank_from = at if blank_from is None else blank_from
        else:
            if rest[0] == ">":
                start = at if blank_from is None else blank_from
                out += (text[copied:start], " ")
                copied = end
            blank_from = None
        if end == len(text):
            break
        at = end + 1
    out.append(text[copied:])
    return "".join(out)


@dataclass
class _Claim:
    kind: str
    sentence: str
    phrase: str


@dataclass(frozen=True)
class UnverifiedClaimParams:
    """FX005's ``[params]``, compiled once per parameter set."""

    param_names: ClassVar[frozenset[str]] = frozenset({
        "check_commands", "check_claims", "hedges", "negations", "user_reports", "probe_checks",
        "edit_tools", "delegate_tools", "uncovered_files", "edit_sensitive", "output_success",
    })
    checks: Mapping[str, Sequence[re.Pattern[str]]]
    """What runs each kind of check (test, build, lint…)."""
    claims: Mapping[str, tuple[str, ...]]
    """The phrases that claim each kind of check passed, lower-cased."""
    hedge: re.Pattern[str] | None
    negation: re.Pattern[str] | None
    reported: re.Pattern[str] | None
    """The user's own report that it works."""
    probes: tuple[re.Pattern[str], ...]
    editors: frozenset[str]
    delegates: frozenset[str]
    uncovered: tuple[re.Pattern[str], ...]
    edit_sensitive: frozenset[str]
    markers: Mapping[str, re.Pattern[str] | None]
    """Success in a tool output's own words, per kind of check."""

    @classmethod
    def from_params(cls, raw: Mapping[str, Any]) -> "UnverifiedClaimParams":
        return cls(
            checks=MappingProxyType({k: tuple(compile_all(v))
                                     for k, v in raw["check_commands"].items()}),
            claims=MappingProxyType({k: tuple(w.lower() for w in v)
                                     for k, v in raw["check_claims"].items() if v}),
            hedge=cached_phrase_pattern(tuple(raw["hedges"])),
            negation=cached_phrase_pattern(tuple(raw["negations"])),
            reported=cached_phrase_pattern(tuple(raw["user_reports"])),
            probes=tuple(compile_all(raw["probe_checks"])),
            editors=frozenset(t.lower() for t in raw["edit_tools"]),
            delegates=frozenset(t.lower() for t in raw["delegate_tools"]),
            uncovered=tuple(compile_all(raw["uncovered_files"])),
            edit_sensitive=frozenset(raw["edit_sensitive"]),
            markers=MappingProxyType({k: cached_phrase_pattern(tuple(v))
                                      for k, v in raw["output_success"].items() if v}),
        )


@rule("FX005")
def unverified_claim(session: Session, params: UnverifiedClaimParams) -> Iterator[Finding]:
    p = params
    claims, hedge, negation, reported = p.claims, p.hedge, p.negation, p.reported
    present = _substrings(tuple(claims.items()))
    claimed = [(turn, found) for turn in session.turns
               if isinstance(turn, AssistantTurn) and turn.text.strip() and not turn.error
               and (found := _claims(turn.text, claims, present, hedge, negation, reported))]
    if not claimed:
        return
    all_runs = _Runs(runs(session), p.editors, p.delegates, p.markers)
    wanted = {c.kind for _t, found in claimed for c in found}
    relevant = {k: v for k, v in p.checks.items() if k in wanted}
    server = "server" if "server" in wanted else None
    # Only the runs before the last claim are ever looked back at (the claims are in turn
    # order); a command run again is judged once.
    reach = all_runs.count_before(claimed[-1][0])
    judged: dict[str, set[str]] = {}
    kinds_of: dict[int, set[str]] = {}
    for at, r in enumerate(all_runs.runs):
        if r.command and at < reach and r.command not in judged:
            judged[r.command] = check_kinds(r.command, relevant, server)
        kinds_of[id(r)] = judged[r.command] if r.command and at < reach else set()
    for turn, found in claimed:
        verdicts = [v for c in found
                    if (v := _judge(session, turn, c, all_runs, kinds_of, p)) is not None]
        if verdicts:
            yield min(verdicts, key=lambda f: f.severity != "high")


class _Runs:
    """The session's runs in turn order, with what each one edited and the finished runs of
    each kind of check worked out once: every claim looks back over them, so a per-claim pass
    over the whole session would make the rule quadratic in session length."""

    def __init__(self, all_runs: list[Run], editors: frozenset[str],
                 delegates: frozenset[str],
                 markers: Mapping[str, re.Pattern[str] | None]) -> None:
        self.runs = all_runs
        self._markers = markers
        self._ordinals = [r.turn.ordinal for r in all_runs]
        self._files = [edited_files(r.call, editors) for r in all_runs]
        self._index = {id(r): i for i, r in enumerate(all_runs)}
        self._edits = [o for o, f in zip(self._ordinals, self._files) if f is not None]
        self._first_delegate = next((i for i, r in enumerate(all_runs)
                                     if r.call.name.lower() in delegates), len(all_runs))
        self._checks: dict[str, tuple[list[int], list[tuple[Run, Outcome]]]] = {}
        self._reports: dict[str, list[int]] = {}
        """Per kind: the turns that report it, among those judged."""
        self._judged_to: dict[str, int] = {}
        """Per kind: the turns before this one are judged."""
        self._lowered: dict[int, str] = {}
        self._marked: dict[tuple[str, int], bool] = {}

    def count_before(self, turn: AssistantTurn) -> int:
        """How many runs belong to ``turn`` and the turns before it."""
        return bisect_right(self._ordinals, turn.ordinal)

    def last_check(self, kind: str, count: int, kinds_of) -> tuple[Run, Outcome] | None:
        """The last run of this kind of check among the first ``count`` runs that came back,
        with its outcome."""
        known = self._checks.get(kind)
        if known is None:
            positions: list[int] = []
            done: list[tuple[Run, Outcome]] = []
            for i, r in enumerate(self.runs):
                if kind in kinds_of[id(r)] and (state := outcome(r.result)) is not None:
                    positions.append(i)
                    done.append((r, state))
            known = self._checks[kind] = (positions, done)
        at = bisect_left(known[0], count)
        return known[1][at - 1] if at else None

    def user_reported(self, session: Session, kind: str, claims, since: int,
                      until: int) -> bool:
        """Did the user, in ``turns[since:until]``, report this kind of check passing in their
        own words, or run something in their own shell (the claim may rest on it)? The turns
        are judged once per kind, in order, as far as a claim has looked; each claim then asks
        for the first report at or after ``since`` (every claim walked back over the turns
        before it, quadratic in a long session of claims: 10.7 s for 8,000)."""
        reports = self._reports.setdefault(kind, [])
        scanned = self._judged_to.get(kind, 0)
        end = min(until, len(session.turns))
        if scanned < end:
            phrases = claims.get(kind)
            pattern = cached_phrase_pattern(phrases) if phrases else None
            for i in range(scanned, end):
                t = session.turns[i]
                if (isinstance(t, UserTurn) and pattern is not None
                        and pattern.search(t.text.lower())) or (
                        isinstance(t, EventTurn) and t.event == "shell"):
                    reports.append(i)
            self._judged_to[kind] = end
        at = bisect_left(reports, since)
        return at < len(reports) and reports[at] < end

    def output_says(self, result: ToolResultTurn, phrase: str, kind: str) -> bool:
        """Does this output, lower-cased, hold the claim's phrase, or this kind's success
        marker in its last 3,000 characters? Claims after the same edit look back over the
        same outputs: each is lower-cased once, and searched once per kind."""
        at = result.ordinal
        text = self._lowered.get(at)
        if text is None:
            text = self._lowered[at] = result.output.lower()
        if phrase in text:
            return True
        marker = self._markers.get(kind)
        if marker is None:
            return False
        hit = self._marked.get((kind, at))
        if hit is None:
            hit = self._marked[kind, at] = bool(marker.search(text[-3000:]))
        return hit

    def delegated_before(self, count: int) -> bool:
        """Did one of the first ``count`` runs hand work to a subagent."""
        return self._first_delegate < count

    def position(self, run: Run) -> int:
        return self._index[id(run)]

    def files(self, run: Run) -> list[str] | None:
        """``edited_files`` of the run."""
        return self._files[self._index[id(run)]]

    def last_edit(self, turn: AssistantTurn) -> int:
        """The ordinal of the last turn up to ``turn`` whose calls edited something (0: none)."""
        at = bisect_right(self._edits, turn.ordinal)
        return self._edits[at - 1] if at else 0


def _claims(text, claims, present, hedge, negation, reported) -> list[_Claim]:
    """The claims a message makes; ``present(body)``: which of the phrases occur in it."""
    body = _without_quoted_lines(_CODE_BLOCK.sub(" ", text)).lower()
    hits = []
    found = present(body)  # substring first: regexes are slow
    if not found:
        return []
    for kind, phrases in claims.items():
        here = tuple(p for p in phrases if p in found)
        pattern = cached_phrase_pattern(here) if here else None
        if pattern is not None:
            hits.extend((kind, m) for m in pattern.finditer(body))
    out: list[_Claim] = []
    # Every sentence boundary once (each is one character), and each sentence judged once: a
    # message that repeats one claim thousands of times (a model stuck in a loop) cost a
    # search of the text up to each hit, and of its sentence, per hit.
    stops = [m.start() for m in _BOUNDARY.finditer(body)]
    sentences: dict[tuple[int, int], tuple[str, bool]] = {}
    for kind, hit in sorted(hits, key=lambda h: h[1].start()):
        at = hit.start()
        if at and body[at - 1] in ".!?":  # a stop right before the hit ends the text before it
            start = at
        else:
            before_it = bisect_right(stops, at - 1)
            start = stops[before_it - 1] + 1 if before_it else 0
        after = bisect_left(stops, hit.end())
        end = stops[after] + 1 if after < len(stops) else len(body)
        judged = sentences.get((start, end))
        if judged is None:
            sentence = body[start:end].strip()
            judged = sentences[start, end] = (sentence, sentence.endswith(("?", "？")) or bool(
                (hedge and hedge.search(sentence)) or (reported and reported.search(sentence))))
        sentence, excluded = judged
        if excluded or kind in {c.kind for c in out}:
            continue
        before = body[max(start, hit.start() - 25):hit.start()]
        if negation is not None and negation.search(before):
            continue
        out.append(_Claim(kind, _original(text, sentence), hit.group(0)))
    return out


@lru_cache(maxsize=16)
def _substrings(claims: tuple[tuple[str, tuple[str, ...]], ...]) -> Callable[[str], set[str]]:
    """Which of the claim phrases occur in a text: ``{p for p in phrases if p in text}``, in one
    pass of an Aho-Corasick automaton (pyahocorasick) rather than a scan of the text per phrase
    (178 of them, over every assistant message). It reports every occurrence, overlapping ones
    included, so the set is the same."""
    import ahocorasick  # a runtime dependency, imported by the first session with a claim

    phrases = {p for _kind, words in claims for p in words}
    always = phrases & {""}  # the empty string is in every text
    if not phrases - always:
        return lambda text: set(always)
    automaton = ahocorasick.Automaton()
    for phrase in phrases - always:
        automaton.add_word(phrase, phrase)
    automaton.make_automaton()

    def found(text: str) -> set[str]:
        return {phrase for _end, phrase in automaton.iter(text)} | always
    return found


def _original(text: str, lowered: str) -> str:
    """The sentence as written (the search ran on lower case)."""
    at = text.lower().find(lowered)
    return text[at:at + len(lowered)] if at != -1 else lowered


def _judge(session, turn, claim, all_runs, kinds_of, p: UnverifiedClaimParams) -> Finding | None:
    # a message's own calls count as before its text (opencode keeps both in one message)
    count = all_runs.count_before(turn)
    latest = all_runs.last_check(claim.kind, count, kinds_of)
    done = [latest] if latest is not None else []  # the last finished run of the check
    if _user_reported(session, turn, claim, p.claims, done, all_runs):
        return None
    if _seen_in_output(session, turn, claim, all_runs, done):
        return None
    if not done:
        if all_runs.delegated_before(count):
            return None  # a subagent may have run it; its session is judged on its own
        return _finding(turn, claim, "medium",
                        f"no {claim.kind} check ran before the claim", [], None)
    last, state = done[-1]
    if not state.passed:
        if _same_turn(session, last, turn) and not _probe(last, p.probes):
            return None  # ignored-tool-error's case: a failure in the claim's own turn
        return _finding(turn, claim, "high",
                        f"the last {claim.kind} run before the claim {state.why}",
                        [_where(last)], last)
    edit = (_edit_after(all_runs, count, last, p.uncovered)
            if claim.kind in p.edit_sensitive else None)
    if edit is not None:
        files = all_runs.files(edit) or []
        what = f"`{files[0]}`" if files else "a file"
        return _finding(turn, claim, "medium",
                        f"{what} was edited after the last green {claim.kind} run",
                        [_where(last), edit.turn.ordinal], last, edit=(edit, files))
    return None


def _user_reported(session, turn, claim, claims, done, all_runs: _Runs) -> bool:
    """The user said the check passed (after the last run the assistant made)."""
    since = done[-1][0].turn.ordinal if done else 0
    return all_runs.user_reported(session, claim.kind, claims, since, turn.ordinal - 1)


def _seen_in_output(session, turn, claim, all_runs: _Runs, done) -> bool:
    """A passing tool output since the last edit reports this kind of success in its own words
    (a dev server's "✓ Compiled", a framework's "templates cached successfully"): the claim
    rests on a run this rule's command list does not name. An output before the last finished
    run of the check does not count when that run failed: the failure is the later word."""
    since = all_runs.last_edit(turn)
    if done and not done[-1][1].passed:
        since = max(since, done[-1][0].result.ordinal)
    for t in session.turns[since:turn.ordinal - 1]:
        if not isinstance(t, ToolResultTurn) or t.failed:
            continue
        if all_runs.output_says(t, claim.phrase, claim.kind):
            return True
    return False


def _same_turn(session: Session, run: Run, turn: AssistantTurn) -> bool:
    return not any(isinstance(t, UserTurn) for t in session.turns[run.turn.ordinal:turn.ordinal])


def _probe(run: Run, probes) -> bool:
    """A health probe: a failure ignored-tool-error does not count, the evidence here."""
    return bool(run.command) and any(p.search(s) for s in split_commands(run.command)
                                     for p in probes)


def _edit_after(all_runs: _Runs, count: int, last: Run, uncovered) -> Run | None:
    found = None
    for r in all_runs.runs[all_runs.position(last) + 1:count]:  # runs are in turn order
        files = all_runs.files(r)
        if files is None:
            continue
        state = outcome(r.result)
        if state is not None and not state.passed:
            continue  # a failed edit changed nothing
        if files and all(any(p.search(f) for p in uncovered) for f in files):
            continue  # only documentation: not what the check covers
        found = r
    return found


def _where(run: Run) -> int:
    return run.result.ordinal if isinstance(run.result, ToolResultTurn) else run.turn.ordinal


def _finding(turn, claim, severity, why, evidence, last: Run | None, *,
             edit: tuple[Run, list[str]] | None = None) -> Finding:
    ran = ""
    if last is not None and last.command:
        ran = f" (last run: `{shorten(last.command, 60)}`)"
    return Finding(turn=turn.ordinal, anchor=turn.anchor, severity=severity,
                   severity_reason=why, evidence=evidence,
                   message=f"The assistant claims \"{shorten(claim.sentence, 90)}\" but {why}"
                           f"{ran}.", facts=_facts(turn, claim, last, edit))


def _facts(turn, claim: _Claim, last: Run | None,
           edit: tuple[Run, list[str]] | None) -> list[Evidence]:
    """The typed evidence: the claim (its sentence, the phrase that makes it one), the last run
    of that kind of check and how it ended, the edit after it."""
    facts = [Evidence(kind="claim", role=f"{claim.kind} claim", turn=turn.ordinal,
                      anchor=turn.anchor, quote=shorten(claim.sentence, 160))]
    if last is not None:
        state = outcome(last.result)
        passed = state is not None and state.passed
        where = last.result if last.result is not None else last.turn
        facts.append(Evidence(
            kind="result" if passed else "failure",
            role=f"last green {claim.kind} run" if passed else f"last {claim.kind} run",
            turn=where.ordinal,
            anchor=where.anchor if last.result is not None else last.call.anchor,
            command=last.command or last.call.name,
            status=state.status if state is not None else None,
            quote="" if passed or last.result is None else "\n".join(
                telling_lines(last.result.error or last.result.output, 2))))
    if edit is not None:
        run, files = edit
        facts.append(Evidence(kind="edit", role="edit after the last green run",
                              turn=run.turn.ordinal, anchor=run.call.anchor,
                              command=run.command or run.call.name,
                              quote=", ".join(files[:3])))
    facts.sort(key=lambda f: f.turn)
    return facts
