"""The `ledger_account_names` table: whose each ledger account is, for either backend."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import asyncpg

from gateway.adapters.postgres import Pool, connection
from gateway.core.ledger.accounts import AccountName
from gateway.core.ledger.port import AccountCode
from gateway.errors import DatabaseError

log = logging.getLogger(__name__)

_RECORD = """
    INSERT INTO ledger_account_names (id, kind, owner, currency)
    SELECT * FROM unnest($1::text[]::numeric[], $2::text[], $3::text[], $4::text[])
    ON CONFLICT (id) DO NOTHING"""
_LOOKUP = """
    SELECT id::text AS id, kind, owner, currency FROM ledger_account_names
    WHERE id = ANY($1::text[]::numeric[])"""
#: Ids per look-up: a whole TigerBeetle cluster's accounts would make one huge array.
_LOOKUP_BATCH = 5000
#: undefined_table: the database predates migration 006.
_UNDEFINED_TABLE = "42P01"


class PostgresAccountNames:
    """The `AccountNames` directory in PostgreSQL (the gateway's own database)."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def record(self, names: Sequence[AccountName]) -> None:
        """Remember `names`; a name already recorded is left as it is."""
        if not names:
            return
        # Sorted, so two processes recording overlapping sets never deadlock.
        rows = sorted(
            {(str(n.account_id), n.kind.name.lower(), n.owner, n.currency) for n in names}
        )
        async with connection(self._pool) as conn:  # translates the database's errors
            await conn.execute(_RECORD, *map(list, zip(*rows, strict=True)))

    async def lookup(self, account_ids: Sequence[int]) -> dict[int, AccountName]:
        """The recorded names of those of `account_ids` that have one.

        A database without the table (not migrated since the names arrived) has no
        names: every account shows unnamed, with a warning, rather than no balances.
        """
        found: dict[int, AccountName] = {}
        for start in range(0, len(account_ids), _LOOKUP_BATCH):
            ids = [str(i) for i in account_ids[start : start + _LOOKUP_BATCH]]
            try:
                async with connection(self._pool) as conn:
                    rows = await conn.fetch(_LOOKUP, ids)
            except DatabaseError as exc:
                if exc.sqlstate != _UNDEFINED_TABLE:
                    raise
                log.warning("ledger_account_names is missing: run `gateway migrate` for names")
                return {}
            found.update((int(r["id"]), _name(r)) for r in rows)
        return found


def _name(row: asyncpg.Record) -> AccountName:
    return AccountName(AccountCode[str(row["kind"]).upper()], row["owner"], row["currency"])
