"""A mistyped flag is answered with the flag meant, on every command: each command's
long flags, one letter swapped, are refused naming the flag (exit 2, one line)."""

from __future__ import annotations

import argparse

import pytest

from gateway import cli
from gateway.cli.flag_hints import typo_hint


@pytest.mark.parametrize(
    ("extras", "hint"),
    [
        (["--provdier"], "unrecognized argument --provdier: did you mean --provider?"),
        (["--provdier=stripe"], "unrecognized argument --provdier: did you mean --provider?"),
        (["stripe", "--limt"], "unrecognized argument --limt: did you mean --limit?"),
        (["--frobnicate"], None),  # close to nothing: argparse's own message stays
        (["-x", "--", "value"], None),  # not long flags
    ],
)
def test_the_hint_for_unknown_flags(extras: list[str], hint: str | None) -> None:
    assert typo_hint(extras, ["--provider", "--limit", "-h", "--help"]) == hint


def _leaves(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command line's words and the parser that reads its flags."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(words, parser)]
    found = []
    for name, child in subs[0].choices.items():
        found += _leaves(child, (*words, name))
    return found


def _typo(flag: str) -> str:
    """`flag` with two letters of its name swapped (`--provider` to `--provdier`)."""
    name = flag[2:]
    at = next(i for i in range(len(name) // 2, len(name)) if name[i] != name[i - 1])
    return "--" + name[: at - 1] + name[at] + name[at - 1] + name[at + 1 :]


def _cases() -> list[tuple[tuple[str, ...], str]]:
    cases = []
    for words, parser in _leaves(cli.build_parser()):
        flags = sorted(f for a in parser._actions for f in a.option_strings if f.startswith("--"))
        own = [f for f in flags if len(f) >= 8 and f not in ("--config", "--help")]
        if own:
            cases.append((words, own[-1]))
    return cases


CASES = _cases()


def test_every_command_is_walked() -> None:
    """The walk reaches the families and their commands (not only the top level)."""
    walked = {words for words, _ in CASES}
    assert ("dlq", "list") in walked and ("forward",) in walked and len(walked) > 30


@pytest.mark.parametrize(("words", "flag"), CASES, ids=[" ".join(w) for w, _ in CASES])
def test_a_swapped_letter_names_the_flag_meant(
    words: tuple[str, ...], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = _typo(flag)
    assert typo != flag
    with pytest.raises(SystemExit) as exited:
        cli.build_parser().parse_args([*words, typo])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"unrecognized argument {typo}: did you mean " in err, err
    assert len(err.strip().splitlines()) == 1
