"""Braintree's webhooks as money movements (developer.paypal.com/braintree/docs/
reference/general/webhooks; the `braintree` library's `WebhookNotification.Kind`).

A notification is a signed form (`core.signatures.braintree`) whose payload is read into
a document by `braintree.payload`: `{"kind", "timestamp", "subject": {"transaction" |
"dispute" | "disbursement": {...}}}`, plus the id the gateway derives. Amounts are
decimal strings in major units (`"100.00"`) with the object's `currency_iso_code`,
read exactly: more decimals than the currency has is refused, never rounded.

- `transaction_settled` (sent for ACH and SEPA Direct Debit only; card transactions
  have no transaction webhooks): a `sale` is the capture of its `amount`, keyed by the
  transaction; a `credit` (a refund transaction) is the refund of its
  `refunded_transaction_id`, keyed by its own id. `transaction_settlement_declined`
  moves nothing: the transaction never settled.
- Disputes: a chargeback takes "the transaction amount ... from the merchant's bank
  account" when it is opened, and a merchant who wins has it "returned" (PayPal help
  article faq3379, "I received a chargeback on my Braintree control panel"). So
  `dispute_opened` of `kind` `chargeback` is a chargeback of `amount_disputed` (else
  `amount`), keyed by the dispute, of its `transaction.id`; `dispute_won` is its
  reversal. Lost, accepted, auto-accepted and expired disputes move nothing more: the
  money left when the dispute opened. A `retrieval` (a request for information) moves
  no funds. [Unverified: whether a `pre_arbitration` dispute moves funds again; it
  moves nothing here.]
- `disbursement`: a payout of its `amount` in `merchant_account.currency_iso_code`,
  keyed by the disbursement. `disbursement_exception` (a disbursement that failed)
  moves nothing.
- `refund_failed` moves nothing: a refund's success is not webhooked, so the ledger
  never held the refund it would reverse.

The merchant is the transaction's or dispute's `merchant_account_id`, or the
disbursement's `merchant_account.id`: the merchant account the money belongs to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.core.bodies.fields import (
    get_currency,
    get_decimal_amount,
    get_object,
    get_str,
    optional_str,
)
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Movements, Provider
from gateway.core.providers.braintree.payload import document
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures.base import SchemeParams, signing_secret
from gateway.core.signatures.braintree import BraintreeScheme, signed_form

_K = SettlementKind
MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = {
    "transaction_settled": (_K.CAPTURE, _K.REFUND),
    "dispute_opened": (_K.CHARGEBACK,),
    "dispute_won": (_K.CHARGEBACK_REVERSAL,),
    "disbursement": (_K.PAYOUT,),
}
_TXN = "subject.transaction."
_DSP = "subject.dispute."


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A Braintree notification's instruction, or None when it moves no money."""
    source = optional_str(doc, "event_id")
    if event_type == "transaction_settled":
        txn = get_object(doc, "subject.transaction")
        txn_id = get_str(txn, "id", _TXN)
        amount, currency = _money(txn, "amount", _TXN)
        merchant = optional_str(txn, "merchant_account_id")
        if get_str(txn, "type", _TXN) == "credit":
            return SettlementInstruction(
                settlement_id=get_str(txn, "refunded_transaction_id", _TXN),
                kind=_K.REFUND,
                merchant_id=merchant,
                amount_minor=amount,
                currency=currency,
                refund_id=txn_id,
                source_event_id=source,
            )
        return SettlementInstruction(
            settlement_id=txn_id,
            kind=_K.CAPTURE,
            merchant_id=merchant,
            amount_minor=amount,
            currency=currency,
            refund_id=None,
            source_event_id=source,
        )
    if event_type in ("dispute_opened", "dispute_won"):
        dispute = get_object(doc, "subject.dispute")
        if get_str(dispute, "kind", _DSP) != "chargeback":
            return None  # a retrieval moves no funds; a pre-arbitration: see above
        field = "amount_disputed" if dispute.get("amount_disputed") is not None else "amount"
        amount, currency = _money(dispute, field, _DSP)
        transaction = get_object(doc, "subject.dispute.transaction")
        return SettlementInstruction(
            settlement_id=get_str(transaction, "id", _DSP + "transaction."),
            kind=_K.CHARGEBACK if event_type == "dispute_opened" else _K.CHARGEBACK_REVERSAL,
            merchant_id=optional_str(dispute, "merchant_account_id"),
            amount_minor=amount,
            currency=currency,
            refund_id=get_str(dispute, "id", _DSP),
            source_event_id=source,
        )
    if event_type == "disbursement":
        disbursement = get_object(doc, "subject.disbursement")
        account = get_object(doc, "subject.disbursement.merchant_account")
        where = "subject.disbursement."
        currency = get_currency(account, "currency_iso_code", where + "merchant_account.")
        disbursement_id = get_str(disbursement, "id", where)
        return SettlementInstruction(
            settlement_id=disbursement_id,
            kind=_K.PAYOUT,
            merchant_id=optional_str(account, "id"),
            amount_minor=get_decimal_amount(disbursement, "amount", currency, where),
            currency=currency,
            refund_id=disbursement_id,
            source_event_id=source,
        )
    return None


def _money(obj: Mapping[str, Any], key: str, where: str) -> tuple[int, str]:
    currency = get_currency(obj, "currency_iso_code", where)
    return get_decimal_amount(obj, key, currency, where), currency


def _sign_body(params: SchemeParams, body: bytes) -> bytes:
    """`gateway sign`'s body for Braintree: the notification's XML, posted as the signed
    form Braintree sends."""
    return signed_form(body, signing_secret(params))


BRAINTREE = Provider(
    name="braintree",
    title="Braintree",
    scheme=BraintreeScheme(),
    movements=Movements(
        instruction,
        MOVEMENT_TYPES,
        parse_rules(
            (
                "/subject/transaction/merchant_account_id",
                "/subject/dispute/merchant_account_id",
                "/subject/disbursement/merchant_account/id",
            )
        ),
    ),
    # A dispute names its transaction; a refund its refunded transaction.
    order_keys=parse_rules(
        (
            "transaction_settled /subject/transaction/refunded_transaction_id",
            "/subject/transaction/id",
            "/subject/dispute/transaction/id",
        )
    ),
    document=document,
    cross_check="`braintree.WebhookTestingGateway.sample_notification` signs the pairs "
    "the verifier must accept, and `WebhookNotification.parse` reads the same content",
    sign_body=_sign_body,
)
