"""Which settlement an accepted event asks for, read from its body, so the console can
show where it stands (`settlements` is found by transfer id, its primary look-up).

Pure. The choice of extractor is the settlement worker's (`settlement.settler.
instruction_for`, which the console may not import); a unit test holds the two to the
same answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.core.model import ParsedBody
from gateway.core.settlement import (
    SettlementInstruction,
    from_internal,
    from_stripe,
    transfer_id,
)
from gateway.errors import GatewayError


@dataclass(frozen=True)
class SettlementAsked:
    """What the event asks of settlement: a transfer (and its id), or why none."""

    instruction: SettlementInstruction | None
    transfer_id: int | None
    reason: str  # why there is no transfer; "" when there is one


def instruction_of(
    provider: str, event_type: str | None, body: bytes, schemes: Mapping[str, str]
) -> SettlementInstruction | None:
    """The event's settlement instruction, or None when its source or type does not
    settle; raises as the extractors do for a body they cannot read."""
    if event_type is None:
        return None
    if provider.startswith("service:"):
        return from_internal(event_type, ParsedBody(body).json())
    if schemes.get(provider) == "stripe":
        return from_stripe(event_type, ParsedBody(body).json())
    return None


def settlement_asked(
    provider: str, event_type: str | None, body: bytes, schemes: Mapping[str, str]
) -> SettlementAsked:
    try:
        instruction = instruction_of(provider, event_type, body, schemes)
    except GatewayError as exc:  # MissingField, FieldTypeInvalid, PayloadNotJson, ...
        return SettlementAsked(None, None, f"its body cannot be settled: {exc}")
    if instruction is None:
        what = event_type or "no type"
        return SettlementAsked(None, None, f"{provider} events of type {what} do not settle")
    return SettlementAsked(instruction, transfer_id(instruction), "")
