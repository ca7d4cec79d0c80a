"""What an operator types into the console's ledger pages, read and checked: the
statement's, the transfer list's and the balances list's filters, and the checks of
single fields that the adjustment form shares (`core.finance.adjustment_form`).

Pure: `now` is passed in. Every problem is a `FinanceUsageError` whose message is the
one line the page, or the API's problem, shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from gateway.core.bodies.content import has_control_chars
from gateway.core.finance.statements import PAGE_ROWS, Filters
from gateway.core.finance.view import (
    BALANCES_PER_PAGE,
    STATEMENT_LINES_PER_PAGE,
    BalancesAsk,
    decode_balance_cursor,
)
from gateway.core.keyset import BadCursor, decode_cursor
from gateway.core.money import check_currency
from gateway.core.operator_input import parse_instant
from gateway.core.settlement.instructions import SettlementKind
from gateway.errors import UsageError

#: Movements per page of the transfer list unless `limit` says otherwise, and the most
#: it may say: one keyset page of `gateway ledger transfers`.
TRANSFERS_PER_PAGE = 100
TRANSFERS_PER_PAGE_MAX = PAGE_ROWS
#: The longest merchant id, payment id or adjustment id taken (ids are short; a longer
#: one is a paste gone wrong, and it would be kept in the audit trail for ever).
NAME_MAX_CHARS = 200
#: The longest reason or note taken.
TEXT_MAX_CHARS = 2000


class FinanceUsageError(UsageError):
    """A ledger page's filter, or an adjustment, that cannot be used as given."""


def shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


def name_field(value: str | None, what: str) -> str | None:
    """An id as typed (spaces around dropped), None if blank: one printable line, at
    most `NAME_MAX_CHARS`."""
    text = (value or "").strip()
    if text and (len(text) > NAME_MAX_CHARS or has_control_chars(text)):
        raise FinanceUsageError(
            f"{what}: {shown(text)} is not an id (one line, at most {NAME_MAX_CHARS} characters)"
        )
    return text or None


def required_field(value: str | None, what: str) -> str:
    text = name_field(value, what)
    if text is None:
        raise FinanceUsageError(f"{what}: required")
    return text


def text_field(value: str | None, what: str) -> str | None:
    """A reason or note as typed, None if blank: lines of printable text, at most
    `TEXT_MAX_CHARS`."""
    text = (value or "").strip()
    if not text:
        return None
    if len(text) > TEXT_MAX_CHARS:
        raise FinanceUsageError(f"{what}: at most {TEXT_MAX_CHARS} characters")
    if has_control_chars(text.replace("\r\n", " ").replace("\n", " ").replace("\t", " ")):
        raise FinanceUsageError(f"{what}: must not hold control characters")
    return text


def currency_field(value: str | None, what: str = "currency") -> str:
    text = (value or "").strip()
    try:
        return check_currency(text)
    except ValueError:
        raise FinanceUsageError(f"{what}: {shown(text)} is not a currency code (USD)") from None


def _instant(value: str | None, now: datetime, what: str) -> datetime | None:
    text = (value or "").strip()
    try:
        return parse_instant(text, now, what) if text else None
    except UsageError as exc:  # the shared parser's message, under this module's class
        raise FinanceUsageError(str(exc)) from None


def _window(q: Mapping[str, str], now: datetime) -> tuple[datetime | None, datetime | None]:
    since, until = _instant(q.get("since"), now, "since"), _instant(q.get("until"), now, "until")
    if since is not None and until is not None and since >= until:
        raise FinanceUsageError("since must be before until")
    return since, until


def _after(q: Mapping[str, str]) -> int:
    """The row id a `cursor` carries (0: the first page)."""
    text = (q.get("cursor") or "").strip()
    try:
        return decode_cursor(text).id if text else 0
    except BadCursor as exc:
        raise FinanceUsageError(str(exc)) from None


def _limit(q: Mapping[str, str], default: int, most: int) -> int:
    text = (q.get("limit") or "").strip()
    if not text:
        return default
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= most):
        raise FinanceUsageError(f"limit: give a whole number from 1 to {most:,}")
    return int(text)


@dataclass(frozen=True)
class StatementAsk:
    """A statement: whose, in which ledger currency, over which window, and the page:
    where it starts after and how many lines."""

    merchant_id: str
    currency: str
    since: datetime | None
    until: datetime | None
    after_id: int = 0
    limit: int = STATEMENT_LINES_PER_PAGE


def parse_statement_query(
    q: Mapping[str, str], now: datetime, default_currency: str
) -> StatementAsk | None:
    """The statement the form asks for; None while no merchant is given."""
    merchant = name_field(q.get("merchant"), "merchant")
    currency = currency_field(q.get("currency") or default_currency)
    since, until = _window(q, now)
    after, limit = _after(q), _limit(q, STATEMENT_LINES_PER_PAGE, PAGE_ROWS)
    if merchant is None:
        return None
    return StatementAsk(merchant, currency, since, until, after, limit)


@dataclass(frozen=True)
class TransfersAsk:
    """A page of the transfer list: its filters, where it starts after, how long."""

    filters: Filters
    after_id: int = 0
    limit: int = TRANSFERS_PER_PAGE


def parse_transfers_query(q: Mapping[str, str], now: datetime) -> TransfersAsk:
    """`gateway ledger transfers`'s filters (merchant, payment, kind, ledger currency,
    since, until) and the page asked for."""
    kind_text = (q.get("kind") or "").strip()
    kinds = [k.value for k in SettlementKind]
    if kind_text and kind_text not in kinds:
        raise FinanceUsageError(f"kind: {shown(kind_text)} is not one of {', '.join(kinds)}")
    currency = (q.get("currency") or "").strip()
    since, until = _window(q, now)
    filters = Filters(
        merchant_id=name_field(q.get("merchant"), "merchant"),
        ledger_currency=currency_field(currency) if currency else None,
        payment_id=name_field(q.get("payment"), "payment"),
        kind=SettlementKind(kind_text) if kind_text else None,
        since=since,
        until=until,
    )
    return TransfersAsk(filters, _after(q), _limit(q, TRANSFERS_PER_PAGE, TRANSFERS_PER_PAGE_MAX))


def _flag(value: str | None, what: str) -> bool:
    """A yes-or-no filter: a checkbox's `1` (`true`, `on`), or `0`, `false`, nothing."""
    text = (value or "").strip().lower()
    if text in ("1", "true", "on", "yes"):
        return True
    if text in ("", "0", "false", "off", "no"):
        return False
    raise FinanceUsageError(f"{what}: give true or false")


def parse_balances_query(q: Mapping[str, str]) -> BalancesAsk:
    """The balances list's filters: a merchant, a currency, only those below zero."""
    currency = (q.get("currency") or "").strip()
    cursor = (q.get("cursor") or "").strip()
    try:
        after = decode_balance_cursor(cursor) if cursor else None
    except BadCursor as exc:
        raise FinanceUsageError(str(exc)) from None
    return BalancesAsk(
        merchant_id=name_field(q.get("merchant"), "merchant"),
        currency=currency_field(currency) if currency else None,
        negative_only=_flag(q.get("negative"), "negative"),
        after=after,
        limit=_limit(q, BALANCES_PER_PAGE, TRANSFERS_PER_PAGE_MAX),
    )
