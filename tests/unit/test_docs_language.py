"""User-facing text speaks of the product, never of how it was built.

README.md, every file under docs/ and the `--help` of every command and sub-command are
scanned for words that only make sense to the people who wrote the code: "issue 14",
"one sitting", "this session", "the 2-core machine", commit hashes, and figures marked
as targets met or missed. A measured figure names its hardware neutrally ("on a 2-vCPU
VM") and the command that reproduces it; a finding is reported as `file:line: phrase`.

The scanner itself is shown to work: planted phrases are found, and look-alikes that
belong in the documentation (a Stripe `checkout.session.completed`, a `0x` account id, a
timer's missed tick) are not.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]

#: Words from how the product was built, each with what it is (shown in the failure).
#: Whitespace is `\s+`, so a phrase wrapped across two lines is still found.
RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a tracker reference", re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)),
    (
        "a work sitting",
        re.compile(r"\b(?:one|same|that|this|a|an\s+earlier|a\s+later)\s+sitting\b", re.I),
    ),
    (
        "a work session",
        re.compile(
            r"\b(?:this|that|one|same|an\s+earlier|a\s+later|previous|later)\s+sessions?\b",
            re.IGNORECASE,
        ),
    ),
    (
        "the machine it was built on",
        re.compile(r"\b(?:2|two)-core\s+(?:benchmark\s+)?machine\b", re.IGNORECASE),
    ),
    # 7 to 40 hex digits standing alone, with at least one digit and one letter: a
    # number (2592000) or a word (`defaced`) is not a hash. A `0x` id, a trace id inside
    # a traceparent, a signature's `v1=` value and a UUID's groups are joined to their
    # neighbours, so not alone.
    (
        "a commit hash",
        re.compile(r"(?<![\w./:#=-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/-])"),
    ),
    (
        "a figure marked as a target",
        re.compile(
            r"\btargets?\s*(?:[≥≤<>]|met\b|missed\b)"
            r"|(?:^|[|:(,;])[ \t]*(?:met|missed)\b",
            re.IGNORECASE | re.MULTILINE,
        ),
    ),
)

#: Hex strings that look like commit hashes but are data in an example, by file: none
#: yet. Add `"docs/page.md": {"0123abc"}` with the reason beside it when one is needed.
ALLOWED_HEX: dict[str, frozenset[str]] = {}


@dataclass(frozen=True)
class Finding:
    """One phrase at one place."""

    where: str
    line: int
    rule: str
    phrase: str

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: {self.rule}: {self.phrase!r}"


def scan(where: str, text: str) -> list[Finding]:
    """Every rule's matches in `text`, with the line each starts on."""
    found = []
    for rule, pattern in RULES:
        for match in pattern.finditer(text):
            phrase = " ".join(match.group(0).split())
            if rule == "a commit hash" and phrase in ALLOWED_HEX.get(where, frozenset()):
                continue
            line = text.count("\n", 0, match.start()) + 1
            found.append(Finding(where, line, rule, phrase))
    return sorted(found, key=lambda f: (f.where, f.line))


def documents() -> Iterator[tuple[str, str]]:
    """README.md and every text file under docs/, as (path from the root, text)."""
    yield "README.md", (ROOT / "README.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "docs").rglob("*")):
        if path.is_file() and path.suffix in {".md", ".yml", ".yaml", ".txt", ".html"}:
            yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")


def help_pages(
    parser: argparse.ArgumentParser, prog: tuple[str, ...] = ("gateway",)
) -> Iterator[tuple[str, str]]:
    """`--help` of `parser` and of each sub-command below it, as ("gateway X --help",
    text); an alias's parser is the same object and is shown once."""
    yield " ".join((*prog, "--help")), parser.format_help()
    seen: set[int] = set()
    for action in parser._actions:  # argparse has no public walk of its sub-commands
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, sub in action.choices.items():
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            yield from help_pages(sub, (*prog, name))


def test_the_readme_and_every_docs_page_are_free_of_process_language() -> None:
    """README.md and docs/ speak of the product: no tracker numbers, sittings, sessions,
    the build machine, commit hashes or targets met and missed."""
    findings = [f for where, text in documents() for f in scan(where, text)]
    assert not findings, "process language in the documentation:\n" + "\n".join(map(str, findings))


def test_every_command_help_is_free_of_process_language() -> None:
    """`gateway --help` and the help of every command and sub-command, likewise."""
    pages = list(help_pages(build_parser()))
    assert len(pages) > 20, "the walk of sub-commands found too few"
    findings = [f for where, text in pages for f in scan(where, text)]
    assert not findings, "process language in the CLI help:\n" + "\n".join(map(str, findings))


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("These are issue 14's figures.", "a tracker reference"),
        ("see Issue #22", "a tracker reference"),
        ("measured in one\nsitting", "a work sitting"),
        ("as in this session", "a work session"),
        ("in an earlier session on this machine", "a work session"),
        ("on the 2-core machine", "the machine it was built on"),
        ("on the 2-core benchmark machine", "the machine it was built on"),
        ("at commit d26e569, before", "a commit hash"),
        ("(45ca812)", "a commit hash"),
        ("| 0.36 | missed |", "a figure marked as a target"),
        ("| 0.65 | met |", "a figure marked as a target"),
        ("7,334 req/s: missed", "a figure marked as a target"),
        ("events/s (target ≥ 3,000)", "a figure marked as a target"),
    ],
)
def test_a_planted_phrase_is_found(text: str, rule: str) -> None:
    """Each rule finds what it is for, wrapped lines included."""
    assert [f.rule for f in scan("planted.md", text)] == [rule]


@pytest.mark.parametrize(
    "text",
    [
        "a `checkout.session.completed` event",
        "ledger account 0x1c45a9ab572ea9fbfa8485e2a127fc8b",
        "traceparent 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "id 1c45a9ab-572e-a9fb-fa84-85e2a127fc8b",
        "Stripe-Signature: t=1796128899,v1=6c02c2d9...",
        "payload_max_age_s = 2592000",
        "a defaced page",
        "A tick missed while the host was down runs at boot.",
        "the thresholds met by the rules",
        "sessions of the operator console",
        "on a 2-vCPU VM",
        "the issue of a token",
    ],
)
def test_a_look_alike_is_not_found(text: str) -> None:
    """Documentation that only resembles process language passes."""
    assert scan("fine.md", text) == []


def test_a_finding_names_file_line_and_phrase() -> None:
    """The failure message is enough to find and fix the phrase."""
    (finding,) = scan("docs/page.md", "first line\nsecond, on the 2-core\nmachine\n")
    assert str(finding) == ("docs/page.md:2: the machine it was built on: '2-core machine'")
