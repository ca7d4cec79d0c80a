"""Which money movement an event is, decided once, from the registry.

Pure. A provider's `Movements` read an event's parsed body and return its
`SettlementInstruction`, or None when the event moves no money; internal services
(`service:NAME`) have theirs (`internal.SERVICE`); a provider without movements
(GitHub, Shopify, Standard Webhooks senders, plain HMAC) never settles. The worker
(`settlement.settler`) and the console (`core.console.event_settlement`) both ask
`instruction_of`, so what settles is decided in one place. docs/reference/movements.md
lists each provider's event types, generated from `movement_types`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gateway.core.events.model import ParsedBody
from gateway.core.ordering.keys import KeyRule, first_value
from gateway.core.providers import PROVIDERS
from gateway.core.providers.base import Movements
from gateway.core.providers.internal import SERVICE
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.errors import FieldTypeInvalid, MissingField


def is_internal(provider: str) -> bool:
    """Events published on `/v1/events` are recorded under `service:NAME`."""
    return provider.startswith("service:")


def movements_of(scheme: str) -> Movements | None:
    """The movements of a scheme's events, or None when they never move money
    (`service` names the internal services')."""
    if scheme == "service":
        return SERVICE
    provider = PROVIDERS.get(scheme)
    return None if provider is None else provider.movements


def settling_schemes() -> tuple[str, ...]:
    """The schemes whose events can move money, in the registry's order."""
    return tuple(name for name, p in PROVIDERS.items() if p.movements is not None)


def movement_types() -> Mapping[str, Mapping[str, tuple[SettlementKind, ...]]]:
    """Each settling scheme's event types and the movements each can be, then the
    internal services' under `service` (for the docs and the console)."""
    found = {name: movements_of(name) for name in (*settling_schemes(), "service")}
    return {name: m.types for name, m in found.items() if m is not None}


def settles(provider: str, schemes: Mapping[str, str]) -> bool:
    """Whether events of `provider` can move money at all (a payment provider's scheme,
    or an internal service); every other source is silent by design."""
    return is_internal(provider) or movements_of(schemes.get(provider, "")) is not None


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
    found = movements_of(source) if source else None
    return found is not None and event_type in found.types


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
    or, without it, the scheme's own pointers (`Movements.merchant`) find one, else what the mapping
    itself reads (a Stripe payout's connected account); a capture or payout without one
    is `MissingField`, naming the first place looked."""
    if event_type is None:
        return None
    if is_internal(provider):
        return _bounded(SERVICE.instruction(event_type, ParsedBody(body).json()))
    scheme = schemes.get(provider, "")
    movements = movements_of(scheme)
    if movements is None:
        return None
    doc = ParsedBody(body, PROVIDERS[scheme].document).json()
    found = movements.instruction(event_type, doc)
    if found is None:
        return None
    rules = (merchants or {}).get(provider) or movements.merchant
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
