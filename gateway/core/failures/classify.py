"""Error classification: transient (retry later) or permanent (dead-letter now).

Decided by type or by code, never by message text, because messages change between
versions and are localised.
"""

from __future__ import annotations

from gateway.errors import GatewayError, PermanentError, TransientError

# SQLSTATE classes and codes after which the same statement may succeed later.
_TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "53", "58"})  # connection, resources, system
_TRANSIENT_SQLSTATES = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available
        "57014",  # query_canceled (statement timeout)
        "57P01",  # admin_shutdown
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now (starting up, recovering)
        "57P05",  # idle_session_timeout
        "25006",  # read_only_sql_transaction (a failover left us on a replica)
    }
)


def sqlstate_is_transient(sqlstate: str | None) -> bool:
    """True if a PostgreSQL error with this SQLSTATE is worth retrying."""
    if not sqlstate:
        return False
    return sqlstate in _TRANSIENT_SQLSTATES or sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES


def sqlstate_is_bad_content(sqlstate: str | None) -> bool:
    """True if PostgreSQL refused a value it was given (class 22, data exception: a NUL
    in text is 22P05, `\\u0000` in jsonb 22P05, a bad encoding 22021), not the statement."""
    return sqlstate is not None and sqlstate[:2] == "22"


def is_transient(exc: BaseException) -> bool:
    """True if the failure may go away by itself; unexpected errors count as transient.

    The error policy retries unexpected exceptions like transient ones (counting toward
    the same limit), so only an explicit `PermanentError` skips the retries.
    """
    if isinstance(exc, PermanentError):
        return False
    if isinstance(exc, TransientError):
        return True
    return not isinstance(exc, GatewayError)
