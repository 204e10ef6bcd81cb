"""Every entry of unverified-claim's knowledge lists, each in a message of its own.

``check_claims`` is the one list of success claims per kind of check (several languages) that
every rule reading claims shares; each phrase must be read as a claim of its kind, each hedge
must withdraw it, and each command pattern must be read as a run of its kind.
"""

from __future__ import annotations

import re

import pytest

from forensics.analysis.phrases import compiled_now
from forensics.model import AssistantTurn, Session, UserTurn
from forensics.rules import registry
from forensics.rules._facts import check_kinds, compile_all

SPEC = registry()["FX005"]
CLAIMS = [(kind, phrase) for kind, phrases in SPEC.params["check_claims"].items()
          for phrase in phrases]


def _flagged(text: str) -> list[str]:
    turns = [UserTurn(ordinal=1, anchor="u1", text="go"),
             AssistantTurn(ordinal=2, anchor="a2", text=text)]
    session = Session(id="w", agent="opencode", format="case", source="w", turns=turns)
    return [f.severity_reason for f in SPEC.run(session)]


@pytest.mark.parametrize("kind, phrase", CLAIMS, ids=[f"{k}:{p}" for k, p in CLAIMS])
def test_each_claim_phrase_is_a_claim_of_its_kind(kind: str, phrase: str) -> None:
    assert _flagged(f"Result: {phrase}.") == [f"no {kind} check ran before the claim"]


@pytest.mark.parametrize("hedge", SPEC.params["hedges"])
def test_each_hedge_withdraws_the_claim(hedge: str) -> None:
    assert _flagged(f"Result: {hedge} all tests pass.") == []


@pytest.mark.parametrize("kind, pattern", [
    (k, p) for k, ps in SPEC.params["check_commands"].items() for p in ps])
def test_each_check_pattern_compiles_and_names_its_kind(kind: str, pattern: str) -> None:
    with compiled_now():  # compile_all compiles on first use: here at once, or raises
        (compiled,) = compile_all([pattern])
    assert compiled.pattern == pattern and compiled.flags & re.I and compiled.flags & re.M


@pytest.mark.parametrize("command, kinds", [
    ("pytest -q", {"test"}), ("python3 -m pytest tests/", {"test"}), ("uv run pytest", {"test"}),
    ("npm test", {"test"}), ("pnpm vitest run src/a.test.js", {"test"}), ("yarn jest", {"test"}),
    ("cargo test", {"test"}), ("go test ./...", {"test"}), ("./gradlew test", {"test"}),
    ("mvn -q verify", {"test"}), ("dotnet test", {"test"}), ("npm run build", {"build"}),
    ("npx tsc", {"build"}), ("cargo build --release", {"build"}), ("go build ./cmd/x", {"build"}),
    ("make", {"build"}), ("docker build -t app .", {"build"}), ("dotnet build", {"build"}),
    ("pnpm eslint src", {"lint"}), ("ruff check .", {"lint"}), ("cargo clippy", {"lint"}),
    ("npx tsc --noEmit", {"typecheck"}), ("mypy src", {"typecheck"}),
    ("kubectl rollout status deploy/api", {"deploy"}), ("curl -s localhost:8000/health", {"server"}),
    ("cd web && npm run lint && npm test", {"lint", "test"}), ("ls -la", set()),
    ("uvicorn app:app --port 8000", {"server"}),
    ("COREPACK_ENABLE_PROJECT_SPEC=0 pnpm build 2>&1 | tail -60", {"build"}),
    ("CI=1 timeout 300 npx vitest run", {"test"}), ("sudo docker build .", {"build"}),
])
def test_commands_are_read_as_checks(command: str, kinds: set[str]) -> None:
    patterns = {k: compile_all(v) for k, v in SPEC.params["check_commands"].items()}
    assert check_kinds(command, patterns) == kinds
