"""What PostgreSQL says about the durability of the gateway's commits: its session's
`synchronous_commit`, `synchronous_standby_names` and the walsenders in
`pg_stat_replication` (physical standbys and logical subscribers), read over one pooled
connection and decided by `gateway.core.health.durability`."""

from __future__ import annotations

from gateway.adapters.postgres import Pool, connection
from gateway.core.health.durability import Durability, StandbyRow, decide

# `current_setting` is `SHOW` as a value: the session's own `synchronous_commit` (a role
# or database default, `ALTER ROLE ... SET synchronous_commit = off`, counts), and the
# server's `synchronous_standby_names` as written in its configuration.
_SETTINGS = (
    "SELECT current_setting('synchronous_commit') AS synchronous_commit,"
    " current_setting('synchronous_standby_names') AS standby_names,"
    " current_user AS role"
)
# Every walsender, marked logical or not: a logical one (a replication subscriber) is
# attached to a database, a physical one (a standby, pg_basebackup, pg_receivewal) is
# not, and `datid` says which to any role. `backend_type` cannot tell them apart
# (`walsender` for both) and, like `state` and `sync_state` here, reads NULL without
# pg_read_all_stats (decided as unknown). A synchronous pg_receivewal counts as a
# standby; a physical stream started over a database connection counts as logical,
# which can only understate the standbys. One statement reads one snapshot of the
# backends, so the join drops no walsender.
_STANDBYS = (
    "SELECT r.application_name, r.state, r.sync_state, a.datid IS NOT NULL AS logical"
    " FROM pg_stat_replication r JOIN pg_stat_activity a USING (pid)"
)


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
        [
            StandbyRow(r["application_name"], r["state"], r["sync_state"], r["logical"])
            for r in rows
        ],
        role=settings["role"],
    )
