"""`[database]`: what the gateway asks of PostgreSQL beyond its address (`url`, kept at
the top of `Settings` as `database_url`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DatabaseSettings:
    """The PostgreSQL database: its address, and the durability the gateway requires."""

    #: Refuse to start (exit 2, one line naming this key) unless the database's commits
    #: wait for a synchronous standby that is streaming: `synchronous_commit` `on`,
    #: `remote_write` or `remote_apply`, and `synchronous_standby_names` met. Off, the
    #: gateway starts either way and logs one warning when a failover could lose
    #: acknowledged events. Either way `serve`, `relay` and `settle` read the database's
    #: durability every 30 s into `/readyz` and `gateway_database_durability`, and a
    #: process already running keeps taking events when it changes (after a failover to
    #: a primary without a standby, say): the setting decides only whether it starts. A
    #: database that cannot be reached at start-up does not stop it; it is read when it
    #: answers. Reading the standbys needs `pg_monitor` (or `pg_read_all_stats`) granted
    #: to the gateway's role.
    require_synchronous_standby: bool = False
