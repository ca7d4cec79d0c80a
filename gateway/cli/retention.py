"""`gateway retention run`: one retention pass, for cron."""

from __future__ import annotations

import argparse
import asyncio
import logging
from datetime import datetime
from typing import TYPE_CHECKING

from gateway.cli.common import SubParsers, help_texts, load_settings, operator_family
from gateway.cli.format import print_json

if TYPE_CHECKING:
    from gateway.core.retention import RetentionReport

log = logging.getLogger(__name__)


def _before(cutoff: datetime | None, what: str) -> str:
    if cutoff is None:
        return f"{what} kept for ever"
    return f"{what} of events received before {cutoff.isoformat(timespec='seconds')}"


def summary(report: RetentionReport) -> list[str]:
    """The text answer: one line of counts, one of cutoffs."""
    from gateway.core.retention import DEAD_LETTERS, ORDER_COUNTERS, ORDER_LOG, WEBHOOKS, Removed

    if report.skipped:
        return ["retention: skipped, another process holds the retention lock"]
    head = "retention (dry run): would empty" if report.dry_run else "retention: emptied"
    delete = "would delete" if report.dry_run else "deleted"
    webhooks = report.count(WEBHOOKS, Removed.PAYLOAD)
    dead_letters = report.count(DEAD_LETTERS, Removed.PAYLOAD)
    keys = report.count(WEBHOOKS, Removed.KEY)
    # One counter row per ordering key: its count is the keys'; the log has a row a number.
    order_keys = report.count(ORDER_COUNTERS, Removed.KEY)
    order_log = report.count(ORDER_LOG, Removed.KEY)
    return [
        f"{head} {webhooks} event payload(s) and {dead_letters} dead-letter payload(s), "
        f"{delete} {keys} key(s) and {order_keys} ordering key(s) ({order_log} order log "
        f"row(s)); {report.batches} batch(es) in {report.duration_s:.2f} s",
        f"  {_before(report.payloads_before, 'payloads')}; {_before(report.keys_before, 'keys')}",
    ]


def cmd_retention_run(args: argparse.Namespace) -> int:
    from gateway.core.retention import key_horizon_warning
    from gateway.settings import RETRY_HORIZON_S
    from gateway.wiring.retention import run_retention

    settings = load_settings(args)
    warning = key_horizon_warning(settings.retention.key_max_age_s, RETRY_HORIZON_S)
    if warning:
        log.warning(warning)
    report = asyncio.run(run_retention(settings, dry_run=args.dry_run))
    if args.json:
        print_json(report.to_json())
    else:
        print("\n".join(summary(report)))
    return 0


def add_commands(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `gateway retention run`."""
    about = """Remove what the [retention] settings say is old enough: the bodies and headers
    of events received more than payload_max_age_s ago (dead letters: resolved that long
    ago; open ones keep theirs), and, with key_max_age_s > 0, the events' rows and keys.
    Events still waiting for the outbox are never touched. Works in batches of batch_size
    rows, each its own short transaction. One process works at a time: if another holds
    the retention lock (a gateway serve, another cron run), this run says so and exits 0."""
    retention = sub.add_parser(
        "retention",
        help="Remove old payloads and keys ([retention] settings).",
        parents=[common],
        **help_texts(about, ("gateway retention run --config gateway.toml --dry-run",)),
    )
    run = operator_family(retention, "retention_command").add(
        "run",
        cmd_retention_run,
        "One retention pass, then exit (for cron).",
        about,
        (
            "gateway retention run --config gateway.toml --dry-run",
            "17 * * * *  gateway retention run --config /etc/gateway/gateway.toml --json",
        ),
    )
    run.add_argument("--dry-run", action="store_true", help="count what would go; change nothing")
