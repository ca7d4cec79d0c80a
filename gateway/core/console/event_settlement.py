"""Which settlement an accepted event asks for, read from its body, so the console can
show where it stands (`settlements` is found by transfer id, its primary look-up).

Pure. What settles is decided by `core.providers.movements`, which the settlement worker asks too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.core.ordering.keys import KeyRule
from gateway.core.providers.movements import instruction_of
from gateway.core.settlement.instructions import SettlementInstruction, transfer_id
from gateway.errors import GatewayError


@dataclass(frozen=True)
class SettlementAsked:
    """What the event asks of settlement: a transfer (and its id), or why none."""

    instruction: SettlementInstruction | None
    transfer_id: int | None
    reason: str  # why there is no transfer; "" when there is one


def settlement_asked(
    provider: str,
    event_type: str | None,
    body: bytes,
    schemes: Mapping[str, str],
    merchants: Mapping[str, tuple[KeyRule, ...]] | None = None,
) -> SettlementAsked:
    """What the event asks of settlement, read as the worker reads it."""
    try:
        instruction = instruction_of(provider, event_type, body, schemes, merchants)
    except GatewayError as exc:  # MissingField, FieldTypeInvalid, PayloadNotJson, ...
        return SettlementAsked(None, None, f"its body cannot be settled: {exc}")
    if instruction is None:
        what = event_type or "no type"
        return SettlementAsked(None, None, f"{provider} events of type {what} do not settle")
    return SettlementAsked(instruction, transfer_id(instruction), "")
