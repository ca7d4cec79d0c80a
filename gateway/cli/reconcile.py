"""`gateway reconcile`: one pass re-publishing accepted events with no settlement outcome."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

import orjson

from gateway.cli.common import SubParsers, load_settings

if TYPE_CHECKING:
    from gateway.settlement.reconcile import ReconcileReport

# `gateway.settlement.reconcile`'s defaults, written out: `gateway serve` builds this
# parser too and must not load the settlement side (a test keeps the two equal).
DEFAULT_OLDER_THAN_S = 900.0
DEFAULT_LOOKBACK_S = 7 * 86_400.0


def _print(report: ReconcileReport, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    verb = "would re-publish" if report.dry_run else "re-published"
    count = len(report.events) if report.dry_run else report.republished
    failed = f", {report.failed} not acknowledged" if report.failed else ""
    print(
        f"reconcile {report.run_id}: {report.scanned} settling event(s) checked, "
        f"{report.settled} settled, {verb} {count}{failed}"
    )
    for key in report.events if report.dry_run else []:
        print(f"  {key}")


def cmd_reconcile(args: argparse.Namespace) -> int:
    from gateway.compose.settlement import run_reconcile

    settings = load_settings(args)
    report = asyncio.run(
        run_reconcile(
            settings,
            older_than_s=args.older_than_s,
            lookback_s=args.lookback_s,
            batch_size=args.batch_size,
            dry_run=args.dry_run,
        )
    )
    _print(report, args.json)
    return 1 if report.failed else 0


def add_commands(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `gateway reconcile`."""
    about = (
        "Re-publish accepted events that should settle and have no settlement outcome "
        "(no settled settlement, no open dead letter) once they are --older-than-s."
    )
    parser = sub.add_parser("reconcile", help=about, description=about, parents=[common])
    add = parser.add_argument
    add(
        "--older-than-s",
        type=float,
        default=DEFAULT_OLDER_THAN_S,
        help=f"events acknowledged by the stream at least this long ago "
        f"(default {DEFAULT_OLDER_THAN_S:g}, past the worker's own retries)",
    )
    add(
        "--lookback-s",
        type=float,
        default=DEFAULT_LOOKBACK_S,
        help=f"events received within this many seconds (default {DEFAULT_LOOKBACK_S:g})",
    )
    add("--batch-size", type=int, default=500, help="rows read at a time")
    add("--dry-run", action="store_true", help="list what would be re-published")
    add("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=cmd_reconcile)
