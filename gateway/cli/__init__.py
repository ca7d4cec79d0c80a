"""The `gateway` command: argument parsing only. Each sub-command lives in the module of
its family and calls downwards (compose, ingest, settlement, dlq); nothing imports this
package.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gateway import logs
from gateway.cli import dlq, ledger, processes, reconcile, tools
from gateway.cli.common import LOG_LEVELS, common_parser
from gateway.errors import ConfigError, GatewayError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """`gateway` and every sub-command, each accepting the common flags."""
    parser = argparse.ArgumentParser(
        prog="gateway",
        description="Webhook ingestion gateway: verify, record once, publish, settle.",
    )
    default_level = os.environ.get("GATEWAY_LOG_LEVEL", "INFO").upper()
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=default_level if default_level in LOG_LEVELS else "INFO",
        help="log level of the JSON logs on stderr (default INFO, or $GATEWAY_LOG_LEVEL)",
    )
    parser.add_argument("--config", help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = common_parser()
    for family in (processes, tools, ledger, dlq, reconcile):
        family.add_commands(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (2 for a bad configuration)."""
    args = build_parser().parse_args(argv)
    logs.configure(args.log_level)
    os.environ["GATEWAY_LOG_LEVEL"] = args.log_level  # for worker processes of `serve`
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    except GatewayError as exc:
        print(f"gateway: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
