"""`gateway ledger`: open merchant accounts, list balances, check double entry."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

import orjson

from gateway import settings as settings_mod
from gateway.adapters.postgres import open_pool
from gateway.compose import open_ledger
from gateway.core.ledger import verify_totals
from gateway.core.money import check_currency
from gateway.core.settlement import merchant_account, merchant_account_id
from gateway.errors import ConfigError, LedgerImbalance

log = logging.getLogger("gateway.ledger")


async def _open_account(settings: settings_mod.Settings, merchant_id: str, currency: str) -> int:
    async with (
        open_pool(settings.database_url, max_size=2) as pool,
        open_ledger(settings, pool) as ledger,
    ):
        await ledger.ensure_accounts([merchant_account(merchant_id, currency)])
    return merchant_account_id(merchant_id, currency)


async def _balances(settings: settings_mod.Settings) -> list[dict[str, Any]]:
    async with (
        open_pool(settings.database_url, max_size=2) as pool,
        open_ledger(settings, pool) as ledger,
    ):
        balances = await ledger.balances()
    return [
        {
            "account_id": f"{b.account_id:#034x}",
            "debits_posted": b.debits_posted,
            "credits_posted": b.credits_posted,
            "balance": b.credit_balance_minor,
        }
        for b in balances
    ]


async def _check(settings: settings_mod.Settings) -> tuple[int, int]:
    async with (
        open_pool(settings.database_url, max_size=2) as pool,
        open_ledger(settings, pool) as ledger,
    ):
        totals = await ledger.check()
    try:
        verify_totals(totals)
    except LedgerImbalance:
        log.critical(
            "ledger imbalance",
            extra={"debits": totals.debits_posted, "credits": totals.credits_posted},
        )
        raise
    return totals.debits_posted, totals.credits_posted


def cmd_ledger(args: argparse.Namespace) -> int:
    settings = settings_mod.load(args.config)
    if args.ledger_command == "open-account":
        try:
            currency = check_currency(args.currency or settings.settlement.currency)
        except ValueError as exc:
            raise ConfigError("--currency", str(exc)) from None
        account = asyncio.run(_open_account(settings, args.merchant_id, currency))
        print(f"account {account:#034x} open for merchant {args.merchant_id} ({currency})")
        return 0
    if args.ledger_command == "balances":
        rows = asyncio.run(_balances(settings))
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
        debits, credits = asyncio.run(_check(settings))
    except LedgerImbalance as exc:
        print(f"ledger check FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"ledger balanced: debits {debits} = credits {credits}")
    return 0


def add_cli(sub: Any) -> None:
    """`gateway ledger open-account|balances|check`."""
    parser = sub.add_parser(
        "ledger",
        help="Ledger accounts, balances and the balance check.",
        description="Ledger accounts, balances and the balance check.",
    )
    parser.add_argument("--config", help="TOML config file (default: $GATEWAY_CONFIG)")
    parser.set_defaults(func=cmd_ledger)
    commands = parser.add_subparsers(dest="ledger_command", required=True, metavar="COMMAND")
    open_account = commands.add_parser("open-account", help="Open a merchant's account.")
    open_account.add_argument("merchant_id")
    open_account.add_argument("--currency", help="default: settlement.currency")
    balances = commands.add_parser("balances", help="Every account's posted totals.")
    balances.add_argument("--json", action="store_true", help="machine-readable output")
    commands.add_parser("check", help="Verify total debits equal total credits (exit 1 if not).")
