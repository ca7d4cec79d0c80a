"""`gateway ledger open-account|balances|check`; finance's commands are `cli.finance`."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from gateway.cli.common import (
    SubParsers,
    help_texts,
    load_settings,
    operator_family,
    outage_line,
)
from gateway.cli.finance import add_finance_commands, cmd_check_payments
from gateway.cli.format import print_json
from gateway.core.money import check_currency, format_decimal
from gateway.errors import ConfigError, GatewayError, LedgerImbalance, UsageError
from gateway.settings import Settings

if TYPE_CHECKING:
    from gateway.core.ledger.accounts import AccountNames, AccountView
    from gateway.core.ledger.port import Ledger

T = TypeVar("T")

#: `gateway ledger check`'s exit status when it could not read the ledger as one state
#: (transfers kept landing on TigerBeetle, or the ledger did not answer): UNKNOWN, as
#: monitoring plugins say, apart from 1, an imbalance.
NO_VERDICT = 3


def _with_ledger(
    settings: Settings, operation: Callable[[Ledger, AccountNames], Awaitable[T]]
) -> T:
    # Imported here: `gateway serve` parses the same CLI and must not load the ledger side.
    from gateway.wiring import ops

    async def run() -> T:
        async with ops.ledger(settings) as (ledger, names):
            return await operation(ledger, names)

    return asyncio.run(run())


def _currency_flag(value: str) -> str:
    try:
        return check_currency(value)
    except ValueError as exc:
        raise ConfigError("--currency", str(exc)) from None


def _print_table(views: list[AccountView]) -> None:
    """Amounts as a person reads them, in the account's currency and its decimals
    (`--json` keeps minor units); an account of unknown currency in minor units."""
    # The reserved column only when an authorisation is open: most ledgers have none.
    reserving = any(v.debits_pending or v.credits_pending for v in views)
    print(
        f"{'account':<36} {'kind':<8} {'owner':<20} {'currency':<8} "
        f"{'debits':>18} {'credits':>18} {'balance':>18}"
        + (f" {'reserved':>18}" if reserving else "")
    )
    for v in views:
        owner = v.owner if v.owner is not None else "(unnamed)"

        def shown(amount: int, currency: str | None = v.currency) -> str:
            return format_decimal(amount, currency) if currency else str(amount)

        print(
            f"{v.account_id:#034x}   {v.kind:<8} {owner:<20} {v.currency or '?':<8} "
            f"{shown(v.debits_posted):>18} {shown(v.credits_posted):>18} "
            f"{shown(v.balance):>18}" + (f" {shown(v.reserved):>18}" if reserving else "")
        )


def cmd_ledger(args: argparse.Namespace) -> int:
    from gateway.settlement import ledger_ops

    if args.ledger_command == "check" and args.payments:
        return _or_no_verdict(args, lambda: cmd_check_payments(args), "differing")
    settings = load_settings(args)
    if args.ledger_command == "open-account":
        currency = _currency_flag(args.currency or settings.settlement.currency)
        merchant = args.merchant_id
        account = _with_ledger(
            settings, lambda led, names: ledger_ops.open_account(led, names, merchant, currency)
        )
        if args.json:
            print_json(
                {"account_id": f"{account:#034x}", "merchant_id": merchant, "currency": currency}
            )
        else:
            print(f"account {account:#034x} open for merchant {merchant} ({currency})")
        return 0
    if args.ledger_command == "balances":
        wanted = None if args.currency is None else _currency_flag(args.currency)
        views = _with_ledger(
            settings,
            lambda led, names: ledger_ops.balances(
                led, names, merchant=args.merchant, currency=wanted
            ),
        )
        if args.json:
            print_json([v.as_dict() for v in views])
        else:
            _print_table(views)
        return 0
    return _or_no_verdict(args, lambda: _check_totals(args, settings), "balanced")


def _check_totals(args: argparse.Namespace, settings: Settings) -> int:
    from gateway.settlement import ledger_ops

    try:
        debits, credits = _with_ledger(settings, lambda led, _names: ledger_ops.check(led))
    except LedgerImbalance as exc:
        print(f"ledger check FAILED: {exc}", file=sys.stderr)
        if args.json:
            print_json({"balanced": False, "error": str(exc)})
        return 1
    if args.json:
        print_json({"balanced": True, "debits": debits, "credits": credits})
    else:
        print(f"ledger balanced: debits {debits} = credits {credits}")
    return 0


def _or_no_verdict(args: argparse.Namespace, check: Callable[[], int], verdict_key: str) -> int:
    """`check`'s exit status, or `NO_VERDICT` when it could not give one: the ledger or
    the database did not answer, TigerBeetle kept moving, a statement failed. A monitor
    must tell "look again" from 1, a difference found. Bad flags and a bad
    configuration stay 2."""
    try:
        return check()
    except (ConfigError, UsageError):
        raise
    except (GatewayError, OSError) as exc:
        # An outage reads as it does from every command; the status says "no verdict".
        line = outage_line(exc, getattr(args, "loaded_settings", None), os.environ)
        print(line or f"ledger check: no verdict: {type(exc).__name__}: {exc}", file=sys.stderr)
        if args.json:
            print_json({verdict_key: None, "error": str(exc)})
        return NO_VERDICT


def add_commands(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `gateway ledger ...`."""
    about = """Work with the settlement ledger (the backend named in [ledger]: the embedded
    PostgreSQL ledger or TigerBeetle): open a merchant's account before its payments
    settle, list every account's posted totals, check that total debits equal total
    credits (and each payment's movements against the ledger), and give finance
    statements, transfer lists, exports and audited correcting entries."""
    parser = sub.add_parser(
        "ledger",
        help="Open accounts, list balances, check that debits equal credits.",
        parents=[common],
        **help_texts(
            about,
            (
                "gateway ledger open-account m_1 --currency USD --config gateway.toml",
                "gateway ledger balances --config gateway.toml --json",
                "gateway ledger check --config gateway.toml",
            ),
        ),
    )
    parser.set_defaults(func=cmd_ledger)
    # These three set no `func`: the family's `cmd_ledger` branches on `ledger_command`
    # (finance's commands set their own).
    family = operator_family(parser, "ledger_command")
    open_account = family.add(
        "open-account",
        None,
        "Open a merchant's account (idempotent).",
        """Open the ledger account a merchant's settlements are credited to, in one
        currency, and print its id. Opening it again is harmless. Payments for a
        merchant without an account are parked in the dead-letter table
        (UNKNOWN_MERCHANT): open the account, then replay them.""",
        ("gateway ledger open-account m_1 --currency EUR --config gateway.toml",),
    )
    open_account.add_argument("merchant_id", metavar="MERCHANT_ID")
    open_account.add_argument("--currency", help="ISO 4217 code (default: settlement.currency)")
    balances = family.add(
        "balances",
        None,
        "Every account's posted debits, credits and balance, by owner.",
        """List every ledger account with its kind (merchant or clearing), its owner
        (the merchant id, or the provider for a clearing account), its currency and
        its posted debits, credits and balance in minor units.""",
        (
            "gateway ledger balances --merchant m_1 --config gateway.toml",
            "gateway ledger balances --currency EUR --json",
        ),
    )
    balances.add_argument("--merchant", metavar="M", help="only merchant M's accounts")
    balances.add_argument("--currency", metavar="C", help="only accounts in currency C")
    check = family.add(
        "check",
        None,
        "Verify total debits equal total credits (exit 1 if not, 3 if no verdict).",
        """Sum every posted debit and credit in the ledger; exit 0 when they are
        equal, 1 (with the difference on stderr) when they are not, which is a
        critical fault, and 3 when there is no verdict: the ledger or the database
        did not answer or refused the read, or the ledger could not be read as one
        state (with --json, "balanced" is then null). Suitable for a monitoring cron
        job: the sums are of one moment, also while money moves (TigerBeetle's accounts are
        read in pages of 8,000, twice in a row until two reads agree; if transfers
        keep landing through six such pairs, about 3 s, it exits 3, unless two reads
        in a row already show an imbalance no moving ledger could: a sum of the
        earlier read above one of the later, which exits 1). With --payments, compare
        every recorded movement with its transfer in the ledger instead, and name
        each payment where they differ (exit 1; 3, and "differing" null, when there
        is no verdict).""",
        (
            "gateway ledger check --config gateway.toml --json",
            "gateway ledger check --payments --config gateway.toml",
        ),
    )
    check.add_argument(
        "--payments", action="store_true", help="check each payment's movements, not the totals"
    )
    add_finance_commands(family.sub, family.common)
