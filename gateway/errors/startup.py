"""Configuration and installation: the process does not start, or stops, and says why."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.errors.base import GatewayError
from gateway.errors.codes import ErrorClass


class ConfigError(GatewayError):
    """A setting is missing or invalid; the message names the key."""

    error_class = ErrorClass.CONFIG_ERROR

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"config error: {key}: {problem}")
        self.key = key
        self.problem = problem


class StreamMismatch(ConfigError):
    """The stream on the NATS server is not the one configured (subjects, retention,
    storage, duplicate window, replicas); only `gateway migrate` changes it."""

    error_class = ErrorClass.STREAM_MISMATCH

    def __init__(self, stream: str, differences: Sequence[object]) -> None:
        super().__init__(
            "nats.stream",
            f"stream {stream} exists on the NATS server with another configuration: "
            f"{'; '.join(map(str, differences))}; run 'gateway migrate' to update it, or "
            "name another stream",
        )
        self.differences = tuple(differences)


class StreamUpdateRefused(GatewayError):
    """The NATS server refused `gateway migrate`'s update of the stream (some fields,
    such as the storage type, are fixed once a stream exists)."""

    error_class = ErrorClass.STREAM_UPDATE_REFUSED


class MigrationsMissing(GatewayError):
    """No migration files were found: the installation is incomplete (nothing applied)."""

    error_class = ErrorClass.MIGRATIONS_MISSING


class OutboxCursorAhead(GatewayError):
    """The outbox cursor names transactions this database has not reached: it was
    restored into another cluster. The relay stops rather than skip rows (docs/operations.md,
    "Restoring a dump into another cluster")."""

    error_class = ErrorClass.OUTBOX_CURSOR_AHEAD


class DatabaseNotDurable(ConfigError):
    """`[database] require_synchronous_standby` is set, and the database's commits are not
    known to wait for a synchronous standby: a failover could lose acknowledged events."""

    error_class = ErrorClass.DATABASE_NOT_DURABLE

    def __init__(self, state: str, reason: str) -> None:
        super().__init__(
            "database.require_synchronous_standby",
            f"is true, but the database's durability is {state}: {reason}",
        )
        self.state = state
        self.reason = reason
