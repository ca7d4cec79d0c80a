"""What every sub-command shares: the common flags, help layout, JSON output and reading
the configuration."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import textwrap
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NoReturn

import orjson

from gateway import settings as settings_mod
from gateway.errors import RowNotFound, UsageError

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_LEVEL_ENV = "GATEWAY_LOG_LEVEL"

#: `add_subparsers()`'s return value; argparse does not export its type publicly.
SubParsers = Any

JSON_HELP = (
    "print the result as JSON on stdout (commands that run until stopped only log, "
    "and their logs are JSON lines on stderr anyway)"
)


def common_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """`--config`, `--log-level` and `--json`, accepted after any sub-command as well as
    before it, added to `parser` (a new one without `--help` by default), to be used as a
    parent.

    Defaults are suppressed here so that a flag given before the sub-command is not
    overwritten by the sub-command's unset one; the top-level parser sets the defaults.
    """
    common = parser or argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        default=argparse.SUPPRESS,
        metavar="PATH",
        help=f"TOML config file (default: ${settings_mod.CONFIG_ENV})",
    )
    common.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=argparse.SUPPRESS,
        help=f"level of the JSON logs on stderr (default: ${LOG_LEVEL_ENV} or INFO)",
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=JSON_HELP)
    return common


def help_texts(about: str, examples: Sequence[str] = ()) -> dict[str, Any]:
    """`add_parser` keywords for an operator's `--help`: what the command does, wrapped,
    and examples kept exactly as written (one command per line)."""
    text: dict[str, Any] = {
        "description": textwrap.fill(" ".join(about.split()), width=78),
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }
    if examples:
        text["epilog"] = "examples:\n" + "\n".join(f"  {line}" for line in examples)
    return text


def print_json(doc: object) -> None:
    """One JSON document on stdout, indented for a person, parseable by `jq`."""
    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()


def load_settings(args: argparse.Namespace) -> settings_mod.Settings:
    """The configuration named by `--config` (or `$GATEWAY_CONFIG`), validated."""
    return settings_mod.load(getattr(args, "config", None))


class OneLineParser(argparse.ArgumentParser):
    """Reports a bad flag in one line (argparse's default adds the whole usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def operator_family(parent: argparse.ArgumentParser, dest: str) -> tuple[Any, OneLineParser]:
    """The sub-command table of an operator family (`gateway dlq ...`, `gateway events
    ...`) and the common flags' parent for its commands, both reporting in one line."""
    common = OneLineParser(add_help=False)
    common_parser(common)
    sub = parent.add_subparsers(
        dest=dest, required=True, metavar="COMMAND", parser_class=OneLineParser
    )
    return sub, common


def operator_command(
    family: str, dest: str, start: Callable[[argparse.Namespace], Coroutine[Any, Any, int]]
) -> Callable[[argparse.Namespace], int]:
    """Run `start(args)` on a fresh event loop; an operator's mistake is one line on
    stderr: unusable flags exit 2, an unknown id exits 1.

    `start` is called inside the guard, so what it checks before returning its coroutine
    (the flags, then the configuration) is reported the same way.
    """

    def run(args: argparse.Namespace) -> int:
        name = f"gateway {family} {getattr(args, dest)}"
        # A short-lived NATS connection would log its connect and disconnect; for an
        # operator that is noise next to the per-row report.
        logging.getLogger("gateway.nats").setLevel(logging.ERROR)
        try:
            return asyncio.run(start(args))
        except UsageError as exc:
            print(f"{name}: error: {exc}", file=sys.stderr)
            return 2
        except RowNotFound as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            return 1

    return run
