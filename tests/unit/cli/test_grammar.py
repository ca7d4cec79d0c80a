"""One CLI grammar: every command takes the common flags in the same places, knows its
version, and explains itself to an operator rather than quoting docstrings."""

from __future__ import annotations

import argparse
import importlib.metadata
from collections.abc import Iterator
from pathlib import Path

import pytest

import gateway
from gateway import cli

# Each command with the arguments it cannot do without.
COMMANDS: list[tuple[str, ...]] = [
    ("migrate",),
    ("serve",),
    ("relay",),
    ("settle",),
    ("confirm",),
    ("sign", "stripe", "--secret", "s", "--body", "-"),
    ("currency-stub",),
    ("reconcile",),
    ("ledger", "open-account", "m_1"),
    ("ledger", "balances"),
    ("ledger", "check"),
    ("ledger", "statement", "--merchant", "m_1"),
    ("ledger", "transfers"),
    ("ledger", "export"),
    ("ledger", "adjust", "--merchant", "m_1", "--amount", "5", "--reason", "r", "--id", "a"),
    ("dlq", "list"),
    ("dlq", "show", "1"),
    ("dlq", "replay", "--all"),
    ("dlq", "resolve", "1", "--note", "done"),
    ("dlq", "stats"),
    ("dlq", "run-jobs", "--once"),
    ("ordering", "keys", "--held"),
    ("ordering", "release", "stripe", "pi_1", "--note", "done"),
    ("retention", "run", "--dry-run"),
    ("backfill", "stripe", "--since", "2026-11-30T00:00:00Z"),
    ("events", "list"),
    ("events", "show", "1"),
    ("events", "replay", "--all"),
    ("console",),
    ("console", "token", "create", "--name", "alice", "--role", "viewer"),
    ("console", "token", "revoke", "alice"),
    ("forward", "--to", "http://127.0.0.1:9/hooks", "--secret-env", "HOME"),
    ("listen", "--to", "http://127.0.0.1:9/hooks"),
]


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, (*path, name))


def _command_split(command: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(the command's words, its own arguments): the common flags go between or after."""
    depth = 2 if command[0] in ("ledger", "dlq", "ordering", "retention", "events") else 1
    if command[:2] == ("console", "token"):
        depth = 3
    return list(command[:depth]), list(command[depth:])


def test_the_command_list_covers_every_command() -> None:
    # `gateway console` serves the console and holds `token create|revoke`: a command
    # that is also a family.
    leaves = {path for path, p in _parsers(cli.build_parser()) if p._subparsers is None}
    leaves.add(("console",))
    assert leaves == {tuple(_command_split(c)[0]) for c in COMMANDS}


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("where", ["before", "between", "after", "absent"])
def test_common_flags_are_accepted_before_and_after_every_command(
    command: tuple[str, ...], where: str
) -> None:
    words, rest = _command_split(command)
    flags = ["--json", "--config", "x.toml", "--log-level", "debug"]
    argv = {
        "before": [*flags, *words, *rest],
        "between": [words[0], *flags, *words[1:], *rest],  # gateway ledger --json balances
        "after": [*words, *rest, *flags],
        "absent": [*words, *rest],
    }[where]
    args = cli.build_parser().parse_args(argv)
    given = where != "absent"
    assert args.json is given
    assert args.config == ("x.toml" if given else None)
    assert args.log_level == ("DEBUG" if given else None)


def test_help_is_written_for_operators() -> None:
    """No docstring markup; every command says what it does and shows an example."""
    for path, parser in _parsers(cli.build_parser()):
        text = parser.format_help()
        assert "`" not in text, path
        assert "--json" in text, path
        assert "\nexamples:\n  gateway" in text or "\nexamples:\n  */" in text, path


def test_version_falls_back_to_the_package_constant(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert cli.package_version() == gateway.__version__


def test_version_is_printed_as_gateway_and_the_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"gateway {cli.package_version()}\n"


@pytest.mark.parametrize(
    "argv", [["--log-level", "loud", "migrate"], ["migrate", "--log-level", "loud"]]
)
def test_a_bad_log_level_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'LOUD'" in err and "Traceback" not in err


def test_a_bad_log_level_in_the_environment_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GATEWAY_LOG_LEVEL", "loud")
    assert cli.main(["migrate", "--config", "/nonexistent.toml"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "gateway: config error: GATEWAY_LOG_LEVEL: 'LOUD' is not one of "
        "DEBUG, INFO, WARNING, ERROR, CRITICAL\n"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--port", "0"], "must be a whole number from 1 to 65535, got '0'"),
        (["--port", "70000"], "must be a whole number from 1 to 65535, got '70000'"),
        (["--port", "http"], "must be a whole number from 1 to 65535, got 'http'"),
        (["--workers", "0"], "must be a whole number from 1 to 64, got '0'"),
        (["--workers", "1000"], "must be a whole number from 1 to 64, got '1000'"),
    ],
)
def test_serve_refuses_ports_and_worker_counts_out_of_range(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["serve", *flags])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_backfill_usage_error_is_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(
        '[database]\nurl = "postgresql://127.0.0.1:1/none"\n[nats]\nurl = "nats://127.0.0.1:1"\n',
        encoding="utf-8",
    )
    argv = ["backfill", "stripe", "--since", "1h", "--until", "soon", "--config", str(config)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("gateway: error: --until: ") and err.count("\n") == 1, err
