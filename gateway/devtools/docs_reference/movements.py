"""The money-movements reference page, generated from `core.providers.movements.movement_types`:
which event types of which source settle as which movement."""

from __future__ import annotations

from gateway.core.providers import PROVIDERS
from gateway.core.providers.movements import movement_types
from gateway.core.settlement.instructions import SettlementKind
from gateway.devtools.docs_reference.text import code, generated_header, table

__all__ = ["render"]

#: What each movement does to the ledger, for the page's first table.
EFFECTS = {
    SettlementKind.AUTHORISATION: (
        "clearing → merchant, pending: reserved at today's rate, not yet in the balance"
    ),
    SettlementKind.CAPTURE: (
        "clearing → merchant, converted at today's rate; posts the authorisation (at its "
        "rate) when there is one, and a partial capture releases the rest"
    ),
    SettlementKind.VOID: "releases the authorisation's reservation",
    SettlementKind.REFUND: "merchant → clearing, at the payment's rate",
    SettlementKind.REFUND_REVERSAL: "clearing → merchant: the refund undone",
    SettlementKind.CHARGEBACK: "merchant → clearing, at the payment's rate",
    SettlementKind.CHARGEBACK_REVERSAL: "clearing → merchant: the chargeback undone",
    SettlementKind.DISPUTE_FEE: (
        "merchant → the source's fees account, at today's rate; told with the chargeback"
    ),
    SettlementKind.DISPUTE_FEE_REVERSAL: "the source's fees account → merchant: the fee returned",
    SettlementKind.PAYOUT: "merchant → the source's payouts account, at today's rate",
    SettlementKind.CREDIT_ADJUSTMENT: "adjustments → merchant (`gateway ledger adjust`)",
    SettlementKind.DEBIT_ADJUSTMENT: "merchant → adjustments (`gateway ledger adjust`)",
}
#: How the internal services are named on the page (a provider by its scheme).
SERVICES = "internal services (`POST /v1/events`)"


def render() -> str:
    """The page `docs/reference/movements.md`."""
    kinds = table(
        ("Movement", "Ledger effect"),
        ((code(kind.value), EFFECTS[kind]) for kind in SettlementKind),
    )
    silent = ", ".join(p.title for p in PROVIDERS.values() if p.movements is None)
    sections = []
    for source, types in movement_types().items():
        rows = table(
            ("Event type", "Settles as"),
            (
                (code(event_type), " or ".join(code(k.value) for k in movements))
                for event_type, movements in sorted(types.items())
            ),
        )
        name = SERVICES if source == "service" else f"`{source}`-scheme providers"
        sections.append(f"## {name}\n\n{rows}")
    return (
        generated_header("gateway.core.providers.movements.movement_types")
        + "# Money movements\n\n"
        + "Which events move money, and as what. Every other event type of a payment "
        + "provider is acknowledged, moves nothing and is counted in "
        + "`gateway_settlement_unmapped_total{provider,type}`; events of the other schemes "
        + f"({silent}) never move money. How each "
        + "movement is netted against its payment is on "
        + "[Concepts](../concepts.md#money-movements).\n\n"
        + kinds
        + "\n"
        + "\n".join(sections)
    )
