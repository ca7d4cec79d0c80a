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

T = TypeVar("T")


def _with_ledger(settings: Settings, operation: Callable[[Ledger], Awaitable[T]]) -> T:
    # Imported here: `gateway serve` parses the same CLI and must not load the ledger side.
    from gateway.compose import ops

    async def run() -> T:
        async with ops.ledger(settings) as ledger:
            return await operation(ledger)

    return asyncio.run(run())


def cmd_ledger(args: argparse.Namespace) -> int:
    from gateway.settlement import ledger_ops

    settings = load_settings(args)
    if args.ledger_command == "open-account":
        try:
            currency = check_currency(args.currency or settings.settlement.currency)
        except ValueError as exc:
            raise ConfigError("--currency", str(exc)) from None
        merchant = args.merchant_id
        account = _with_ledger(
            settings, lambda led: ledger_ops.open_account(led, merchant, currency)
        )
        print(f"account {account:#034x} open for merchant {merchant} ({currency})")
        return 0
    if args.ledger_command == "balances":
        rows = _with_ledger(settings, ledger_ops.balances)
        if args.json:
            sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            print(f"{'account':<36} {'debits':>14} {'credits':>14} {'balance':>14}")
            for r in rows:
                print(
                    f"{r['account_id']:<36} {r['debits_posted']:>14} "
                    f"{r['credits_posted']:>14} {r['balance']:>14}"
                )
        return 0
    try:
        debits, credits = _with_ledger(settings, ledger_ops.check)
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
    balances = commands.add_parser(
        "balances", help="Every account's posted totals.", parents=[common]
    )
    balances.add_argument("--json", action="store_true", help="machine-readable output")
    commands.add_parser(
        "check", help="Verify total debits equal total credits (exit 1 if not).", parents=[common]
    )
