"""The `gateway` command: argument parsing only. Each sub-command lives in the module of
its family and calls downwards (wiring, ingest, settlement, dlq); nothing imports this
package.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence

import gateway
from gateway import logs
from gateway.cli import (
    backfill,
    console,
    dlq,
    events,
    forward,
    ledger,
    ordering,
    processes,
    reconcile,
    retention,
    tools,
)
from gateway.cli.common import (
    JSON_HELP,
    LOG_LEVEL_ENV,
    LOG_LEVELS,
    OneLineParser,
    common_parser,
    help_texts,
    outage_line,
)
from gateway.errors import ConfigError, GatewayError, UsageError

__all__ = ["DISTRIBUTION", "build_parser", "main", "package_version"]

#: The name the gateway is installed under (pyproject.toml's `project.name`).
DISTRIBUTION = "payments-webhook-gateway"

ABOUT = """Webhook ingestion gateway for payment platforms: verify each provider's webhook,
record it once in PostgreSQL, publish it to NATS JetStream, settle it on the ledger, and
park what cannot be processed in the dead-letter table. Every command accepts --config,
--log-level and --json, before or after its name; 'gateway COMMAND --help' tells more."""

EXAMPLES = (
    "gateway migrate --config gateway.toml",
    "gateway serve --config gateway.toml --workers 4",
    "gateway dlq stats --config gateway.toml --json",
    "gateway retention run --config gateway.toml --dry-run",
)


def package_version() -> str:
    """The installed distribution's version; in a source checkout, `gateway.__version__`."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return gateway.__version__


def build_parser() -> argparse.ArgumentParser:
    """`gateway` and every sub-command, each accepting the common flags."""
    # One-line usage errors on every level: sub-command parsers are of the same class.
    parser = OneLineParser(prog="gateway", **help_texts(ABOUT, EXAMPLES))
    parser.add_argument("--version", action="version", version=f"gateway {package_version()}")
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=None,
        help=f"level of the JSON logs on stderr (default: ${LOG_LEVEL_ENV} or INFO)",
    )
    parser.add_argument("--json", action="store_true", default=False, help=JSON_HELP)
    parser.add_argument("--config", default=None, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = common_parser()
    families = (
        processes,
        tools,
        ledger,
        dlq,
        ordering,
        events,
        reconcile,
        retention,
        backfill,
        console,
        forward,
    )
    for family in families:
        family.add_commands(sub, common)
    return parser


def _log_level(args: argparse.Namespace) -> str:
    """`--log-level` (argparse checked it), else `$GATEWAY_LOG_LEVEL`, else the command's
    own default (`listen`: CRITICAL, its screen is for its attempts), else INFO."""
    if args.log_level is not None:
        return str(args.log_level)
    from_env = os.environ.get(LOG_LEVEL_ENV, "").strip().upper()
    if from_env and from_env not in LOG_LEVELS:
        raise ConfigError(LOG_LEVEL_ENV, f"{from_env!r} is not one of {', '.join(LOG_LEVELS)}")
    return from_env or str(getattr(args, "default_log_level", "INFO"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (2 for bad usage or a bad configuration)."""
    args = build_parser().parse_args(argv)
    try:
        args.log_level = _log_level(args)
        logs.configure(args.log_level)
        os.environ[LOG_LEVEL_ENV] = args.log_level  # for worker processes of `serve`
        return int(args.func(args))
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    except UsageError as exc:  # flags that cannot be used, like argparse's own errors
        print(f"gateway: error: {exc}", file=sys.stderr)
        return 2
    except GatewayError as exc:
        line = outage_line(exc, getattr(args, "loaded_settings", None), os.environ)
        print(line or f"gateway: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
