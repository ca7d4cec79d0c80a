"""The settlement benchmark's ledger: which backend a run settles into (`--ledger`), the
`[ledger]` section it writes for the worker, the refusal when TigerBeetle is not there,
and what the checks read back through the gateway's `Ledger` port.

TigerBeetle cannot be installed on every machine: with `--ledger tigerbeetle`, the
cluster is the one `TIGERBEETLE_ADDRESS` names (`TIGERBEETLE_CLUSTER_ID`, default 0), as
in the contract tests, and a run without one stops before anything starts. The cluster
outlives the run, so that run's payment and merchant ids carry a tag of their own.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.settlement_backlog import ExpectedTransfer
from gateway.adapters.postgres import open_pool
from gateway.adapters.tigerbeetle import open_tigerbeetle
from gateway.core.ledger.ids import merchant_account_id
from gateway.errors import ConfigError, LedgerUnavailable
from gateway.settings import Settings
from gateway.wiring.settlement import open_ledger

LEDGERS = ("postgres", "tigerbeetle")
LEDGER_NAMES = {"postgres": "PostgreSQL", "tigerbeetle": "TigerBeetle"}
#: How long the cluster has to answer one look-up before the run is refused.
PROBE_TIMEOUT_S = 5.0


class LedgerNotHere(RuntimeError):
    """`--ledger tigerbeetle` without a reachable cluster: the run cannot start."""


def tigerbeetle_target() -> tuple[int, str]:
    """(cluster id, addresses) from the environment; `LedgerNotHere` without an address."""
    address = os.environ.get("TIGERBEETLE_ADDRESS", "").strip()
    if not address:
        raise LedgerNotHere("TIGERBEETLE_ADDRESS not set: no TigerBeetle server here")
    return int(os.environ.get("TIGERBEETLE_CLUSTER_ID", "0")), address


def require_tigerbeetle() -> tuple[int, str]:
    """The cluster to settle into, once it has answered a look-up within `PROBE_TIMEOUT_S`."""
    cluster_id, address = tigerbeetle_target()
    # The client and the adapter warn about a cluster that is not there; the refusal
    # says it in one line instead.
    quiet = [logging.getLogger(n) for n in ("tigerbeetle", "gateway.adapters.tigerbeetle")]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.CRITICAL)
    try:
        asyncio.run(_probe(cluster_id, address))
    finally:
        for logger, level in zip(quiet, levels, strict=True):
            logger.setLevel(level)
    return cluster_id, address


async def _probe(cluster_id: int, address: str) -> None:
    try:
        async with open_tigerbeetle(cluster_id, address, timeout_s=PROBE_TIMEOUT_S) as ledger:
            await ledger.balance(1)
    except ConfigError as exc:
        raise LedgerNotHere(f"TIGERBEETLE_ADDRESS={address!r} refused by the client") from exc
    except LedgerUnavailable as exc:
        raise LedgerNotHere(
            f"TigerBeetle cluster {cluster_id} at TIGERBEETLE_ADDRESS={address} did not answer "
            f"within {PROBE_TIMEOUT_S:g} s"
        ) from exc


def ledger_section(ledger: str, target: tuple[int, str] | None) -> dict[str, Any]:
    """The `[ledger]` section of the worker's config for `--ledger`."""
    if ledger == "postgres":
        return {"backend": "postgres"}
    if target is None:
        raise ValueError("the tigerbeetle ledger needs its cluster (require_tigerbeetle)")
    cluster_id, address = target
    return {"backend": "tigerbeetle", "cluster_id": cluster_id, "addresses": address.split(",")}


@dataclass(frozen=True)
class LedgerFacts:
    """What the ledger holds for one run's payments, read through the `Ledger` port."""

    balanced: bool
    debits_posted: int
    credits_posted: int
    merchants_total: int
    #: Events whose transfer was found with the computed accounts and amount.
    transfers_as_computed: int
    transfers_missing: int


async def ledger_facts(
    settings: Settings, merchants: Sequence[str], expected: Sequence[ExpectedTransfer]
) -> LedgerFacts:
    """Totals, the run's merchant balances and its transfers, from the configured ledger."""
    currency = settings.settlement.currency
    async with (
        open_pool(settings.database_url, max_size=2) as pool,
        open_ledger(settings, pool) as ledger,
    ):
        totals = await ledger.check()
        merchants_total = 0
        for merchant in merchants:
            balance = await ledger.balance(merchant_account_id(merchant, currency))
            merchants_total += balance.credit_balance_minor if balance else 0
        found = await ledger.lookup_transfers([e.id for e in expected])
        missing = sum(f is None for f in found)
        as_computed = sum(
            f is not None
            and (f.debit_account_id, f.credit_account_id, f.amount_minor)
            == (e.debit_account_id, e.credit_account_id, e.amount_minor)
            for e, f in zip(expected, found, strict=True)
        )
    return LedgerFacts(
        balanced=totals.balanced,
        debits_posted=totals.debits_posted,
        credits_posted=totals.credits_posted,
        merchants_total=merchants_total,
        transfers_as_computed=as_computed,
        transfers_missing=missing,
    )
