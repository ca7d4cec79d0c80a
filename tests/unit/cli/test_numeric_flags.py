"""Every numeric flag of every command is range-checked by argparse: a value out of range,
not a number, NaN or infinite is one line on stderr and exit 2, before the configuration
is read or anything connects (`--limit 99999999999999999999` was a database error).

The parser tree is walked, so a flag added later is covered without being listed here.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway import cli
from gateway.cli.common import Number

#: A value argparse would convert with a bare `int` or `float`: unbounded, refused.
UNBOUNDED = (int, float)


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub-)command's words and parser, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def numeric_flags() -> list[tuple[tuple[str, ...], str, Number]]:
    found = []
    for path, parser in commands(cli.build_parser()):
        for action in parser._actions:
            if isinstance(action.type, Number) and action.option_strings:
                found.append((path, action.option_strings[0], action.type))
    return found


def out_of_range(number: Number) -> list[str]:
    below = number.low - (1 if number.whole else number.low / 2 or 1)
    values = [str(below), str(number.high + 1), "99999999999999999999", "-1e999", "1e999"]
    values += ["nan", "inf", "-inf", "ten", "", "9" * 5000]
    if number.whole:
        values.append(str(number.low + 0.5))
    return values


FLAGS = numeric_flags()


def test_the_walk_finds_the_numeric_flags() -> None:
    """A sanity check on the walk itself: the flags the issue names are found."""
    names = {(" ".join(path), flag) for path, flag, _ in FLAGS}
    for expected in (
        ("events list", "--limit"),
        ("events replay", "--rate"),
        ("dlq list", "--limit"),
        ("dlq replay", "--max-attempts"),
        ("serve", "--port"),
        ("serve", "--workers"),
        ("relay", "--metrics-port"),
        ("reconcile", "--batch-size"),
        ("backfill", "--rate"),
        ("currency-stub", "--port"),
    ):
        assert expected in names


def test_no_flag_converts_with_a_bare_int_or_float() -> None:
    """`type=int` or `type=float` takes any size (and float takes nan and inf)."""
    for path, parser in commands(cli.build_parser()):
        for action in parser._actions:
            assert action.type not in UNBOUNDED, (path, action.option_strings)


@pytest.mark.parametrize(
    ("path", "flag", "number"), FLAGS, ids=[f"{' '.join(p)} {f}" for p, f, _ in FLAGS]
)
def test_out_of_range_values_are_one_line_and_exit_2(
    path: tuple[str, ...], flag: str, number: Number, capsys: pytest.CaptureFixture[str]
) -> None:
    for value in out_of_range(number):
        with pytest.raises(SystemExit) as exit_:
            # No config: the flag is refused before one would be read.
            cli.main([*path, f"{flag}={value}"])
        assert exit_.value.code == 2, (flag, value[:30])
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert err.startswith(f"gateway {' '.join(path)}: error: argument {flag}: must be "), err
        assert len(err) < 300, err  # a 5,000-digit value is not repeated in full
    # The bounds themselves are accepted.
    assert number(str(number.low)) == number.low
    assert number(str(number.high)) == number.high


@pytest.mark.parametrize(
    "argv",
    [
        ["dlq", "show", "99999999999999999999"],
        ["dlq", "resolve", "9223372036854775808", "--note", "n"],
        ["dlq", "replay", "--id", "²"],
        ["events", "show", "1" * 5000],
        ["events", "list", "--id", "0"],
        ["events", "replay", "--id", "-3"],
    ],
)
def test_row_ids_out_of_range_are_one_line_and_exit_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Row ids are positional or repeatable strings, checked before anything connects:
    beyond the tables' bigint ids they are refused as ids, not by the database."""
    config = tmp_path / "gateway.toml"
    # Nothing listens on port 1: the ids must be refused before it is tried.
    config.write_text(
        '[database]\nurl = "postgresql://127.0.0.1:1/none"\n[nats]\nurl = "nats://127.0.0.1:1"\n',
        encoding="utf-8",
    )
    assert cli.main([*argv, "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "is not a row id (a whole number from 1 to 9223372036854775807)" in err
    assert len(err) < 300


@pytest.mark.parametrize("rate", ["EUR/USD=1e999999", "EUR/USD=0.0000000001", "EUR/USD=nan"])
def test_the_currency_stubs_rates_are_bounded(
    rate: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["currency-stub", "--rate", rate])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --rate" in err, err
