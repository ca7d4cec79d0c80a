"""`gateway dlq`: inspect, replay and resolve dead letters, and see the DLQ's health.

Exit status: 0 done; 1 a row failed to replay, an id is unknown or a row is not open;
2 the flags or the configuration cannot be used. Bad input is one line, never a stack.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from gateway import settings as settings_mod
from gateway.cli import ordering, pages
from gateway.cli.common import (
    RATE_PER_S,
    ROWS_REPLAYED,
    ROWS_SHOWN,
    Number,
    SubParsers,
    help_texts,
    load_settings,
    login_name,
    operator_command,
    operator_family,
)
from gateway.cli.format import dumps, safe, when
from gateway.cli.processes import add_metrics_flags, metrics_address
from gateway.core.dlq.filters import DlqFilter, build_filter, check_replay_flags
from gateway.core.operator_input import parse_ids
from gateway.core.ordering.admin import release_line
from gateway.core.ordering.public import release_doc
from gateway.dlq.progress import ReplayReport
from gateway.errors import DlqRowNotFound, DlqUsageError, UsageError
from gateway.settings.secrets import NO_SECRET, SecretScope, secrets_under
from gateway.wiring import ops
from gateway.wiring.ordering import release_holder

Settings = settings_mod.Settings
Body = Callable[[Settings, argparse.Namespace, DlqFilter], Coroutine[Any, Any, int]]


#: What a replay may sign with: the `[forward.NAME]` secrets, for `forward:NAME` rows.
REPLAY_SECRETS = secrets_under("forward.")


def _command(body: Body, secrets: SecretScope = NO_SECRET) -> Callable[[argparse.Namespace], int]:
    """`body` as a command, reading the configuration with only `secrets` (inspecting
    commands read none, and run where no provider's secret is)."""

    def start(args: argparse.Namespace) -> Coroutine[Any, Any, int]:
        # Flags are checked before the configuration is read or anything connects.
        dlq_filter = _filter(args) if hasattr(args, "stage") else DlqFilter()
        return body(load_settings(args, secrets), args, dlq_filter)

    return operator_command("dlq", "dlq_command", start)


def _filter(args: argparse.Namespace) -> DlqFilter:
    return build_filter(
        datetime.now(UTC),
        stages=args.stage or (),
        error_classes=args.error_class or (),
        providers=args.provider or (),
        since=args.since,
        until=args.until,
        resolved=getattr(args, "resolved", False),
        unresolved=getattr(args, "unresolved", False),
        include_all=getattr(args, "any", False),
        types=args.type or (),
        search=args.search,
        min_attempts=args.min_attempts,
    )


def _out(text: str) -> None:
    print(text, flush=True)


def _row_id(text: str) -> int:
    try:
        (row_id,) = parse_ids([text], "ID")
    except UsageError as exc:  # the shared syntax, reported as this command's mistake
        raise DlqUsageError(str(exc)) from None
    return row_id


async def list_body(settings: Settings, args: argparse.Namespace, f: DlqFilter) -> int:
    now = datetime.now(UTC)
    rows, total, amounts = await ops.dead_letter_list(settings, f, args.limit)
    if args.json:
        _out(dumps([pages.dead_letter_doc(r, now, amounts.get(r.id)) for r in rows]))
        return 0
    _out(pages.dead_letter_table(rows, now, amounts) if rows else "no matching dead letters")
    if total > len(rows):
        _out(f"showing {len(rows)} of {total} matching rows (raise --limit to see more)")
    return 0


async def show_body(settings: Settings, args: argparse.Namespace, _: DlqFilter) -> int:
    row_id = _row_id(args.id)
    row = await ops.dead_letter(settings, row_id)
    if row is None:
        raise DlqRowNotFound([row_id])
    if args.json:
        _out(dumps(pages.dead_letter_row_doc(row)))
    else:
        _out(pages.dead_letter_page(row, datetime.now(UTC)))
    return 0


async def resolve_body(settings: Settings, args: argparse.Namespace, _: DlqFilter) -> int:
    row_id = _row_id(args.id)
    note = args.note.strip()
    if not note:
        raise DlqUsageError("--note must say what was done (it is kept as the cause)")
    user = login_name()
    # A row that holds its key is resolved by releasing the key, in one transaction.
    release = await release_holder(settings, row_id, note, user or ordering.operator_name())
    if release is not None:
        _out(dumps(release_doc(release)) if args.json else release_line(release))
        return 0
    done, row = await ops.resolve_dead_letter(settings, row_id, note, user)
    if row is None:
        raise DlqRowNotFound([row_id])
    if not done:
        print(
            f"gateway dlq resolve: row {row_id} was already resolved "
            f"({row.resolution} at {when(row.resolved_at)}); left as it was",
            file=sys.stderr,
        )
        return 1
    doc = {"id": row_id, "resolution": row.resolution, "note": note, "resolved_by": user}
    _out(dumps(doc) if args.json else f"resolved {row_id} by hand: {safe(note)}")
    return 0


async def stats_body(settings: Settings, args: argparse.Namespace, _: DlqFilter) -> int:
    now = datetime.now(UTC)
    stats = await ops.dead_letter_stats(settings, now)
    _out(dumps(pages.stats_doc(stats, now)) if args.json else pages.stats_page(stats, now))
    return 0


async def replay_body(settings: Settings, args: argparse.Namespace, f: DlqFilter) -> int:
    # Imported here: the replayer names every stage's handler and so loads the settlement
    # side, which `gateway serve` (parsing this same CLI) must not.
    from gateway.dlq.replay import replay, stage_handlers

    options = check_replay_flags(
        ids=args.id or (),
        replay_all=args.all,
        dlq_filter=f,
        limit=args.limit,
        rate_per_s=args.rate,
        max_attempts=args.max_attempts,
        force=args.force,
        dry_run=args.dry_run,
        unordered=args.unordered,
    )
    report = ReplayReport(quiet=args.json, dry_run=options.dry_run)
    handlers = stage_handlers(settings.forward)
    async with ops.replay_resources(settings) as ctx:
        try:
            summary = await replay(ctx, f, options, report.row, report.planned, handlers=handlers)
        finally:
            report.finish()
    if args.json:
        _out(dumps(pages.replay_doc(summary.results, options.dry_run)))
    elif options.dry_run:
        if report.would:
            _out(pages.dead_letter_table(report.would, datetime.now(UTC)))
        _out(
            f"dry run: would replay {summary.would_replay}, skip {summary.skipped}, "
            f"fail {summary.failed}; nothing was changed"
        )
    else:
        _out(f"replayed {summary.replayed}, failed {summary.failed}, skipped {summary.skipped}")
    return 1 if summary.failed and not options.dry_run else 0


def run_jobs_command(args: argparse.Namespace) -> int:
    """`gateway dlq run-jobs`: run the console's replay jobs until SIGINT/SIGTERM (a second
    signal forces exit), or with --once those runnable now."""
    # Imported here, as replay_body does: running a job loads the stage handlers.
    from gateway.dlq.jobs import RunnerOptions
    from gateway.wiring.jobs import jobs_metrics_address, run_job_runner
    from gateway.wiring.signals import run_until_signalled

    if args.once:  # a batch: an interrupted one leaves its job to the next runner
        return _command(run_once_body, REPLAY_SECRETS)(args)
    settings = load_settings(args, REPLAY_SECRETS)
    listen = metrics_address(args, jobs_metrics_address(settings))
    options = RunnerOptions(poll_s=args.poll_s)
    run_until_signalled(lambda: _forget(run_job_runner(settings, options, listen)))
    return 0


async def _forget(ran: Coroutine[Any, Any, int]) -> None:
    await ran


async def run_once_body(settings: Settings, args: argparse.Namespace, _: DlqFilter) -> int:
    from gateway.dlq.jobs import RunnerOptions
    from gateway.wiring.jobs import run_jobs

    count = await run_jobs(settings, RunnerOptions(once=True, poll_s=args.poll_s))
    _out(dumps({"jobs_run": count}) if args.json else f"ran {count} job(s)")
    return 0


def _filters(p: argparse.ArgumentParser, *, states: bool) -> None:
    each = "(repeatable)"
    p.add_argument(
        "--stage",
        action="append",
        help=f"ingest, publish, settlement, confirm or forward:NAME {each}",
    )
    p.add_argument("--error-class", action="append", help=f"e.g. EVENT_TYPE_MISSING {each}")
    p.add_argument("--provider", action="append", help=f"provider name {each}")
    when = "2026-11-30T10:00Z, or a duration ago: 30m, 2h, 1d"
    p.add_argument("--since", help=f"first failure at or after: {when}")
    p.add_argument("--until", help=f"first failure before: {when}")
    p.add_argument("--type", action="append", metavar="T", help=f"invoice.paid or invoice.* {each}")
    p.add_argument(
        "--search",
        metavar="TEXT",
        help="text in the event id or the error message (literal, any case)",
    )
    p.add_argument("--min-attempts", metavar="N", help="rows tried at least N times")
    if states:
        p.add_argument("--unresolved", action="store_true", help="open rows only (default)")
        p.add_argument("--resolved", action="store_true", help="resolved rows only")
        p.add_argument("--any", action="store_true", help="open and resolved rows")


#: `--max-attempts`: a row's attempts are counted one per replay or retry.
MAX_ATTEMPTS = Number(1, 1_000_000)
#: `run-jobs --poll-s`: how often an idle runner looks for a job.
POLL_S = Number(0.05, 3600, whole=False)

DLQ_ABOUT = """Dead letters are events the gateway kept but could not process: parked at
ingest (payload invalid), publish (the stream refused them) or settlement (the ledger or
currency-service said no for good). Inspect them, replay them once the cause is fixed, or
resolve them by hand with a note. Exit status: 0 done; 1 a row failed to replay, an id is
unknown or a row is not open; 2 the flags or the configuration cannot be used."""
CFG = "--config gateway.toml"


def add_commands(subparsers: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `gateway dlq ...`."""
    dlq = subparsers.add_parser(
        "dlq",
        help="Inspect, replay and resolve dead-letter rows.",
        parents=[common],
        **help_texts(
            DLQ_ABOUT,
            (
                f"gateway dlq stats {CFG}",
                f"gateway dlq list --stage settlement --since 2h {CFG}",
                f"gateway dlq replay --all --error-class UNKNOWN_MERCHANT --dry-run {CFG}",
            ),
        ),
    )
    family = operator_family(dlq, "dlq_command")
    p = family.add(
        "list",
        _command(list_body),
        "List dead-letter rows (oldest failure first).",
        """List dead-letter rows matching the filters, oldest failure first: id, stage,
        provider, event id, error class, attempts and age. Open rows only unless
        --resolved or --any.""",
        (
            f"gateway dlq list {CFG}",
            f"gateway dlq list --provider stripe --error-class UNKNOWN_MERCHANT --json {CFG}",
        ),
    )
    _filters(p, states=True)
    p.add_argument("--limit", type=ROWS_SHOWN, default=50, help="most rows shown (default 50)")
    p = family.add(
        "show",
        _command(show_body),
        "Show one row: payload, headers, error, stack.",
        """Show everything kept about one dead letter: the original payload and headers,
        the error class, message and stack, the attempts and, once resolved, how.""",
        (f"gateway dlq show 412 {CFG}", f"gateway dlq show 412 --json {CFG}"),
    )
    p.add_argument("id", metavar="ID")
    p = family.add(
        "replay",
        _command(replay_body, REPLAY_SECRETS),
        "Run the rows' stage again; resolve what succeeds.",
        """Run the failed stage again for the rows chosen by --id or by --all with the
        filters; rows that succeed are marked resolved, rows that fail again stay open
        with one more attempt. Fix the cause first (a config, a missing account), try
        --dry-run, then replay; --rate keeps the load gentle.""",
        (
            f"gateway dlq replay --id 412 --id 413 {CFG}",
            f"gateway dlq replay --all --stage settlement --rate 20 --dry-run {CFG}",
        ),
    )
    p.add_argument("--id", action="append", metavar="ID", help="a row to replay (repeatable)")
    p.add_argument("--all", action="store_true", help="every open row matching the filters")
    _filters(p, states=False)
    p.add_argument("--limit", type=ROWS_REPLAYED, help="replay at most this many rows")
    p.add_argument("--rate", type=RATE_PER_S, metavar="N", help="at most N rows per second")
    p.add_argument(
        "--max-attempts",
        type=MAX_ATTEMPTS,
        default=5,
        metavar="N",
        help="skip rows with N or more attempts (default 5)",
    )
    p.add_argument("--force", action="store_true", help="replay rows past --max-attempts too")
    p.add_argument("--dry-run", action="store_true", help="print what would run; change nothing")
    p.add_argument(
        "--unordered",
        action="store_true",
        help="oldest first, ignoring each key's order (default: a key's rows in key_seq order)",
    )
    p = family.add(
        "resolve",
        _command(resolve_body),
        "Mark a row handled by hand, with the cause.",
        """Mark one open row as handled outside the gateway (refunded by support, say),
        keeping --note as the documented cause and the operator's login name. A row
        already resolved is left as it was (exit 1).""",
        (f'gateway dlq resolve 412 --note "refunded by support, ticket 8812" {CFG}',),
    )
    p.add_argument("id", metavar="ID")
    p.add_argument("--note", required=True, help="what was done, kept as the documented cause")
    family.add(
        "stats",
        _command(stats_body),
        "Unresolved rows by stage and class, recent, oldest.",
        """The dead-letter table's health: unresolved rows by stage and error class, how
        many arrived recently and how old the oldest open one is.""",
        (f"gateway dlq stats {CFG}", f"gateway dlq stats --json {CFG}"),
    )
    p = family.add(
        "run-jobs",
        run_jobs_command,
        "Run the replay jobs planned in the console.",
        """Run replay jobs (planned in the console or its API) until SIGINT or SIGTERM:
        claim the oldest planned job, replay its rows one at a time in the plan's order
        with the same code as 'gateway dlq replay' (events: 'gateway events replay'),
        record each row's outcome, and honour pause and cancel between rows. A job
        whose runner stopped sending heartbeats for 30 s is taken over; rows already
        done are not run again. Any number of runners may run. With [console]
        jobs_metrics_port (or --metrics-port) it serves /metrics, /livez and /readyz
        there. Between jobs it also replays by itself the rows parked because the
        currency-service, the ledger or NATS was away, once that dependency answers
        again ([dlq] auto_replay; not with --once).""",
        (f"gateway dlq run-jobs {CFG}", f"gateway dlq run-jobs --once {CFG}"),
    )
    p.add_argument("--once", action="store_true", help="run the jobs runnable now, then exit")
    p.add_argument(
        "--poll-s",
        type=POLL_S,
        default=2.0,
        metavar="S",
        help="seconds between looks for a new job when idle (default 2)",
    )
    add_metrics_flags(p, "console.jobs_metrics_host", "console.jobs_metrics_port")
