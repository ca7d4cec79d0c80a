"""Which money movement an event is: one mapping per source, one registry.

Pure. A mapping reads an event's parsed body and returns its `SettlementInstruction`,
or None when the event moves no money. A payment provider's scheme has a mapping here
(`stripe`, `paddle`, `razorpay`); internal services (`service:NAME`) have theirs; any other scheme
(GitHub, Shopify, Standard Webhooks senders, plain HMAC) never settles. The worker
(`settlement.settler`) and the console (`core.event_settlement`) both ask `instruction_of`,
so what settles is decided in one place. docs/reference/movements.md lists each
mapping's event types, generated from `MOVEMENT_TYPES`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from gateway.core.mappings import internal, paddle, razorpay, stripe
from gateway.core.model import ParsedBody
from gateway.core.order_keys import KeyRule, first_value, parse_rules
from gateway.core.settlement import SettlementInstruction, SettlementKind
from gateway.errors import FieldTypeInvalid, MissingField

#: A mapping: (event type, parsed body) to its instruction, or None.
Extract = Callable[[str, Any], "SettlementInstruction | None"]

#: The payment providers' mappings, by signature scheme.
PROVIDER_MAPPINGS: Mapping[str, Extract] = {
    "stripe": stripe.instruction,
    "paddle": paddle.instruction,
    "razorpay": razorpay.instruction,
}

#: Each mapping's event types and the movement each can be (for the docs and the
#: console); a type listed here may still move nothing for a given body (a Paddle
#: adjustment not yet approved, a Stripe refund still to be decided).
MOVEMENT_TYPES: Mapping[str, Mapping[str, tuple[SettlementKind, ...]]] = {
    "stripe": stripe.MOVEMENT_TYPES,
    "paddle": paddle.MOVEMENT_TYPES,
    "razorpay": razorpay.MOVEMENT_TYPES,
    "service": internal.MOVEMENT_TYPES,
}


def is_internal(provider: str) -> bool:
    """Events published on `/v1/events` are recorded under `service:NAME`."""
    return provider.startswith("service:")


def settles(provider: str, schemes: Mapping[str, str]) -> bool:
    """Whether events of `provider` can move money at all (a payment provider's scheme,
    or an internal service); every other source is silent by design."""
    return is_internal(provider) or schemes.get(provider) in PROVIDER_MAPPINGS


#: Where each scheme's events name their merchant, when `[providers.NAME] merchant` does
#: not say (`core.order_keys` rules: first match wins).
DEFAULT_MERCHANT: Mapping[str, tuple[KeyRule, ...]] = {
    "stripe": parse_rules(("/data/object/metadata/merchant_id",)),
    "paddle": parse_rules(("/data/custom_data/merchant_id",)),
    "razorpay": parse_rules(("/payload/payment/entity/notes/merchant_id",)),
}
#: Movements that must name their merchant: nothing earlier tells whose money it is.
_NAMES_MERCHANT = frozenset(
    {SettlementKind.CAPTURE, SettlementKind.PAYOUT, SettlementKind.AUTHORISATION}
)
#: The longest payment, movement or merchant id a movement may carry, in characters.
#: Ids are keys of `settlements`' indexes; a signed event's id far beyond any
#: provider's would otherwise fail its insert with a database error, retried for ever.
ID_CHARS_MAX = 255


def may_move_money(provider: str, event_type: str, schemes: Mapping[str, str]) -> bool:
    """Whether an event of `provider` of `event_type` can move money at all (its
    mapping names the type), read without its body (a payload retention removed)."""
    source = "service" if is_internal(provider) else schemes.get(provider, "")
    return event_type in MOVEMENT_TYPES.get(source, {})


def instruction_of(
    provider: str,
    event_type: str | None,
    body: bytes,
    schemes: Mapping[str, str],
    merchants: Mapping[str, tuple[KeyRule, ...]] | None = None,
) -> SettlementInstruction | None:
    """The event's instruction, or None when its source or type moves no money; raises
    the permanent errors of a body its mapping cannot read (`PayloadNotJson`,
    `MissingField`, `FieldTypeInvalid`, ...). A body is parsed only for a source that
    settles.

    A provider's merchant is where `merchants[provider]` (`[providers.NAME] merchant`)
    or, without it, the scheme's `DEFAULT_MERCHANT` finds one, else what the mapping
    itself reads (a Stripe payout's connected account); a capture or payout without one
    is `MissingField`, naming the first place looked."""
    if event_type is None:
        return None
    if is_internal(provider):
        return _bounded(internal.instruction(event_type, ParsedBody(body).json()))
    scheme = schemes.get(provider, "")
    extract = PROVIDER_MAPPINGS.get(scheme)
    if extract is None:
        return None
    doc = ParsedBody(body).json()
    found = extract(event_type, doc)
    if found is None:
        return None
    rules = (merchants or {}).get(provider) or DEFAULT_MERCHANT.get(scheme, ())
    merchant = first_value(rules, event_type, doc) or found.merchant_id
    if merchant is None and found.kind in _NAMES_MERCHANT:
        raise MissingField(rules[0].pointer[1:].replace("/", ".") if rules else "merchant_id")
    if merchant != found.merchant_id:
        found = replace(found, merchant_id=merchant)
    return _bounded(found)


def _bounded(found: SettlementInstruction | None) -> SettlementInstruction | None:
    """`found`, unless one of its ids is longer than `ID_CHARS_MAX` (`FieldTypeInvalid`,
    naming which id)."""
    if found is None:
        return None
    ids = {"payment id": found.settlement_id, "movement id": found.refund_id,
           "merchant_id": found.merchant_id}  # fmt: skip
    for name, value in ids.items():
        if value is not None and len(value) > ID_CHARS_MAX:
            raise FieldTypeInvalid(name, f"at most {ID_CHARS_MAX} characters, not {len(value)}")
    return found
