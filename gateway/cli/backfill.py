"""`gateway backfill PROVIDER`: recover events the provider's API has and the gateway
never recorded."""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gateway.cli.common import RATE_PER_S, SubParsers, help_texts, load_settings
from gateway.cli.format import print_json
from gateway.core.operator_input import parse_instant
from gateway.errors import BackfillUsageError, UsageError
from gateway.settings.secrets import secrets_under

if TYPE_CHECKING:
    from gateway.backfill.run import BackfillReport


def _print(report: BackfillReport) -> None:
    t = report.tally
    for window in report.continued:
        print(
            f"continued the unfinished run of {window.since.isoformat()} .. "
            f"{window.until.isoformat()} from its cursor"
        )
    for line in report.errors:
        print(f"failed   {line}")
    if report.errors_left_off:
        print(f"failed   ... and {report.errors_left_off} more (the counts below are complete)")
    for line in report.skipped:
        print(f"skipped  {line}")
    if report.stopped is not None:
        print(
            f"stopped  after {report.pages} pages at the pass's bound ({report.stopped}); "
            "run again to continue from the saved cursor"
        )
    if report.dry_run:
        for item in report.events:
            print(f"would recover {item['event_id']} {item['event_type'] or ''}".rstrip())
        print(
            f"backfill {report.provider} (dry run): fetched {t.fetched}, present {t.present}, "
            f"would recover {t.would_recover}, failed {t.failed}"
        )
        return
    extra = f", {report.unpublished} left to the outbox relay" if report.unpublished else ""
    print(
        f"backfill {report.provider}: fetched {t.fetched}, present {t.present}, "
        f"recovered {t.recovered}, failed {t.failed}{extra}"
    )


def cmd_backfill(args: argparse.Namespace) -> int:
    from gateway.wiring.backfill import run_backfill

    # That provider's API key alone: what the backfill reads its events with.
    settings = load_settings(args, secrets_under(f"providers.{args.provider}.api_key_env"))
    now = datetime.now(UTC)
    try:
        since = parse_instant(args.since, now, "--since")
        until = parse_instant(args.until, now, "--until") if args.until else None
    except UsageError as exc:
        raise BackfillUsageError(str(exc)) from None
    report = asyncio.run(
        run_backfill(
            settings,
            args.provider,
            since=since,
            until=until,
            types=list(args.type or []),
            now=now,
            dry_run=args.dry_run,
            rate_per_s=args.rate,
        )
    )
    if args.json:
        print_json(report.to_json())
    else:
        _print(report)
    return 1 if report.tally.failed or report.skipped or report.stopped else 0


def add_commands(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `gateway backfill`."""
    about = """List the provider's events in a window over its API (Stripe GET /v1/events,
    GitHub hook deliveries, Paddle GET /events, Square POST /v2/events) and record,
    publish and mark as source=backfill every one the gateway never recorded, through the
    same idempotency gate as a webhook; already recorded ones are counted present. A run
    that dies continues from its last page when run again. Exit 1 if some event failed, a page was
    skipped, or the run stopped at a bound of the pass (api_max_pages, api_max_pass_s)."""
    parser = sub.add_parser(
        "backfill",
        help="Recover events that never arrived, from the provider's API.",
        parents=[common],
        **help_texts(
            about,
            (
                "gateway backfill stripe --since 2h --dry-run --config gateway.toml",
                "gateway backfill stripe --since 2026-11-30T09:00Z --until 2026-11-30T10:00Z",
                "gateway backfill github --since 1d --type push --rate 5 --json",
            ),
        ),
    )
    add = parser.add_argument
    add("provider", metavar="PROVIDER", help="a [providers.NAME] with api_key_env")
    add("--since", required=True, help="from this time (2026-11-30T10:00Z) or ago (2h, 1d)")
    add("--until", default=None, help="until this time (default: now)")
    add("--type", action="append", metavar="T", help="only this event type (repeatable)")
    add("--dry-run", action="store_true", help="list what would be recovered; record nothing")
    add("--rate", type=RATE_PER_S, default=None, help="at most N API calls a second")
    parser.set_defaults(func=cmd_backfill)
