"""What every sub-command shares: the common flags, help layout, JSON output and reading
the configuration."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import math
import sys
import textwrap
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from gateway import settings as settings_mod
from gateway.cli.flag_hints import typo_hint
from gateway.errors import (
    BrokerUnavailable,
    DatabaseError,
    DatabaseUnavailable,
    RowNotFound,
    UsageError,
)
from gateway.settings.secrets import NO_SECRET, SecretScope
from gateway.settings.values import url_hosts

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


def login_name() -> str | None:
    """The operator's login name, recorded with what they resolve or release; None where
    the process has none (some containers)."""
    with contextlib.suppress(OSError, KeyError):
        return getpass.getuser()
    return None


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


def load_settings(
    args: argparse.Namespace, secrets: SecretScope = NO_SECRET
) -> settings_mod.Settings:
    """The configuration named by `--config` (or `$GATEWAY_CONFIG`), validated; kept on
    `args`, so an outage later in the command can be reported with its address.

    Only the secrets in `secrets` are read from the environment: none unless the
    command says which it uses (`gateway.settings.secrets`), so an inspecting command
    runs on a host that holds no provider's secret.
    """
    settings = settings_mod.load(getattr(args, "config", None), secrets=secrets)
    args.loaded_settings = settings
    return settings


#: SQLSTATE classes of a database that cannot be used at all: 28 (the user or password
#: is refused) and 3D (no such database). Any other `DatabaseError` is a statement's.
_UNUSABLE_SQLSTATE_CLASSES = ("28", "3D")


def _is_outage(exc: BaseException) -> bool:
    if isinstance(exc, DatabaseError):
        return (exc.sqlstate or "")[:2] in _UNUSABLE_SQLSTATE_CLASSES
    return isinstance(exc, DatabaseUnavailable | BrokerUnavailable)


def outage_line(
    exc: BaseException, settings: settings_mod.Settings | None, env: Mapping[str, str]
) -> str | None:
    """The one line every command prints when the database or NATS cannot be used:
    which server (host and port, never the credentials) and the setting that chose it,
    the same from `migrate`, `dlq`, `events` or any other command. None for anything
    else, or before the configuration was read."""
    if settings is None:
        return None
    # The outage itself, or what it caused (the PostgreSQL ledger's `LedgerUnavailable`).
    cause: BaseException | None = exc
    while cause is not None and not _is_outage(cause):
        cause = cause.__cause__
    if cause is None:
        return None
    if isinstance(cause, BrokerUnavailable):
        what, url, section, port = "NATS", settings.nats.url, "nats", 4222
    else:
        what, url, section, port = "the database", settings.database_url, "database", 5432
    var = f"GATEWAY_{section.upper()}_URL"
    setting = var if env.get(var) else f"{section}.url"
    return f"gateway: cannot use {what} at {url_hosts(url, port)} (set by {setting}): {cause}"


#: The most characters of a refused number the error repeats (a pasted 5,000-digit one
#: must not fill the terminal).
_SHOWN_CHARS = 24


@dataclass(frozen=True)
class Number:
    """The argparse `type` of every numeric flag: a whole number (or, with `whole =
    False`, a finite decimal) from `low` to `high`. Anything else is argparse's usage
    error, one line and exit 2, before the configuration is read or anything connects:
    an out-of-range value must never reach a query or a timer (a `--limit` past 64 bits
    was a database error).

    `tests/unit/cli/test_numeric_flags.py` walks every command and refuses a numeric
    flag whose type is not one of these.
    """

    low: float
    high: float
    whole: bool = True
    note: str = ""  # what a special value means, e.g. "0 = off"

    def __call__(self, text: str) -> int | float:
        value: int | float
        try:
            value = int(text) if self.whole else float(text)
        except ValueError:  # also a whole number too long to convert (4,300 digits)
            value = math.nan
        # NaN fails both comparisons and infinities one; Python compares a huge int with
        # a float bound exactly.
        if not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(f"{self.expected}, got {_shown(text)}")
        return value

    @property
    def expected(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        note = f" ({self.note})" if self.note else ""
        return f"must be {kind} from {_bound(self.low)} to {_bound(self.high)}{note}"


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "...")


#: Bounds shared by the commands' flags (one place, so `dlq` and `events` agree).
#: Rows printed by one `list`: past this a terminal (or `jq`) is the wrong tool.
ROWS_SHOWN = Number(1, 100_000)
#: Rows one replay may touch: the tables' own ids stay far below it.
ROWS_REPLAYED = Number(1, 1_000_000_000)
#: Per second, for `--rate`: one every 1,000 s to a million.
RATE_PER_S = Number(0.001, 1_000_000, whole=False)
#: A TCP port to listen on, and one that may be 0 for no listener.
LISTEN_PORT = Number(1, 65_535)
OPTIONAL_PORT = Number(0, 65_535, note="0 = off")


class OneLineParser(argparse.ArgumentParser):
    """Reports a bad flag in one line (argparse's default adds the whole usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def parse_known_args(  # type: ignore[override]  # typeshed's overloads, one signature
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, but a flag this parser does not know and that is close to one it
        does is refused, naming the flag meant. A command's own parser (no sub-commands)
        looks before parsing, so a mistyped required flag is named as the typo, not as
        missing; a parser with sub-commands looks at what its sub-command left."""
        if self._subparsers is None:
            hint = typo_hint(sys.argv[1:] if args is None else args, self._option_string_actions)
            if hint is not None:
                self.error(hint)
        parsed, extras = super().parse_known_args(args, namespace)
        hint = typo_hint(extras, self._option_string_actions)
        if hint is not None:
            self.error(hint)
        return parsed, extras


@dataclass(frozen=True)
class OperatorFamily:
    """The sub-command table of a command family (`gateway dlq ...`, `gateway ledger
    ...`, `gateway console token ...`) with the common flags' parent for its commands,
    both reporting in one line. Every family is built here, by `operator_family`: the
    CLI's other modules never call `add_subparsers` themselves (a unit test checks)."""

    sub: argparse._SubParsersAction[OneLineParser]
    common: OneLineParser

    def add(
        self,
        name: str,
        func: Callable[[argparse.Namespace], int] | None,
        text: str,
        about: str,
        examples: tuple[str, ...] = (),
    ) -> OneLineParser:
        """One command of the family: its one-line `text` for the family's list, its
        `about` and `examples` for its own --help, run by `func`. Without a `func` the
        command runs what its family's parser set (`gateway ledger` reads the
        sub-command's name), or is itself a family (`gateway console token`)."""
        p = self.sub.add_parser(
            name, help=text, parents=[self.common], **help_texts(about, examples)
        )
        if func is not None:
            p.set_defaults(func=func)
        return p


def operator_family(
    parent: argparse.ArgumentParser,
    dest: str,
    *,
    metavar: str = "COMMAND",
    required: bool = True,
) -> OperatorFamily:
    """The family's sub-command table under `parent` (the command chosen in `dest`,
    shown as `metavar`). With `required=False` the sub-command may be left out and
    `parent` runs its own command (`gateway console` serves, `gateway console token
    ...` is a sub-command); `dest` is then None."""
    common = OneLineParser(add_help=False)
    common_parser(common)
    sub = parent.add_subparsers(
        dest=dest, required=required, metavar=metavar, parser_class=OneLineParser
    )
    return OperatorFamily(sub, common)


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
        logging.getLogger("gateway.adapters.jetstream").setLevel(logging.ERROR)
        try:
            return asyncio.run(start(args))
        except UsageError as exc:
            print(f"{name}: error: {exc}", file=sys.stderr)
            return 2
        except RowNotFound as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            return 1

    return run
