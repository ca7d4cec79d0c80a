"""What PostgreSQL says about the durability of the gateway's commits: its session's
`synchronous_commit`, `synchronous_standby_names` and the standbys in
`pg_stat_replication`, read over one pooled connection and decided by
`gateway.core.durability`."""

from __future__ import annotations

from gateway.adapters.postgres import Pool, connection
from gateway.core.durability import Durability, StandbyRow, decide

# `current_setting` is `SHOW` as a value: the session's own `synchronous_commit` (a role
# or database default, `ALTER ROLE ... SET synchronous_commit = off`, counts), and the
# server's `synchronous_standby_names` as written in its configuration.
_SETTINGS = (
    "SELECT current_setting('synchronous_commit') AS synchronous_commit,"
    " current_setting('synchronous_standby_names') AS standby_names,"
    " current_user AS role"
)
# Without pg_read_all_stats every column but pid reads NULL here: decided as unknown.
_STANDBYS = "SELECT application_name, state, sync_state FROM pg_stat_replication"


async def read_durability(pool: Pool) -> Durability:
    """One reading; `DatabaseUnavailable` (or `DatabaseError`) when it cannot be made."""
    async with connection(pool) as conn:  # translates failures to connect and to run
        settings = await conn.fetchrow(_SETTINGS)
        rows = await conn.fetch(_STANDBYS)
    if settings is None:  # a SELECT without FROM always returns its one row
        raise LookupError("the settings query returned no row")
    return decide(
        settings["synchronous_commit"],
        settings["standby_names"],
        [StandbyRow(r["application_name"], r["state"], r["sync_state"]) for r in rows],
        role=settings["role"],
    )
