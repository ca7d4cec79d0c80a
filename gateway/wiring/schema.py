"""The database's tables and the stream, as the commands set them up.

`gateway migrate` is the one command that changes either; `gateway serve` looks at the
stream before it starts anything (creating it when missing). Each call opens and closes
its own short connection here, so the CLI never touches a driver.
"""

from __future__ import annotations

from gateway.adapters.jetstream import stream
from gateway.adapters.jetstream.stream import StreamChange
from gateway.adapters.postgres import migrate
from gateway.settings import Settings


async def migrate_database(settings: Settings) -> list[str]:
    """Apply the migrations not yet applied; the names applied, in order."""
    return await migrate(settings.database_url)


async def migrate_stream(settings: Settings) -> StreamChange:
    """Create the stream, or change it to the configured one; what was done."""
    return await stream.migrate(settings.nats)


async def check_stream(settings: Settings) -> None:
    """Create the stream if it is missing; `StreamMismatch` naming the differences if it
    differs (a NATS that does not answer is left to the serving process)."""
    await stream.check(settings.nats)
