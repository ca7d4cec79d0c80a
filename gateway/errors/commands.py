"""Operator commands: flags that cannot be used and ids that name no row."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.errors.base import GatewayError
from gateway.errors.codes import ErrorClass


class UsageError(GatewayError):
    """An operator command's flags or values cannot be used (the command exits 2)."""

    error_class = ErrorClass.USAGE


class DlqUsageError(UsageError):
    """An operator's flags or values cannot be used; the message says which and why."""

    error_class = ErrorClass.DLQ_USAGE


class OrderingUsageError(UsageError):
    """`gateway ordering` flags or values that cannot be used; the message says why."""

    error_class = ErrorClass.ORDERING_USAGE


class ForwardUsageError(UsageError):
    """`gateway forward` or `gateway listen` flags that cannot be used; the message says why."""

    error_class = ErrorClass.FORWARD_USAGE


class EventsUsageError(UsageError):
    """`gateway events` flags that cannot be used; the message says which and why."""

    error_class = ErrorClass.EVENTS_USAGE


class BackfillUsageError(UsageError):
    """A backfill's flags or the provider's API settings cannot be used (exit 2)."""

    error_class = ErrorClass.BACKFILL_USAGE


class RowNotFound(GatewayError):
    """An id an operator named has no row (the command exits 1)."""

    error_class = ErrorClass.ROW_NOT_FOUND


#: The most ids an error message names; a replay may name 100,000 that do not exist.
LISTED_IDS_MAX = 20


def listed_ids(ids: Sequence[int]) -> str:
    """`ids` for a one-line message: the first `LISTED_IDS_MAX`, then how many more."""
    shown = ", ".join(str(i) for i in ids[:LISTED_IDS_MAX])
    more = len(ids) - LISTED_IDS_MAX
    return f"{shown} and {more} more" if more > 0 else shown


class DlqRowNotFound(RowNotFound):
    """An id the operator named has no dead-letter row."""

    error_class = ErrorClass.DLQ_ROW_NOT_FOUND

    def __init__(self, ids: Sequence[int]) -> None:
        super().__init__(f"no dead-letter row with id {listed_ids(ids)}")
        self.ids = tuple(ids)


class OrderKeyNotFound(RowNotFound):
    """The (provider, key) the operator named has no ordering state."""

    error_class = ErrorClass.ORDER_KEY_NOT_FOUND


class EventRowNotFound(RowNotFound):
    """An id the operator named has no `processed_webhooks` row."""

    error_class = ErrorClass.EVENT_ROW_NOT_FOUND
