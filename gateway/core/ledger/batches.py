"""A ledger backend's answers put back in the caller's order.

A backend takes at most so many events per request (TigerBeetle: one message). A caller
may hand over more; it is sent in consecutive chunks, each one request, and the
answers are joined in the order of the input. Two shapes of answer:

- one result per event, in order (TigerBeetle's `create_accounts` and `create_transfers`
  since 0.17): checked for its length, since a result cannot be matched to its event any
  other way;
- only what was found (`lookup_accounts`, `lookup_transfers`): matched back to the asked
  ids by the id each record carries, None where nothing was found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from gateway.errors import LedgerRejected

T = TypeVar("T")


def one_per_event(what: str, sent: int, results: Sequence[T]) -> list[T]:
    """`results` as a list when it holds exactly one result per event sent.

    Anything else means a backend with other semantics (before 0.17 TigerBeetle answered
    only for failed events), and guessing which result belongs to which event is unsafe.
    """
    if len(results) != sent:
        raise LedgerRejected(f"{what}: {len(results)} results for {sent} events")
    return list(results)


def align_found(
    what: str, ids: Sequence[int], found: Iterable[T], key: Callable[[T], int]
) -> list[T | None]:
    """For each of `ids`, the found record whose `key` is that id, or None.

    A record for an id that was not asked for is a backend answering something else,
    refused rather than dropped.
    """
    by_id = {key(record): record for record in found}
    asked = set(ids)
    stray = [i for i in by_id if i not in asked]
    if stray:
        raise LedgerRejected(f"{what}: {len(stray)} records for ids not asked for")
    return [by_id.get(i) for i in ids]
