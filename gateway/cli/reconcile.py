"""`gateway reconcile`: one pass re-publishing accepted events with no settlement outcome."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from gateway.cli.common import Number, SubParsers, help_texts, load_settings
from gateway.cli.format import print_json

if TYPE_CHECKING:
    from gateway.settlement.reconcile import ReconcileReport

# `gateway.settlement.reconcile`'s defaults, written out: `gateway serve` builds this
# parser too and must not load the settlement side (a test keeps the two equal).
DEFAULT_OLDER_THAN_S = 900.0
DEFAULT_LOOKBACK_S = 7 * 86_400.0
#: Ten years, in seconds: past any retention, and inside what a timestamp can subtract.
_TEN_YEARS_S = 10 * 365 * 86_400


def _print(report: ReconcileReport, as_json: bool) -> None:
    if as_json:
        print_json(report.to_json())
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
    if report.payload_removed:
        print(
            f"{len(report.payload_removed)} settling event(s) not checked: payload removed by "
            "retention, nothing to re-publish (keep --lookback-s below payload_max_age_s)"
        )
        for key in report.payload_removed:
            print(f"  {key}")


def cmd_reconcile(args: argparse.Namespace) -> int:
    from gateway.wiring.settlement import run_reconcile

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
    about = """One pass over recently accepted events that should settle: re-publish those
    with no settlement outcome yet (no settled settlement, no open dead letter), received
    at least --older-than-s ago and already published, then exit. The settlement worker
    is idempotent, so a re-published event that did settle meanwhile changes nothing. Run
    it from cron or a timer; exit 1 if some re-publish was not acknowledged."""
    parser = sub.add_parser(
        "reconcile",
        help="Re-publish accepted events that never got a settlement outcome.",
        parents=[common],
        **help_texts(
            about,
            (
                "gateway reconcile --config gateway.toml --dry-run",
                "*/15 * * * *  gateway reconcile --config /etc/gateway/gateway.toml --json",
            ),
        ),
    )
    add = parser.add_argument
    add(
        "--older-than-s",
        type=Number(0, _TEN_YEARS_S, whole=False),
        default=DEFAULT_OLDER_THAN_S,
        help=f"events received at least this long ago and already published "
        f"(default {DEFAULT_OLDER_THAN_S:g}, past the worker's own retries)",
    )
    add(
        "--lookback-s",
        type=Number(1, _TEN_YEARS_S, whole=False),
        default=DEFAULT_LOOKBACK_S,
        help=f"events received within this many seconds (default {DEFAULT_LOOKBACK_S:g})",
    )
    add("--batch-size", type=Number(1, 100_000), default=500, help="rows read at a time")
    add("--dry-run", action="store_true", help="list what would be re-published")
    parser.set_defaults(func=cmd_reconcile)
