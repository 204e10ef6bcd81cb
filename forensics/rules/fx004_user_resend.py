"""FX004 user-resend: the user had to say it again.

Two messages are compared on what the user typed: a slash command on its name and arguments, not
on the template it expands to. Identical or near-identical long messages count when the earlier
one got a reply and the user repeated it next; short ones, continuation words and slash commands
count only when the reply they repeat was empty, failed, errored or (for explicit retries)
aborted.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cache
from itertools import pairwise
from typing import Any, ClassVar, Literal

from forensics import knowledge_cache
from forensics.analysis.session import STOP_EVENTS, analysis_of
from forensics.analysis.text import shorten
from forensics.findings import Evidence, Finding
from forensics.model import AssistantTurn, EventTurn, Session, ToolResultTurn, UserTurn
from forensics.rules import rule
from forensics.analysis.outcome import any_of, telling_lines
from forensics.analysis.phrases import compile_later

ReplyStatus = Literal["none", "aborted", "error", "empty", "failed", "ok"]
BAD = frozenset({"error", "empty", "failed"})
_PUNCT = knowledge_cache.compile(r"[\s\.\!\?。！？，,…~]+$")


@dataclass(frozen=True)
class UserResendParams:
    """FX004's ``[params]``: thresholds, and the word lists folded as messages are."""

    param_names: ClassVar[frozenset[str]] = frozenset({
        "similarity", "short_message_chars", "lookback", "template_patterns",
        "cut_short_min_chars", "cut_short_similarity", "long_turn_seconds", "retry_phrases",
        "continue_phrases", "polite_words", "error_paste_patterns", "error_paste_distance",
    })
    similarity: float
    short_message_chars: int
    lookback: int
    templates: tuple[re.Pattern[str], ...]
    cut_short: tuple[int, float]
    """(min chars, similarity) of a re-paste cut short or extended."""
    long_turn_seconds: float
    retries: frozenset[str]
    continues: frozenset[str]
    polite: tuple[str, ...]
    """Courtesy words, longest first."""
    error_paste: re.Pattern[str] | None
    error_paste_distance: int

    @classmethod
    def from_params(cls, raw: Mapping[str, Any]) -> "UserResendParams":
        return cls(
            similarity=raw["similarity"],
            short_message_chars=raw["short_message_chars"],
            lookback=raw["lookback"],
            templates=tuple(compile_later(p) for p in raw["template_patterns"]),
            cut_short=(raw["cut_short_min_chars"], raw["cut_short_similarity"]),
            long_turn_seconds=raw["long_turn_seconds"],
            retries=frozenset(_bare(p) for p in raw["retry_phrases"]),
            continues=frozenset(_bare(p) for p in raw["continue_phrases"]),
            polite=tuple(sorted({_bare(w) for w in raw["polite_words"]}, key=len, reverse=True)),
            error_paste=any_of(raw["error_paste_patterns"]),
            error_paste_distance=raw["error_paste_distance"],
        )


@rule("FX004")
def user_resend(session: Session, params: UserResendParams) -> Iterator[Finding]:
    p = params
    similarity, lookback, error_paste = p.similarity, p.lookback, p.error_paste
    polite, retries, continues, templates = p.polite, p.retries, p.continues, p.templates
    users = [t for t in session.turns if isinstance(t, UserTurn)]
    bares = [_bare(u.text) for u in users]  # each message folded once: long pastes are costly
    keys = [_key(u, templates, bare) for u, bare in zip(users, bares)]
    pairs: dict[int, frozenset] = {}  # word pairs of the messages in the lookback window
    for j, user in enumerate(users):
        if j == 0:
            continue
        pairs.pop(j - lookback - 1, None)  # out of reach from now on
        previous = users[j - 1]
        bare = _without_polite(bares[j], polite) if user.command is None else None
        if bare is not None and (bare in retries or bare in continues):
            wanted = BAD | {"aborted"} if bare in retries else BAD
            status, witness = reply_status(session, previous, user)
            if status in wanted:
                yield _finding(session, user, previous, status, witness, retry=True)
            continue
        i = _find_repeat(keys, j, similarity, lookback, pairs, p.cut_short)
        if i is None:
            continue
        earlier = users[i]
        if _reports_new_error(earlier.text, user.text, error_paste):
            continue  # the same template of error, but another error: progress, not a re-send
        status, witness = reply_status(session, earlier, users[i + 1])
        if status == "none" and not earlier.queued:
            continue  # a quick edit before any reply
        if status == "aborted" and earlier is previous and not _shown_text(session, earlier,
                                                                            user):
            ran = _turn_seconds(session, earlier, witness[0])
            yield _finding(session, user, earlier, "aborted-silent", witness, retry=False,
                           long_turn=ran is not None and ran >= p.long_turn_seconds)
            continue
        # Some repeats count only after a bad reply: a command, a short message, an older
        # message that is not an error pasted again (that search last: a long message costs
        # the most). Any other reply ends them here.
        if status not in BAD and not earlier.queued and (
            keys[j][0] is not None
            or len(keys[j][1]) < p.short_message_chars
            or (earlier is not previous and not (j - i <= p.error_paste_distance
                                                 and bool(error_paste.search(user.text))))
        ):
            continue
        yield _finding(session, user, earlier, status, witness, retry=False)


def _bare(text: str) -> str:
    """What the user typed, folded: full-width IME forms, case and diacritics (users type
    ``reessaie`` for ``réessaie``, ``ещё`` as ``еще``), spacing, trailing punctuation."""
    if not text.isascii():  # ASCII is its own NFKC form, with no accent to fold
        text = _without_accents(unicodedata.normalize("NFKC", text))
    # The joined words hold no white space but single spaces, so the trailing run that _PUNCT
    # takes off is the trailing run of these characters: rstrip removes the same, faster.
    return " ".join(text.casefold().split()).rstrip(_PUNCT_CHARS)


_LATIN_OR_CYRILLIC_MARKS = "".join(
    chr(c) for c in range(0x300, 0x370) if unicodedata.combining(chr(c)))
_LATIN_OR_CYRILLIC_MARK = knowledge_cache.compile("[%s]" % _LATIN_OR_CYRILLIC_MARKS)
"""Accents to fold are Latin and Cyrillic ones (the combining marks of U+0300-U+036F; the
grapheme joiner there is not one); Korean, Japanese and Indic marks stay."""
_PUNCT_CHARS = " .!?。！？，,…~"
"""``_PUNCT``'s characters once white space is single spaces."""
ACCENTED_BELOW = 0x3000
"""Every character whose canonical decomposition holds one of those marks lies below this
code point (the last is U+2ADC; ``tests/test_fast_paths.py`` checks every code point)."""


_ACCENTED_RANGES = (
    "C0-C5 C7-CF D1-D6 D9-DD E0-E5 E7-EF F1-F6 F9-FD FF-10F 112-125 128-130 134-137 139-13E "
    "143-148 14C-151 154-165 168-17E 1A0-1A1 1AF-1B0 1CD-1DC 1DE-1E3 1E6-1F0 1F4-1F5 1F8-21B "
    "21E-21F 226-233 300-34E 350-36F 385-386 388-38A 38C 38E-390 3AA-3B0 3CA-3CE 3D3-3D4 "
    "400-401 403 407 40C-40E 419 439 450-451 453 457 45C-45E 476-477 4C1-4C2 4D0-4D3 4D6-4D7 "
    "4DA-4DF 4E2-4E7 4EA-4F5 4F8-4F9 1E00-1E99 1E9B 1EA0-1EF9 1F00-1F15 1F18-1F1D 1F20-1F45 "
    "1F48-1F4D 1F50-1F57 1F59 1F5B 1F5D 1F5F-1F7D 1F80-1FB4 1FB6-1FBC 1FC1-1FC4 1FC6-1FD3 "
    "1FD6-1FDB 1FDD-1FEE 1FF2-1FF4 1FF6-1FFC 212B 219A-219B 21AE 21CD-21CF 2204 2209 220C "
    "2224 2226 2241 2244 2247 2249 2260 2262 226D-2271 2274-2275 2278-2279 2280-2281 "
    "2284-2285 2288-2289 22AC-22AF 22E0-22E3 22EA-22ED 2ADC "
).split()
"""The code points ``_accented`` matches (hexadecimal, ``A-B`` a range), as it finds them in
the Unicode databases of Python 3.10 to 3.13 (Unicode 13.0 to 15.1: the same 955 characters;
canonical decompositions do not change between versions). Read instead of decomposing 12k
characters at every start (18 ms, the rule file's own words need it)."""
_ACCENTED_UNICODE = ("13.0.0", "14.0.0", "15.0.0", "15.1.0")


@cache
def _accented() -> re.Pattern[str]:
    """Any character whose canonical decomposition holds an accent to fold (the FX004 rule
    file's own words are folded at start-up; ``tests/test_fast_paths.py`` checks every code
    point against the decomposition)."""
    if unicodedata.unidata_version in _ACCENTED_UNICODE:
        return knowledge_cache.compile("[%s]" % "".join(
            "-".join(re.escape(chr(int(end, 16))) for end in part.split("-"))
            for part in _ACCENTED_RANGES))
    chars = (chr(c) for c in range(0x80, ACCENTED_BELOW))  # another Unicode: work it out
    return re.compile("[%s]" % "".join(
        re.escape(c) for c in chars
        if any(m in _LATIN_OR_CYRILLIC_MARKS for m in unicodedata.normalize("NFD", c))))


def _without_accents(text: str) -> str:
    """``text`` (NFKC) with the accents folded: NFD, the marks removed, NFC.

    Done word by word, and only on the words that hold a character whose decomposition has
    one of the marks: the other words come back unchanged from the three passes (NFKC text is
    NFC text). A space splits the passes exactly: it decomposes to itself, is a starter (no
    mark reorders across it) and composes with nothing on either side."""
    find = _accented()
    hit = find.search(text)
    if hit is None:
        return text
    out: list[str] = []
    done = 0  # text[:done] is copied; done is 0 or the position of a space
    while hit is not None:
        start = text.rfind(" ", done, hit.start()) + 1
        end = text.find(" ", hit.end())
        end = len(text) if end < 0 else end
        word = unicodedata.normalize("NFD", text[start:end])
        out += (text[done:start],
                unicodedata.normalize("NFC", _LATIN_OR_CYRILLIC_MARK.sub("", word)))
        done = end
        hit = find.search(text, end)
    out.append(text[done:])
    return "".join(out)


def _without_polite(bare: str, polite: Sequence[str]) -> str:
    """A short request without its courtesy (``please retry``, ``続けてください``,
    ``다시 해 주세요``): what remains is the request itself."""
    ends = tuple(polite)
    if not (bare.startswith(ends) or bare.endswith(ends)):
        return bare  # every strip below needs a courtesy word at one end: most messages
    for _ in range(2):
        for word in polite:
            if bare.endswith(word) and len(bare) > len(word):
                bare = _PUNCT.sub("", bare[: -len(word)].rstrip(" ,"))
            elif bare.startswith(word + " ") or (not word.isascii() and bare.startswith(word)
                                                 and len(bare) > len(word)):
                bare = bare[len(word):].lstrip(" ,")
    return bare


def _key(user: UserTurn, templates: Sequence[re.Pattern[str]],
         bare: str) -> tuple[str | None, str]:
    """What to compare: a command and its arguments, or the text the user typed (``bare``:
    its ``_bare`` form)."""
    if user.command is not None:
        return user.command, _bare(user.arguments or "")
    for i, pattern in enumerate(templates):
        m = pattern.match(user.text)
        if m:
            return f"template:{i}", _bare(m.group(1))
    return None, bare


def _find_repeat(keys, j, similarity, lookback, pairs, cut_short) -> int | None:
    """Index of the latest earlier message the j-th one repeats, if any: the same text, a
    near-identical one, or a re-paste cut short or extended (one is a near-prefix of the
    other, and both are long)."""
    command, text = keys[j]
    if not text and command is None:
        return None
    size, slack, min_chars = len(text), 1 - similarity, cut_short[0]
    for i in range(j - 1, max(-1, j - 1 - lookback), -1):
        other_command, other = keys[i]
        if other_command != command:
            continue
        if other == text:
            return i
        if command is not None:
            continue
        # the lengths first, here: most pairs of messages differ in length, and a call each
        # to learn it cost more than the rest of the loop
        other_size = len(other)
        longer, shorter = (size, other_size) if size >= other_size else (other_size, size)
        if (size >= 12 and other and longer - shorter <= slack * longer + 1
                and _near(keys, i, j, similarity, pairs)):
            return i
        if (shorter >= min_chars and shorter * 2 >= longer  # _near_prefix's own length test
                and _near_prefix(text, other, *cut_short)):
            return i
    return None


def _near_prefix(a: str, b: str, min_chars: int, threshold: float) -> bool:
    """One message is the other's opening, nearly verbatim: a paste cut short, or the same
    paste with words added at the end. Both must be long, the shorter at least half the other."""
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) < min_chars or len(short) * 2 < len(long_) or not long_.startswith(short[:8]):
        return False
    head = long_[: len(short)]
    if short == head:
        return True
    if len(short) > 400:
        short, head = short.split(), head.split()  # type: ignore[assignment]
    matcher = SequenceMatcher(None, short, head, autojunk=False)
    return matcher.quick_ratio() >= threshold and matcher.ratio() >= threshold


def _near(keys, i: int, j: int, threshold: float, pairs: dict) -> bool:
    """difflib's ratio, after two cheap filters: length (``_find_repeat`` tested it), then
    shared word pairs."""
    a, b = keys[j][1], keys[i][1]
    sa = pairs.get(j) or pairs.setdefault(j, _pairs(a))
    sb = pairs.get(i) or pairs.setdefault(i, _pairs(b))
    if sa and sb:
        shared = len(sa & sb)  # |A ∪ B| = |A| + |B| - |A ∩ B|: no union set built
        if shared / (len(sa) + len(sb) - shared) < threshold - 0.4:
            return False  # texts this close in characters share most of their word pairs
    if len(a) > 400:  # long pastes: compare word by word, a few hundred items, not thousands
        a, b = a.split(), b.split()  # type: ignore[assignment]
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    return matcher.quick_ratio() >= threshold and matcher.ratio() >= threshold


def _pairs(text: str) -> frozenset[str]:
    """The text's pairs of adjacent words, each as ``"first second"`` (a word holds no space,
    so the string names the pair; strings, unlike tuples, give the garbage collector nothing
    to walk), or its one word."""
    words = text.split()
    return frozenset(map(" ".join, pairwise(words))) if len(words) > 1 else frozenset(words)


def _reports_new_error(earlier: str, later: str, error_paste: re.Pattern[str]) -> bool:
    """Does the later paste name something in its error lines that the earlier one never did?
    Two pastes of one error differ around it (a fixed comma, a question added, a new
    timestamp); a new error names another field, file or line (``employee_id`` where it said
    ``department_id``)."""
    seen = earlier.casefold()
    for line in later.splitlines():
        if not error_paste.search(line):
            continue
        for token in _IDENTIFIER.findall(line):
            if _names_something(token) and token.casefold() not in seen:
                return True
    return False


_IDENTIFIER = knowledge_cache.compile(r"[\w][\w.:/@-]*[\w]")
_LETTER = knowledge_cache.compile(r"[^\W\d_]")
_INNER_CAPITAL = knowledge_cache.compile(r"[a-z][A-Z]")
_DIGIT = knowledge_cache.compile(r"\d")


def _names_something(token: str) -> bool:
    """An identifier names something: it holds a letter and an underscore, an inner capital or a
    digit (``employee_id``, ``sortSites``, ``weekly.xml:17``); plain words and bare numbers do
    not. Three linear searches: one pattern for it all (``.*`` before each choice, tried from
    every position) took cubic time on a long plain token, 15 s for a URL of 1,800 characters
    pasted twice."""
    return _LETTER.search(token) is not None and (
        "_" in token or _INNER_CAPITAL.search(token) is not None
        or _DIGIT.search(token) is not None)


def _shown_text(session: Session, asked: UserTurn, until: UserTurn) -> bool:
    """Did the turns after ``asked`` show the user any text before ``until``?"""
    return any(isinstance(t, AssistantTurn) and t.text.strip()
               for t in session.turns[asked.ordinal : until.ordinal - 1])


def _turn_seconds(session: Session, asked: UserTurn, stop_ordinal: int) -> float | None:
    stop = session.turns[stop_ordinal - 1]
    if asked.time is None or stop.time is None:
        return None
    return stop.time - asked.time


def reply_status(session: Session, asked: UserTurn, until: UserTurn) -> tuple[ReplyStatus, list[int]]:
    """How the turns between a user message and the next one answered it, with witnesses."""
    window = session.turns[asked.ordinal : until.ordinal - 1]
    replies = [t for t in window if isinstance(t, AssistantTurn)]
    stops = [t for t in window if isinstance(t, EventTurn) and t.event in STOP_EVENTS]
    stops += [t for t in replies if t.aborted]
    if stops:
        return "aborted", [stops[0].ordinal]
    errors = [t for t in replies if t.error is not None] + [
        t for t in window if isinstance(t, EventTurn) and t.event == "api_error"]
    visible = [t for t in replies if t.visible]
    if errors and not any(t.ordinal > errors[-1].ordinal for t in visible):
        return "error", [errors[-1].ordinal]
    if not replies:
        closed = [t for t in window if isinstance(t, EventTurn) and t.event == "turn_complete"]
        if closed:  # Codex: the harness closed the turn and nothing was said
            return "empty", [closed[0].ordinal]
        return "none", []
    if not visible:
        return "empty", [replies[-1].ordinal]
    last = next((t for t in reversed(window) if not isinstance(t, EventTurn)), None)
    if isinstance(last, ToolResultTurn) and analysis_of(session).outcome(last).failed:
        return "failed", [last.ordinal]
    if isinstance(last, AssistantTurn) and not last.visible:
        return "empty", [last.ordinal]
    return "ok", [visible[-1].ordinal]


_STATUS_WORDS = {
    "empty": "an empty reply",
    "error": "a provider error",
    "failed": "a failed tool call with no reply",
    "aborted": "an aborted reply",
    "ok": "a reply that did not serve them",
    "none": "no reply (it was queued while the assistant was busy)",
    "aborted-silent": "an aborted turn that had shown them no text",
}


def _finding(session: Session, user: UserTurn, earlier: UserTurn, status: str,
             witness: list[int], *, retry: bool, long_turn: bool = False) -> Finding:
    said = shorten(user.text if user.command is None else f"{user.command} {user.arguments or ''}",
                   80)
    if status in BAD:
        severity, reason = "high", f"the message it repeats got {_STATUS_WORDS[status]}"
    elif long_turn:
        severity = "high"
        reason = (f"the message it repeats got {_STATUS_WORDS[status]}, after running a long "
                  "time with nothing to show")
    else:
        severity, reason = "medium", f"the message it repeats got {_STATUS_WORDS[status]}"
    if retry:
        message = (f"The user asked again (\"{said}\") after {_STATUS_WORDS[status]} to "
                   f"turn {earlier.ordinal}.")
    else:
        same = "verbatim" if _bare(user.text) == _bare(earlier.text) else "nearly verbatim"
        message = (f"The user re-sent turn {earlier.ordinal} {same} (\"{said}\") after "
                   f"{_STATUS_WORDS[status]}.")
    evidence = sorted({earlier.ordinal, *witness})
    facts = [Evidence(kind="message", role="earlier message", turn=earlier.ordinal,
                      anchor=earlier.anchor, quote=shorten(earlier.text, 80)),
             *_answer_facts(session, status, witness),
             Evidence(kind="message", role="repeat", turn=user.ordinal, anchor=user.anchor,
                      quote=said)]
    return Finding(turn=user.ordinal, anchor=user.anchor, severity=severity,
                   severity_reason=reason, message=message, evidence=evidence, facts=facts)


_ANSWER_ROLES = {
    "empty": "empty reply", "error": "provider error", "failed": "failed call with no reply",
    "aborted": "aborted reply", "aborted-silent": "aborted turn with no text shown",
    "ok": "reply that did not serve them",
}


def _answer_facts(session: Session, status: str, witness: list[int]) -> list[Evidence]:
    """What answered the earlier message (the witness ``reply_status`` named), in its words."""
    if not witness or status not in _ANSWER_ROLES:
        return []
    turn = session.turns[witness[0] - 1]
    quote, kind = "", "reply"
    if isinstance(turn, AssistantTurn) and turn.error is not None:
        quote = shorten(f"{turn.error.name}: {turn.error.message}", 160)
    elif isinstance(turn, AssistantTurn):
        quote = shorten(turn.text, 160)
    elif isinstance(turn, EventTurn):
        kind, quote = "event", shorten(turn.text, 160)
    elif isinstance(turn, ToolResultTurn):
        kind = "failure"
        outcome = analysis_of(session).outcome(turn)
        quote = "\n".join(telling_lines(turn.error or turn.output, 2))
        return [Evidence(kind=kind, role=_ANSWER_ROLES[status], turn=turn.ordinal,
                         anchor=turn.anchor, quote=quote, status=outcome.status())]
    return [Evidence(kind=kind, role=_ANSWER_ROLES[status], turn=turn.ordinal,
                     anchor=turn.anchor, quote=quote)]
