"""Hide obvious secrets in transcript text before it lands in a report.

Reports get pasted into tickets and chats; a transcript that once printed an API key must not
carry it further. Each pattern names the kind of secret it hides, and the replacement keeps the
surrounding words (``Authorization: Bearer [REDACTED:bearer-token]``) so the sentence still reads.
The patterns aim at shapes that are secrets by construction; look-alikes that are not secrets
(git SHAs, UUIDs, message ids, base64 image data) are left alone, and the tests hold both sides.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_EDGE = r"(?<![A-Za-z0-9_+/-])"  # not in the middle of a longer token (base64, ids)

# (kind, pattern, group to hide): group 0 hides the whole match.
_TOKEN_PATTERNS: list[tuple[str, str]] = [
    ("private-key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:.|\n)*?"
                    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)"),
    ("anthropic-key", _EDGE + r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai-key", _EDGE + r"sk-(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{20,}"),
    ("github-token", _EDGE + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("slack-token", _EDGE + r"xox[abprs]-[A-Za-z0-9-]{10,}"),
    ("aws-access-key", _EDGE + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"),
    ("google-api-key", _EDGE + r"AIza[0-9A-Za-z_-]{35}"),
    ("jwt", _EDGE + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
]

# Patterns that keep a prefix (group 1) and hide what follows (group 2).
_KEEP_PREFIX: list[tuple[str, str]] = [
    ("bearer-token", r"(?i)(\bBearer\s+)([A-Za-z0-9._~+/-]{12,}=*)"),
    ("password", r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s/:@]+:)([^\s/@]+)(?=@)"),
    ("password", r"(?i)((?:\b|(?<=_))(?:password|passwd|pwd)\s*[=:]\s*[\"']?)"
                 r"((?![$%{<\[])[^\s\"'&,;]{3,})"),
    ("api-key", r"(?i)((?:\b|(?<=_))(?:api[_-]?key|secret[_-]?key|client[_-]?secret|"
                r"access[_-]?token|"
                r"auth[_-]?token)\s*[=:]\s*[\"']?)((?![$%{<\[])[^\s\"'&,;]{6,})"),
]

_COMPILED: list[tuple[str, re.Pattern[str], bool]] = (
    [(kind, re.compile(p), False) for kind, p in _TOKEN_PATTERNS]
    + [(kind, re.compile(p), True) for kind, p in _KEEP_PREFIX]
)

# Cheap pre-check (plain substring tests, several times faster than one regex): text with none
# of these, lower-cased, cannot match any pattern.
_HINTS = ("private key", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox",
          "akia", "asia", "aiza", "eyj", "bearer", "://", "passw", "pwd", "key", "secret", "token")


def _placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _hide(kind: str, keep_prefix: bool) -> Callable[[re.Match[str]], str]:
    if keep_prefix:
        return lambda m: m.group(1) + _placeholder(kind)
    return lambda m: _placeholder(kind)


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED:<kind>]``."""
    if not text:
        return text
    low = text.lower()
    if not any(hint in low for hint in _HINTS):
        return text
    for kind, pattern, keep in _COMPILED:
        text = pattern.sub(_hide(kind, keep), text)
    return text


def secret_kinds(text: str) -> list[str]:
    """The kinds of secret ``redact`` would hide in ``text``, in pattern order (for tests)."""
    return [kind for kind, pattern, _ in _COMPILED if pattern.search(text)]
