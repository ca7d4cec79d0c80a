"""What every sub-command shares: the common flags, help layout, JSON output and reading
the configuration."""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

import orjson

from gateway import settings as settings_mod

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
