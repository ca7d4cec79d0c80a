"""`gateway ledger open-account|balances|check`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import orjson

from gateway.cli.common import SubParsers, load_settings
from gateway.core.money import check_currency
from gateway.errors import ConfigError, LedgerImbalance
from gateway.settings import Settings

if TYPE_CHECKING:
    from gateway.core.ledger import Ledger
    from gateway.core.ledger_accounts import AccountNames, AccountView

T = TypeVar("T")


def _with_ledger(
    settings: Settings, operation: Callable[[Ledger, AccountNames], Awaitable[T]]
) -> T:
    # Imported here: `gateway serve` parses the same CLI and must not load the ledger side.
    from gateway.compose import ops

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
    print(
        f"{'account':<36} {'kind':<8} {'owner':<20} {'currency':<8} "
        f"{'debits':>14} {'credits':>14} {'balance':>14}"
    )
    for v in views:
        owner = v.owner if v.owner is not None else "(unnamed)"
        print(
            f"{v.account_id:#034x}   {v.kind:<8} {owner:<20} {v.currency or '?':<8} "
            f"{v.debits_posted:>14} {v.credits_posted:>14} {v.balance:>14}"
        )


def cmd_ledger(args: argparse.Namespace) -> int:
    from gateway.settlement import ledger_ops

    settings = load_settings(args)
    if args.ledger_command == "open-account":
        currency = _currency_flag(args.currency or settings.settlement.currency)
        merchant = args.merchant_id
        account = _with_ledger(
            settings, lambda led, names: ledger_ops.open_account(led, names, merchant, currency)
        )
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
            rows = [v.as_dict() for v in views]
            sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            _print_table(views)
        return 0
    try:
        debits, credits = _with_ledger(settings, lambda led, _names: ledger_ops.check(led))
    except LedgerImbalance as exc:
        print(f"ledger check FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"ledger balanced: debits {debits} = credits {credits}")
    return 0


def add_commands(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `gateway ledger ...`."""
    text = "Ledger accounts, balances and the balance check."
    parser = sub.add_parser("ledger", help=text, description=text, parents=[common])
    parser.set_defaults(func=cmd_ledger)
    commands = parser.add_subparsers(dest="ledger_command", required=True, metavar="COMMAND")
    open_account = commands.add_parser(
        "open-account", help="Open a merchant's account.", parents=[common]
    )
    open_account.add_argument("merchant_id")
    open_account.add_argument("--currency", help="default: settlement.currency")
    text = (
        "Every account's posted debits, credits and balance, with its kind (merchant or "
        "clearing), owner (merchant id, or the clearing account's source) and currency. "
        "Example: gateway ledger balances --merchant m_1"
    )
    balances = commands.add_parser("balances", help=text, description=text, parents=[common])
    balances.add_argument("--merchant", metavar="M", help="only merchant M's accounts")
    balances.add_argument("--currency", metavar="C", help="only accounts in currency C")
    balances.add_argument("--json", action="store_true", help="machine-readable output")
    commands.add_parser(
        "check", help="Verify total debits equal total credits (exit 1 if not).", parents=[common]
    )
