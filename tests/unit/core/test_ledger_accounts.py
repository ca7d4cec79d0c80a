"""Account names and the operator's view of balances: pure, table-driven."""

from __future__ import annotations

import pytest

from gateway.core.ledger.accounts import (
    UNKNOWN_KIND,
    AccountName,
    clearing_name,
    describe,
    describe_all,
    ledger_currency,
    merchant_name,
    select,
)
from gateway.core.ledger.ids import (
    clearing_account,
    clearing_account_id,
    ledger_number,
    merchant_account,
    merchant_account_id,
)
from gateway.core.ledger.port import AccountCode, Balance


@pytest.mark.parametrize("code", ["USD", "EUR", "JPY", "KWD", "AAA", "ZZZ"])
def test_ledger_currency_reads_back_every_ledger_number(code: str) -> None:
    """The ledger number of a currency decodes to that currency."""
    assert ledger_currency(ledger_number(code)) == code


@pytest.mark.parametrize(
    ("ledger", "why"),
    [
        (0, "no letters"),
        (1, "one letter"),
        (27 * 1 + 1, "two letters"),
        (27 * 27 * 1 + 0 * 27 + 1, "a zero digit is no letter"),
        (27**7, "more than six letters"),
        (((1 * 27 + 2) * 27 + 3) * 27 + 4, "four letters: a currency code has three"),
    ],
)
def test_ledger_currency_is_none_for_what_no_currency_encodes(ledger: int, why: str) -> None:
    """A ledger number no currency code maps to reads as None."""
    assert ledger_currency(ledger) is None, why


def test_names_hash_to_the_ids_and_specs_settlement_uses() -> None:
    """A name gives the very account id and spec the settlement path posts to."""
    merchant = merchant_name("m_1", "usd")
    assert merchant.currency == "USD"
    assert merchant.account_id == merchant_account_id("m_1", "USD")
    assert merchant.spec() == merchant_account("m_1", "USD")
    clearing = clearing_name("stripe", "EUR")
    assert clearing.account_id == clearing_account_id("stripe", "EUR")
    assert clearing.spec() == clearing_account("stripe", "EUR")


def test_a_name_refuses_what_is_not_a_currency() -> None:
    """A name is a value worth trusting: its currency is checked on creation."""
    with pytest.raises(ValueError, match="currency"):
        merchant_name("m_1", "US")


def _balance(name: AccountName, debits: int = 0, credits: int = 0) -> Balance:
    spec = name.spec()
    return Balance(spec.id, debits, credits, ledger=spec.ledger, code=int(spec.code))


NAMED = merchant_name("m_1", "USD")
OTHER = merchant_name("m_2", "USD")


@pytest.mark.parametrize(
    ("balance", "name", "expected"),
    [
        # A recorded name that hashes to the id names the account.
        (_balance(NAMED, 0, 500), NAMED, ("merchant", "m_1", "USD", 500)),
        (_balance(clearing_name("stripe", "USD"), 500, 0), clearing_name("stripe", "USD"),
         ("clearing", "stripe", "USD", -500)),
        # No name: kind and currency still come from the ledger's own numbers.
        (_balance(NAMED, 0, 7), None, ("merchant", None, "USD", 7)),
        (_balance(clearing_name("adyen", "EUR")), None, ("clearing", None, "EUR", 0)),
        # A name that belongs to another id is not believed.
        (_balance(NAMED), OTHER, ("merchant", None, "USD", 0)),
        # Numbers the gateway never writes show as unknown, never an error.
        (Balance(12345, 1, 2, ledger=1, code=99), None, (UNKNOWN_KIND, None, None, 1)),
        (Balance(12345, 0, 0), None, (UNKNOWN_KIND, None, None, 0)),
    ],
)  # fmt: skip
def test_describe(
    balance: Balance, name: AccountName | None, expected: tuple[str, str | None, str | None, int]
) -> None:
    """Each account shows its kind, owner and currency as far as they are known."""
    view = describe(balance, name)
    assert (view.kind, view.owner, view.currency, view.balance) == expected
    assert view.account_id == balance.account_id
    assert view.as_dict()["account_id"] == f"{balance.account_id:#034x}"


VIEWS = describe_all(
    [
        _balance(merchant_name("m_1", "USD")),
        _balance(merchant_name("m_1", "EUR")),
        _balance(merchant_name("m_2", "USD")),
        _balance(clearing_name("m_1", "USD")),  # a source spelt like a merchant
        _balance(merchant_name("m_3", "USD")),  # no name recorded
    ],
    {
        n.account_id: n
        for n in (
            merchant_name("m_1", "USD"),
            merchant_name("m_1", "EUR"),
            merchant_name("m_2", "USD"),
            clearing_name("m_1", "USD"),
        )
    },
)


@pytest.mark.parametrize(
    ("merchant", "currency", "expected"),
    [
        (None, None, 5),
        ("m_1", None, 2),  # merchant accounts only, not the clearing account of "m_1"
        ("m_1", "eur", 1),
        (None, "USD", 4),
        ("m_3", None, 0),  # unnamed: no filter can claim it
        ("nobody", None, 0),
    ],
)
def test_select(merchant: str | None, currency: str | None, expected: int) -> None:
    """`--merchant` keeps that merchant's accounts, `--currency` the currency's."""
    chosen = select(VIEWS, merchant=merchant, currency=currency)
    assert len(chosen) == expected
    for view in chosen:
        assert merchant is None or (view.owner, view.kind) == (merchant, "merchant")
        assert currency is None or view.currency == currency.upper()


def test_kind_names_match_account_codes() -> None:
    """The printed kinds are the account codes' names, as the names table stores them."""
    assert {c.name.lower() for c in AccountCode} == {"merchant", "clearing"}
