"""`gateway ledger statement|transfers|export|adjust` and `check --payments`: finance's
commands (argparse and printing only; the work is `gateway.settlement.finance`)."""

from __future__ import annotations

import argparse
import asyncio
import csv
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from gateway.cli.common import SubParsers, help_texts, load_settings, login_name
from gateway.cli.format import print_json
from gateway.core.finance.input import required_field, text_field
from gateway.core.finance.statements import FIELDS, Adjustment, Filters, Line, running
from gateway.core.money import check_currency, format_minor
from gateway.core.operator_input import parse_instant
from gateway.core.settlement.instructions import SettlementKind
from gateway.errors import UnknownMerchant, UsageError
from gateway.settings import Settings

if TYPE_CHECKING:
    from gateway.core.ledger.port import Ledger

#: The gateway's database pool, as `wiring.ops.books` opens it (the CLI names no adapter).
Pool = Any

T = TypeVar("T")
FINANCE_COMMANDS = ("statement", "transfers", "export", "adjust")


def _with_books(settings: Settings, work: Callable[[Pool, Ledger], Awaitable[T]]) -> T:
    from gateway.wiring import ops  # the ledger side, loaded only by these commands

    async def run() -> T:
        async with ops.books(settings) as (pool, ledger):
            return await work(pool, ledger)

    return asyncio.run(run())


def _currency(value: str | None, settings: Settings) -> str:
    try:
        return check_currency(value or settings.settlement.currency)
    except ValueError as exc:
        raise UsageError(f"--currency: {exc}") from None


def _window(args: argparse.Namespace) -> tuple[datetime | None, datetime | None]:
    now = datetime.now(UTC)
    since = None if args.since is None else parse_instant(args.since, now, "--since")
    until = None if args.until is None else parse_instant(args.until, now, "--until")
    return since, until


def _emit(lines: AsyncIterator[Line], fmt: str) -> Awaitable[int]:
    """Print each line as it comes (one page in memory at a time); how many."""

    async def run() -> int:
        writer = csv.DictWriter(sys.stdout, fieldnames=FIELDS) if fmt == "csv" else None
        if writer is not None:
            writer.writeheader()
        n = 0
        async for line in lines:
            n += 1
            if writer is not None:
                writer.writerow(line.as_dict())
            elif fmt == "json":
                sys.stdout.write(orjson.dumps(line.as_dict()).decode() + "\n")  # NDJSON
            else:
                print(line.text())
        return n

    return run()


def cmd_finance(args: argparse.Namespace) -> int:
    """Run one of `FINANCE_COMMANDS`, or `check --payments`."""
    from gateway.settlement import finance

    settings = load_settings(args)
    command = args.ledger_command
    fmt = "csv" if getattr(args, "csv", False) else "json" if args.json else "text"
    if command == "statement":
        currency = _currency(args.currency, settings)
        since, until = _window(args)

        async def statement(pool: Pool, _ledger: Ledger) -> tuple[int, int, int]:
            opening, lines = await finance.statement(pool, args.merchant, currency, since, until)
            closing = opening

            async def tracked() -> AsyncIterator[Line]:
                nonlocal closing
                async for line in lines:
                    closing = line.balance_minor
                    yield line

            if fmt == "text":
                print(f"statement of {args.merchant} in {currency}")
                print(f"opening balance {format_minor(opening, currency)}")
            n = await _emit(tracked(), fmt)
            return opening, closing, n

        opening, closing, n = _with_books(settings, statement)
        if fmt == "text":
            print(f"closing balance {format_minor(closing, currency)} ({n} movements)")
        else:
            print(f"opening {opening} closing {closing} {currency}", file=sys.stderr)
        return 0
    if command in ("transfers", "export"):
        since, until = _window(args)
        kind = None if args.kind is None else SettlementKind(args.kind)
        in_currency = None if args.currency is None else _currency(args.currency, settings)
        filters = Filters(args.merchant, in_currency, args.payment, kind, since, until)

        async def listing(pool: Pool, _ledger: Ledger) -> int:
            async def lines() -> AsyncIterator[Line]:
                async for m in finance.movements(pool, filters):
                    yield next(running([m], 0))  # a list carries no running balance

            return await _emit(lines(), fmt if command == "transfers" else args.format)

        _with_books(settings, listing)
        return 0
    if command == "adjust":
        # The console's bounds too: ids one line of at most 200 characters, a reason and
        # a note of at most 2,000; each kept in `ledger_adjustments` for ever.
        reason = text_field(args.reason, "--reason")
        if reason is None:
            raise UsageError("--reason: required; say why the ledger is corrected")
        wanted = Adjustment(required_field(args.id, "--id"),
                            required_field(args.merchant, "--merchant"), args.amount,
                            _currency(args.currency, settings), reason,
                            text_field(args.note, "--note"), login_name() or "unknown")  # fmt: skip
        try:
            stored, moved = _with_books(settings, lambda p, led: finance.adjust(p, led, wanted))
        except UnknownMerchant as exc:
            raise UsageError(str(exc)) from None
        shown = format_minor(stored.amount_minor, stored.currency)
        if args.json:
            print_json({"adjustment_id": stored.adjustment_id, "merchant_id": stored.merchant_id,
                        "amount_minor": stored.amount_minor, "currency": stored.currency,
                        "moved": moved})  # fmt: skip
        else:
            done = "posted" if moved else "posted before; nothing moved again"
            print(f"adjustment {stored.adjustment_id}: {shown} to {stored.merchant_id}, {done}")
        return 0
    raise UsageError(f"unknown ledger command {command!r}")


def cmd_check_payments(args: argparse.Namespace) -> int:
    """`gateway ledger check --payments`: exit 1 naming each payment that differs."""
    from gateway.settlement.payment_check import check_payments

    settings = load_settings(args)
    found = _with_books(settings, check_payments)
    differing = sorted(found.differing.values(), key=lambda d: d.payment_id)
    if args.json:
        print_json({"rows": found.rows, "differing": [
            {"payment_id": d.payment_id, "recorded_minor": d.recorded_minor,
             "posted_minor": d.posted_minor, "notes": d.notes} for d in differing]})  # fmt: skip
    else:
        for d in differing:
            print(f"payment {d.payment_id}: recorded {d.recorded_minor}, posted "
                  f"{d.posted_minor}: {'; '.join(d.notes)}")  # fmt: skip
        verdict = "every payment matches" if not differing else f"{len(differing)} differ"
        print(f"{found.rows} movements checked against the ledger: {verdict}")
    return 1 if differing else 0


def add_finance_commands(commands: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount finance's commands under `gateway ledger`."""
    kinds = [k.value for k in SettlementKind]

    def window(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--since", help="recorded at or after (2026-11-30T10:00Z, or 2h, 7d)")
        parser.add_argument("--until", help="recorded before (the same forms)")

    statement = commands.add_parser(
        "statement",
        help="A merchant's movements with the running balance.",
        parents=[common],
        **help_texts(
            """Print a merchant's opening balance, every movement settled in the window
            (kind, provider, event id, its amount in its own currency and rate, what it
            moved in the ledger's currency, the balance after it) and the closing
            balance. Streamed in pages of 1,000, so any number of movements fits in
            memory. --json and --csv print one movement a line.""",
            ("gateway ledger statement --merchant m_1 --since 30d --config gateway.toml",
             "gateway ledger statement --merchant m_1 --currency EUR --csv > m_1.csv"),
        ),
    )  # fmt: skip
    statement.add_argument("--merchant", required=True, metavar="M")
    statement.add_argument("--currency", metavar="C", help="default: [settlement] currency")
    statement.add_argument("--csv", action="store_true", help="CSV with a header line")
    window(statement)
    transfers = commands.add_parser(
        "transfers",
        help="Movements filtered by merchant, payment, kind and time.",
        parents=[common],
        **help_texts(
            """List recorded movements in the order they were recorded, filtered; keyset
            pages of 1,000 keep memory bounded. --json prints one movement a line.""",
            ("gateway ledger transfers --payment pi_3 --config gateway.toml",
             "gateway ledger transfers --merchant m_1 --kind chargeback --since 7d --json"),
        ),
    )  # fmt: skip
    export = commands.add_parser(
        "export",
        help="Every movement as NDJSON or CSV, streamed, for finance.",
        parents=[common],
        **help_texts(
            """Write the movements (the same filters as transfers) to stdout as NDJSON
            or CSV, a page of 1,000 at a time: bounded memory over any number.""",
            ("gateway ledger export --since 2026-11-01T00:00Z --until 2026-12-01T00:00Z "
             "--format csv > november.csv",),
        ),
    )  # fmt: skip
    export.add_argument("--format", choices=("ndjson", "csv"), default="ndjson")
    for parser in (transfers, export):
        parser.add_argument("--merchant", metavar="M")
        parser.add_argument("--payment", metavar="ID", help="the payment's id")
        parser.add_argument("--kind", choices=kinds)
        parser.add_argument("--currency", metavar="C", help="the ledger currency")
        window(parser)
    adjust = commands.add_parser(
        "adjust",
        help="Post one audited correcting entry for a merchant.",
        parents=[common],
        **help_texts(
            """Post a correcting transfer between the merchant's account and the
            adjustments account of the currency: a positive --amount (minor units)
            credits the merchant, a negative one debits it. Idempotent by --id: the
            same entry again moves nothing; the id with other fields is refused. The
            reason and your login name are recorded in ledger_adjustments.""",
            ("gateway ledger adjust --merchant m_1 --amount -1250 --currency USD "
             "--reason 'duplicate capture, ticket 812' --id adj-812",),
        ),
    )  # fmt: skip
    adjust.add_argument("--merchant", required=True, metavar="M")
    adjust.add_argument("--amount", required=True, type=_minor, help="signed minor units")
    adjust.add_argument("--currency", metavar="C", help="default: [settlement] currency")
    adjust.add_argument("--reason", required=True, help="why the ledger is corrected")
    adjust.add_argument("--id", required=True, help="your id for this entry (idempotency)")
    adjust.add_argument("--note", help="anything else worth keeping")
    for parser in (statement, transfers, export, adjust):
        parser.set_defaults(func=cmd_finance)


def _minor(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an integer of minor units (USD 12.50 is 1250)"
        ) from None
