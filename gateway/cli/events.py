"""`gateway events`: look at accepted events and re-publish them to the stream.

Exit status: 0 done; 1 an event failed to publish or an id is unknown; 2 the flags or
the configuration cannot be used. Bad input is one line, never a stack.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from gateway import settings as settings_mod
from gateway.cli import pages
from gateway.cli.common import (
    RATE_PER_S,
    ROWS_REPLAYED,
    ROWS_SHOWN,
    SubParsers,
    help_texts,
    load_settings,
    operator_command,
    operator_family,
)
from gateway.cli.format import dumps
from gateway.core.events.filters import EventFilter, build_event_filter, check_replay_choice
from gateway.core.events.rows import EventBrief
from gateway.core.operator_input import parse_ids
from gateway.dlq.progress import Progress
from gateway.errors import EventRowNotFound, EventsUsageError, UsageError
from gateway.wiring import events as wiring

Settings = settings_mod.Settings
Body = Callable[[Settings, argparse.Namespace, EventFilter], Coroutine[Any, Any, int]]


def _command(body: Body) -> Callable[[argparse.Namespace], int]:
    def start(args: argparse.Namespace) -> Coroutine[Any, Any, int]:
        # Flags are checked before the configuration is read or anything connects.
        f = _filter(args) if hasattr(args, "provider") else EventFilter()
        return body(load_settings(args), args, f)

    return operator_command("events", "events_command", start)


def _filter(args: argparse.Namespace) -> EventFilter:
    return build_event_filter(
        datetime.now(UTC),
        providers=args.provider or (),
        types=args.type or (),
        since=args.since,
        until=args.until,
        ids=args.id or (),
        event_ids=args.event_id or (),
        source=args.source,
    )


def _out(text: str) -> None:
    print(text, flush=True)


async def list_body(settings: Settings, args: argparse.Namespace, f: EventFilter) -> int:
    limit: int = args.limit
    rows, more = await wiring.event_rows(settings, f, limit)
    if args.json:
        _out(dumps([pages.event_doc(r) for r in rows]))
        return 0
    _out(pages.event_table(rows) if rows else "no matching events")
    if more:
        _out(f"showing the newest {len(rows)} matching events (raise --limit to see more)")
    return 0


async def show_body(settings: Settings, args: argparse.Namespace, _: EventFilter) -> int:
    try:
        (row_id,) = parse_ids([args.row_id], "ID")
    except UsageError as exc:  # the shared syntax, reported as this command's mistake
        raise EventsUsageError(str(exc)) from None
    row = await wiring.event_row(settings, row_id)
    if row is None:
        raise EventRowNotFound(f"no accepted event with id {row_id}")
    _out(dumps(pages.event_row_doc(row)) if args.json else pages.event_page(row))
    return 0


async def replay_body(settings: Settings, args: argparse.Namespace, f: EventFilter) -> int:
    from gateway.events.replay import EventResult, Outcome, ReplayRun, replay_events

    check_replay_choice(f, args.all)
    run = ReplayRun(limit=args.limit, rate_per_s=args.rate, dry_run=args.dry_run)
    bar: Progress | None = None
    would: list[EventBrief] = []

    def on_total(total: int) -> None:
        nonlocal bar
        if not args.dry_run and not args.json:
            bar = Progress(sys.stderr, total)

    def on_result(result: EventResult) -> None:
        if result.outcome is Outcome.WOULD_REPLAY:
            would.append(result.row)
        elif result.outcome is not Outcome.REPLAYED and not args.json:
            if bar is not None:
                bar.clear()
            r = result.row
            _out(f"{result.outcome.value:<8} {r.id} {r.provider}/{r.event_id}: {result.message}")
        if bar is not None:
            bar.advance()

    async with wiring.replay_parts(settings) as (pool, publisher):
        try:
            summary = await replay_events(pool, publisher, f, run, on_total, on_result)
        finally:
            if bar is not None:
                bar.finish()
    if args.json:
        _out(dumps(summary.to_json(args.dry_run)))
    elif args.dry_run:
        if would:
            _out(pages.event_table(would))
        _out(
            f"dry run: would replay {summary.would_replay}, skip {summary.skipped}; "
            "nothing was published"
        )
    else:
        _out(f"replayed {summary.replayed}, failed {summary.failed}, skipped {summary.skipped}")
        if summary.stopped:
            _out(f"stopped early: {summary.stopped}; run it again once NATS is back")
    return 1 if summary.failed else 0


def _filters(p: argparse.ArgumentParser) -> None:
    each = "(repeatable)"
    when = "2026-11-30T10:00Z, or a duration ago: 30m, 2h, 1d"
    p.add_argument("--provider", action="append", help=f"provider name {each}")
    p.add_argument("--type", action="append", metavar="T", help=f"invoice.paid or invoice.* {each}")
    p.add_argument("--since", help=f"received at or after: {when}")
    p.add_argument("--until", help=f"received before: {when}")
    p.add_argument("--id", action="append", metavar="ID", help=f"a row id {each}")
    p.add_argument(
        "--event-id", action="append", metavar="ID", help=f"a provider's event id {each}"
    )
    p.add_argument(
        "--source", choices=("live", "backfill", "confirmed"), help="how the events arrived"
    )


ABOUT = """Accepted events are the rows of the idempotency gate (processed_webhooks): every
webhook and internal event the gateway recorded, live or recovered by backfill. List
them, show one with its headers and body, or publish chosen ones to the stream again
(replay), even inside JetStream's duplicate window; consumers are idempotent, so a
replayed payment settles once. Exit status: 0 done; 1 an event failed to publish or an
id is unknown; 2 the flags or the configuration cannot be used."""
CFG = "--config gateway.toml"


def add_commands(subparsers: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `gateway events ...`."""
    events = subparsers.add_parser(
        "events",
        help="List, show and replay accepted events.",
        parents=[common],
        **help_texts(
            ABOUT,
            (
                f"gateway events list --provider stripe --since 2h {CFG}",
                f"gateway events show 1234 {CFG}",
                f"gateway events replay --all --since 2026-11-30T09:00Z --dry-run {CFG}",
            ),
        ),
    )
    family = operator_family(events, "events_command")
    p = family.add(
        "list",
        _command(list_body),
        "List accepted events (newest first).",
        """List accepted events matching the filters, newest first: row id, provider,
        event id, type, source (live or backfill), when it was received and whether it
        is on the stream yet (yes, waiting in the outbox, parked, or never: no subject).""",
        (
            f"gateway events list --provider stripe --type 'invoice.*' --since 1d {CFG}",
            f"gateway events list --source backfill --json {CFG}",
        ),
    )
    _filters(p)
    p.add_argument("--limit", type=ROWS_SHOWN, default=50, help="most rows shown (default 50)")
    p = family.add(
        "show",
        _command(show_body),
        "Show one event: fields, headers, body.",
        """Show one accepted event by row id: its fields, the headers kept (secrets
        redacted) and the body, as indented JSON where it is JSON. A body that retention
        removed is reported with the time it was removed.""",
        (f"gateway events show 1234 {CFG}", f"gateway events show 1234 --json {CFG}"),
    )
    p.add_argument("row_id", metavar="ID", help="the event's row id (see list)")
    p = family.add(
        "replay",
        _command(replay_body),
        "Publish chosen events to the stream again.",
        """Publish the events chosen by --id or --event-id, or by --all with the filters,
        to the stream again in the order they were recorded. Each message gets its own
        Nats-Msg-Id ({provider}:{event_id}:replay:{token}) so JetStream's duplicate window
        does not drop it, and a Gateway-Replayed header. Events never published (no
        subject) and events whose payload retention removed are skipped. Try --dry-run
        first; --rate keeps the load gentle.""",
        (
            f"gateway events replay --id 1234 --id 1235 {CFG}",
            f"gateway events replay --all --provider stripe --since 2h --rate 50 {CFG}",
        ),
    )
    _filters(p)
    p.add_argument("--all", action="store_true", help="every event matching the filters")
    p.add_argument("--limit", type=ROWS_REPLAYED, help="replay at most this many events")
    p.add_argument("--rate", type=RATE_PER_S, metavar="N", help="at most N events per second")
    p.add_argument(
        "--dry-run", action="store_true", help="print what would be published; publish nothing"
    )
