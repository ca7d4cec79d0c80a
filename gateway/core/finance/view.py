"""What the console's ledger pages show and how they page: merchants' balances (the
ones below zero marked and counted), a statement cut into pages, and money and rates
written as a person reads them.

Pure. Balances come from the configured ledger (`Ledger.balances`, named by the account
directory: `core.ledger.accounts`); statements and transfer lists from the recorded
movements (`core.finance.statements`), as `gateway ledger statement|transfers` read them. A
statement page's balances are worked out from the start of its window on every request,
never carried in the link, so no link can show a balance the books do not hold.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol

import orjson

from gateway.core.finance.statements import Adjustment, Line
from gateway.core.keyset import CURSOR_MAX_CHARS, BadCursor
from gateway.core.ledger.accounts import AccountView
from gateway.core.money import format_minor

#: Merchant accounts per page of the balances list (the ledger is read whole: the settle
#: process reads it every minute too, about a millisecond per thousand accounts).
BALANCES_PER_PAGE = 100
#: Statement lines per page.
STATEMENT_LINES_PER_PAGE = 100


class Books(Protocol):
    """What only the configured ledger can answer or do, for the console (the
    composition root gives it: `gateway.wiring.console.LedgerBooks`)."""

    async def merchant_balances(self) -> list[AccountView]:
        """Every merchant account's posted totals, named where the directory can."""
        ...

    async def merchant_balance(self, merchant_id: str, currency: str) -> int | None:
        """The merchant's balance in `currency` (credits - debits), or None: no account."""
        ...

    async def adjust(self, wanted: Adjustment) -> tuple[Adjustment, bool]:
        """Post one correcting entry as `gateway ledger adjust` does: (the entry stored
        under its id, whether it moved money now)."""
        ...


def money(amount_minor: int, currency: str | None) -> str:
    """`amount_minor` with its currency and decimals (`-12.50 USD`); without a currency
    (an account on a ledger that names none) the integer of minor units, said so."""
    if currency is None:
        return f"{amount_minor:,} minor units"
    return format_minor(amount_minor, currency)


def rate_text(rate: Decimal | None) -> str:
    """A recorded rate as written (`1.08`, never `1.080000` or `1.08E+0`); `-` for none."""
    if rate is None:
        return "-"
    return format(rate.normalize(), "f")


@dataclass(frozen=True)
class MerchantBalance:
    """A merchant account's posted totals, as the balances list shows one."""

    account_id: int
    merchant_id: str | None  # None: no name recorded for this id
    currency: str | None  # None: the ledger number is not a currency
    debits_posted: int
    credits_posted: int
    #: What open authorisations reserve for the merchant, not in the balance yet.
    reserved_minor: int = 0

    @property
    def balance_minor(self) -> int:
        return self.credits_posted - self.debits_posted

    @property
    def negative(self) -> bool:
        """Below zero: refunds or chargebacks took more than the merchant held."""
        return self.balance_minor < 0

    @property
    def key(self) -> tuple[int, str, str, int]:
        """The list's order: merchants below zero first, then by merchant and currency."""
        return (0 if self.negative else 1, self.merchant_id or "", self.currency or "",
                self.account_id)  # fmt: skip

    def as_dict(self) -> dict[str, object]:
        return {
            "account_id": f"{self.account_id:#034x}",
            "merchant_id": self.merchant_id,
            "currency": self.currency,
            "debits_posted": self.debits_posted,
            "credits_posted": self.credits_posted,
            "balance_minor": self.balance_minor,
            "reserved_minor": self.reserved_minor,
            "negative": self.negative,
        }


def merchant_balances(views: Iterable[AccountView]) -> list[MerchantBalance]:
    """The merchant accounts among `views`, in the list's order (`MerchantBalance.key`)."""
    found = [
        MerchantBalance(
            v.account_id, v.owner, v.currency, v.debits_posted, v.credits_posted, v.reserved
        )
        for v in views
        if v.kind == "merchant"
    ]
    return sorted(found, key=lambda b: b.key)


def negative_counts(balances: Iterable[MerchantBalance]) -> dict[str, int]:
    """Merchant accounts below zero, by currency (`?` where the ledger names none)."""
    found: dict[str, int] = {}
    for b in balances:
        if b.negative:
            found[b.currency or "?"] = found.get(b.currency or "?", 0) + 1
    return dict(sorted(found.items()))


@dataclass(frozen=True)
class BalancesAsk:
    """Which merchant accounts, from where: every field None (or False) means no filter."""

    merchant_id: str | None = None
    currency: str | None = None
    negative_only: bool = False
    after: tuple[int, str, str, int] | None = None
    limit: int = BALANCES_PER_PAGE


def balances_page(
    balances: Iterable[MerchantBalance], ask: BalancesAsk
) -> tuple[list[MerchantBalance], tuple[int, str, str, int] | None]:
    """One page of `balances` (already in list order) and the key to start the next
    page after, or None on the last page."""
    page: list[MerchantBalance] = []
    for b in balances:
        if ask.merchant_id is not None and b.merchant_id != ask.merchant_id:
            continue
        if ask.currency is not None and b.currency != ask.currency:
            continue
        if (ask.negative_only and not b.negative) or (ask.after is not None and b.key <= ask.after):
            continue
        if len(page) == ask.limit:
            return page, page[-1].key
        page.append(b)
    return page, None


def encode_balance_cursor(key: tuple[int, str, str, int]) -> str:
    # The account id is a 128-bit number: written as its digits, as JSON numbers (and
    # orjson) stop at 64 bits.
    rank, merchant, currency, account_id = key
    raw = orjson.dumps([rank, merchant, currency, str(account_id)])
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_balance_cursor(text: str) -> tuple[int, str, str, int]:
    """The key a balances cursor carries; `BadCursor` for anything else."""
    refused = BadCursor("cursor: not a page cursor of this console; start from the first page")
    # A merchant id of up to 200 characters, 4 bytes each, in base64: under 2 KiB.
    if not text or len(text) > 8 * CURSOR_MAX_CHARS:
        raise refused
    try:
        rank, merchant, currency, account_id = orjson.loads(
            base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        )
    except (binascii.Error, ValueError, TypeError, orjson.JSONDecodeError):
        raise refused from None
    if not (
        rank in (0, 1)
        and isinstance(merchant, str)
        and isinstance(currency, str)
        and isinstance(account_id, str)
        and account_id.isascii()
        and account_id.isdigit()
        and len(account_id) <= 39
        and int(account_id) < 2**128
    ):
        raise refused
    return (int(rank), merchant, currency, int(account_id))


@dataclass
class StatementPage:
    """One page of a statement, collected from all its lines in recorded order.

    `add` each line of the window; the lines after `after_id` (the last one the previous
    page showed) are kept, up to `limit`, with the balance before them; the closing
    balance and the count are the whole window's."""

    opening_minor: int
    after_id: int = 0
    limit: int = STATEMENT_LINES_PER_PAGE
    before_minor: int = 0  # the balance before the first line kept
    closing_minor: int = 0
    movements: int = 0  # in the whole window
    lines: list[Line] = field(default_factory=list)
    more: bool = False  # lines follow the ones kept

    def __post_init__(self) -> None:
        self.before_minor = self.closing_minor = self.opening_minor

    def add(self, line: Line) -> None:
        self.movements += 1
        if line.movement.id > self.after_id:
            if len(self.lines) < self.limit:
                self.lines.append(line)
            else:
                self.more = True
        else:  # lines come in id order: every earlier page's line comes first
            self.before_minor = line.balance_minor
        self.closing_minor = line.balance_minor

    @property
    def last_id(self) -> int | None:
        """Where the next page starts after, or None on the last page."""
        return self.lines[-1].movement.id if self.more and self.lines else None


def line_doc(line: Line, *, balance: bool = True) -> dict[str, object]:
    """A statement line (or, without `balance`, a listed movement) as the API answers
    it: `core.finance.statements.FIELDS`, amounts as integers of minor units, `posted_minor`
    signed, and the same money (and the rate) written out for people."""
    doc = line.as_dict()
    m = line.movement
    doc["amount"] = money(m.amount_minor, m.currency)
    doc["rate_text"] = rate_text(m.rate)
    doc["posted"] = money(m.signed_minor, m.ledger_currency)
    if balance:
        doc["balance"] = money(line.balance_minor, m.ledger_currency)
    else:
        del doc["balance_minor"]
    return doc


def counts_text(counts: Mapping[str, int]) -> str:
    """`2 USD, 1 EUR` (as `negative_counts` gives them), or `none`."""
    return ", ".join(f"{n} {currency}" for currency, n in counts.items()) or "none"
