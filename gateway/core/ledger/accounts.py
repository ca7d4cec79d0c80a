"""Whose each ledger account is, and the operator's view of a balance.

Account ids are 128-bit hashes of (kind, owner, currency) (`core.settlement.instructions`), which no
ledger can turn back into a name; TigerBeetle stores only numbers. Two of the three parts
survive as numbers on the account itself, in both backends: its `code` is the kind and
its `ledger` is the currency (a base-27 number, decoded by `ledger_currency`). The owner
(the merchant id, or the source of a clearing account) is kept in a name directory
written when an account is opened (`AccountNames`), and trusted only when hashing the
recorded name gives back the account's id, so a wrong row can never put a name on
somebody else's balance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gateway.core.ledger.ids import (
    clearing_account,
    clearing_account_id,
    merchant_account,
    merchant_account_id,
)
from gateway.core.ledger.port import AccountCode, AccountSpec, Balance
from gateway.core.money import ASSETS, account_currency, check_currency

#: What an account whose code is neither merchant nor clearing shows as its kind.
UNKNOWN_KIND = "unknown"


@dataclass(frozen=True)
class AccountName:
    """What an account's id is derived from: its kind, owner and currency."""

    kind: AccountCode
    #: The merchant id of a merchant account; the source (provider, or `service:NAME`)
    #: of a clearing account.
    owner: str
    currency: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "currency", account_currency(self.currency))

    @property
    def account_id(self) -> int:
        """The ledger id this name hashes to."""
        if self.kind is AccountCode.MERCHANT:
            return merchant_account_id(self.owner, self.currency)
        return clearing_account_id(self.owner, self.currency)

    def spec(self) -> AccountSpec:
        """The account to create for this name."""
        if self.kind is AccountCode.MERCHANT:
            return merchant_account(self.owner, self.currency)
        return clearing_account(self.owner, self.currency)


def merchant_name(merchant_id: str, currency: str) -> AccountName:
    """The name of a merchant's account in `currency`."""
    return AccountName(AccountCode.MERCHANT, merchant_id, currency)


def clearing_name(source: str, currency: str) -> AccountName:
    """The name of a source's clearing account in `currency`."""
    return AccountName(AccountCode.CLEARING, source, currency)


class AccountNames(Protocol):
    """The directory of account names, for both ledger backends."""

    async def record(self, names: Sequence[AccountName]) -> None:
        """Remember `names` (idempotent)."""
        ...

    async def lookup(self, account_ids: Sequence[int]) -> dict[int, AccountName]:
        """The recorded names of those of `account_ids` that have one."""
        ...


def ledger_currency(ledger: int) -> str | None:
    """The currency whose `core.ledger.ids.ledger_number` is `ledger`, or None.

    The inverse of that base-27 encoding: digits 1..26 are the letters A..Z; a 0 digit
    or other than 3 letters (or an asset's code, `core.money.ASSETS`) is no currency.
    """
    letters: list[str] = []
    value = ledger
    while value > 0:
        value, digit = divmod(value, 27)
        if digit == 0:
            return None
        letters.append(chr(ord("A") + digit - 1))
    code = "".join(reversed(letters))
    return code if len(code) == 3 or code in ASSETS else None


@dataclass(frozen=True)
class AccountView:
    """One account as operators see it: whose, in what, and its posted totals."""

    account_id: int
    kind: str  # "merchant" | "clearing" | UNKNOWN_KIND
    owner: str | None  # None: no name recorded for this id
    currency: str | None  # None: the ledger number is not a currency
    ledger: int
    debits_posted: int
    credits_posted: int
    #: What authorisations reserve (pending transfers), not in the balance.
    debits_pending: int = 0
    credits_pending: int = 0

    @property
    def balance(self) -> int:
        """Credits minus debits (a merchant's holding; negative on a clearing account)."""
        return self.credits_posted - self.debits_posted

    @property
    def reserved(self) -> int:
        """Pending credits minus pending debits: what captures of the authorisations
        still open would move in (negative on a clearing account)."""
        return self.credits_pending - self.debits_pending

    def as_dict(self) -> dict[str, object]:
        """The fields `gateway ledger balances --json` prints."""
        return {
            "account_id": f"{self.account_id:#034x}",
            "kind": self.kind,
            "owner": self.owner,
            "currency": self.currency,
            "ledger": self.ledger,
            "debits_posted": self.debits_posted,
            "credits_posted": self.credits_posted,
            "balance": self.balance,
            "debits_pending": self.debits_pending,
            "credits_pending": self.credits_pending,
            "reserved": self.reserved,
        }


def describe(balance: Balance, name: AccountName | None) -> AccountView:
    """The view of `balance`, named by `name` only if `name` hashes to its id."""
    try:
        kind: str = AccountCode(balance.code).name.lower()
    except ValueError:
        kind = UNKNOWN_KIND
    currency = ledger_currency(balance.ledger)
    owner = None
    if name is not None and name.account_id == balance.account_id:
        owner, kind, currency = name.owner, name.kind.name.lower(), name.currency
    return AccountView(
        account_id=balance.account_id,
        kind=kind,
        owner=owner,
        currency=currency,
        ledger=balance.ledger,
        debits_posted=balance.debits_posted,
        credits_posted=balance.credits_posted,
        debits_pending=balance.debits_pending,
        credits_pending=balance.credits_pending,
    )


def select(
    views: Iterable[AccountView], *, merchant: str | None = None, currency: str | None = None
) -> list[AccountView]:
    """The views of `merchant`'s accounts and/or in `currency` (None: no filter)."""
    wanted_currency = None if currency is None else check_currency(currency)
    return [
        v
        for v in views
        if (merchant is None or (v.kind == "merchant" and v.owner == merchant))
        and (wanted_currency is None or v.currency == wanted_currency)
    ]


def describe_all(
    balances: Iterable[Balance], names: Mapping[int, AccountName]
) -> list[AccountView]:
    """`describe` each balance with its recorded name, if any."""
    return [describe(b, names.get(b.account_id)) for b in balances]
