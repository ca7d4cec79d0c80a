"""Deterministic ledger ids and the platform's accounts: the same settlement always maps
to the same transfer id, and a merchant, source or currency to the same account and
ledger, whichever worker or delivery asks. Pure.
"""

from __future__ import annotations

import functools
import hashlib

from gateway.core.ledger.port import ID_MAX, AccountCode, AccountSpec
from gateway.core.money import account_currency, check_currency


@functools.lru_cache(maxsize=8192)
def _hash128(*parts: str) -> int:
    """A 128-bit id from `parts`, never one of the two values TigerBeetle reserves.

    Cached: a settlement's ids are asked for several times while it settles, and the
    few account ids over and over.
    """
    salt = 0
    while True:
        digest = hashlib.blake2b(digest_size=16, person=b"gateway.ledger1")
        for part in (*parts, str(salt)):
            raw = part.encode("utf-8")
            # Length prefixes keep ("a:b", "c") and ("a", "b:c") apart.
            digest.update(len(raw).to_bytes(4, "big") + raw)
        value = int.from_bytes(digest.digest(), "big")
        if 0 < value < ID_MAX:
            return value
        salt += 1  # astronomically rare; rehash deterministically


def movement_transfer_id(kind: str, settlement_id: str, key: str) -> int:
    """The transfer id of the movement `kind` (a `SettlementKind` value) of payment
    `settlement_id` with its own id `key`."""
    return _hash128("transfer", kind, settlement_id, key)


def fx_transfer_id(kind: str, settlement_id: str, key: str) -> int:
    """The id of the exchange difference posted with that movement."""
    return _hash128("transfer", "fx", kind, settlement_id, key)


def authorisation_transfer_id(settlement_id: str) -> int:
    """The id of the payment's pending transfer (its authorisation)."""
    return _hash128("transfer", "authorisation", settlement_id, settlement_id)


def void_transfer_id(settlement_id: str) -> int:
    """The id of the void of the payment's pending transfer."""
    return _hash128("transfer", "void", settlement_id, settlement_id)


def capture_transfer_id(settlement_id: str) -> int:
    """The id of the payment's capture (whether it posts a pending transfer or not)."""
    return _hash128("transfer", "capture", settlement_id)


def settlement_ref(settlement_id: str) -> int:
    """A 128-bit hash of the settlement id, for TigerBeetle's `user_data_128`."""
    return _hash128("settlement", settlement_id)


def merchant_account_id(merchant_id: str, currency: str) -> int:
    """The id of the merchant's account in `currency`."""
    return _hash128("account", "merchant", merchant_id, check_currency(currency))


def clearing_account_id(provider: str, currency: str) -> int:
    """The id of the provider's clearing account in `currency` (money in transit)."""
    return _hash128("account", "clearing", provider, check_currency(currency))


def ledger_number(currency: str) -> int:
    """The ledger (a u32) holding `currency`: its letters read as a base-27 number.

    Total and collision-free for currency codes (three letters; the encoding would stay
    within a u32 up to six, 27**6 < 2**32), with no table to keep up to date; `USD` is
    15_826.
    """
    code = account_currency(currency)
    value = 0
    for letter in code:
        value = value * 27 + (ord(letter) - ord("A") + 1)
    return value


def merchant_account(merchant_id: str, currency: str) -> AccountSpec:
    """A merchant's account. It has no debit limit: a refund or chargeback the provider
    has already executed is posted even against a merchant who was paid out, and the
    negative balance is shown (`gateway_ledger_negative_merchants`) rather than the
    movement refused. Money only enters it by a capture, so nothing but money already
    gone can take it below zero."""
    return AccountSpec(
        id=merchant_account_id(merchant_id, currency),
        ledger=ledger_number(currency),
        code=AccountCode.MERCHANT,
    )


def payouts_owner(source: str) -> str:
    """The owner of the account a source's payouts go to (a clearing account; a source
    name never holds a colon, so no source can take it)."""
    return f"payouts:{source}"


def fees_owner(source: str) -> str:
    """The owner of the account a source's dispute fees go to (a clearing account)."""
    return f"fees:{source}"


#: The owner of the platform's FX account, one per ledger currency: the exchange result
#: of refunds and disputes of converted payments. Not a source name (no colon in those).
FX_OWNER = "fx:platform"


def clearing_account(provider: str, currency: str) -> AccountSpec:
    """A provider's clearing account: debited on capture, so it runs a debit balance."""
    return AccountSpec(
        id=clearing_account_id(provider, currency),
        ledger=ledger_number(currency),
        code=AccountCode.CLEARING,
    )
