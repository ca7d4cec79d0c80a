"""What every sub-command shares: the common flags and reading the configuration."""

from __future__ import annotations

import argparse
from typing import Any

from gateway import settings as settings_mod

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

#: `add_subparsers()`'s return value; argparse does not export its type publicly.
SubParsers = Any


def common_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """`--config` and `--log-level`, accepted after any sub-command as well as before it,
    added to `parser` (a new one without `--help` by default), to be used as a parent.

    Defaults are suppressed here so that a flag given before the sub-command is not
    overwritten by the sub-command's unset one.
    """
    common = parser or argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        default=argparse.SUPPRESS,
        help=f"TOML config file (default: ${settings_mod.CONFIG_ENV})",
    )
    common.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=argparse.SUPPRESS,
        help="log level (default INFO)",
    )
    return common


def load_settings(args: argparse.Namespace) -> settings_mod.Settings:
    """The configuration named by `--config` (or `$GATEWAY_CONFIG`), validated."""
    return settings_mod.load(getattr(args, "config", None))
