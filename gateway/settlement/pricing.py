"""Step 2: each routed item's merchant account checked, and its amount converted at
the rate (`price`); what it asks of the settler is `Pricing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Protocol

from gateway.adapters.postgres import settlements as store
from gateway.core.money import convert_minor
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.settlement import traced, two_phase
from gateway.settlement.items import Priced, Routed, Triage

_ONE = Decimal(1)


class Pricing(Protocol):
    """What the account-and-rate step asks (the `Settler`)."""

    def ledger_currency_for(
        self, instruction: SettlementInstruction, payment: store.SettlementRow | None
    ) -> str: ...

    async def require_accounts(self, merchant: str, source: str, currency: str) -> None: ...

    @property
    def converts(self) -> bool:
        """False with `[settlement] balances = "per_currency"`: nothing is converted."""
        ...

    async def rate_from(self, currency: str, attempt: int) -> tuple[Decimal, str]: ...


async def price(routed: Sequence[Routed], pricing: Pricing) -> Triage[Priced]:
    """Each item's merchant account checked, and its amount converted at the rate. The
    settler remembers both once known good, so a batch asks once per merchant and
    currency; a failure is asked again per event (its own retry delay and jitter)."""
    triage: Triage[Priced] = Triage()
    # Rates found in this batch, by currency and delivery number: an untraced item takes
    # its currency's from here, asked once per batch (a traced one asks in its own span).
    found: dict[tuple[str, int], Decimal] = {}
    for r in routed:
        item, instruction = r.item, r.item.instruction
        if instruction.kind is SettlementKind.VOID:  # what its authorisation reserved
            triage.go_on.append(two_phase.void_priced(r))
            continue
        auth = r.authorisation if not r.release else None
        try:
            ledger = pricing.ledger_currency_for(instruction, r.payment)
            if auth is not None:  # posted in the reservation's currency, at its rate
                ledger = auth.ledger_currency or auth.currency
            await pricing.require_accounts(r.merchant, item.event.provider, ledger)
            if r.fixed is not None:
                stored = Priced(item, r.merchant, *r.fixed, ledger, stored=True,
                                authorisation=r.authorisation, release=r.release,
                                fx=r.fx)  # fmt: skip
                triage.go_on.append(stored)
                continue
            if auth is not None and auth.rate_at_payment is not None:
                amount_minor = instruction.amount_minor
                if instruction.currency != ledger:
                    amount_minor = convert_minor(
                        amount_minor, auth.rate_at_payment, instruction.currency, ledger
                    )
                triage.go_on.append(Priced(item, r.merchant, amount_minor, auth.rate_at_payment,
                                           ledger, authorisation=auth))  # fmt: skip
                continue
            if r.payment is not None:  # at its payment's rate, once netted (`follow_ups`)
                current = None
                if pricing.converts and r.payment.currency != ledger:  # for its FX result
                    key = (r.payment.currency, item.attempt)
                    current = found.get(key) if item.span is None else None
                    if current is None:
                        current = await traced.rate(
                            pricing.rate_from, item.span, r.payment.currency, item.attempt
                        )
                        found[key] = current
                triage.go_on.append(Priced(item, r.merchant, 0, Decimal(1), ledger,
                                           payment=r.payment, current_rate=current))  # fmt: skip
                continue
            currency = instruction.currency
            if not pricing.converts:  # balances per currency: the event's own amount
                triage.go_on.append(
                    Priced(item, r.merchant, instruction.amount_minor, _ONE, ledger)
                )
                continue
            key = (currency, item.attempt)
            rate = found.get(key) if item.span is None else None
            if rate is None:
                rate = await traced.rate(pricing.rate_from, item.span, currency, item.attempt)
                found[key] = rate
            amount_minor = convert_minor(instruction.amount_minor, rate, currency, ledger)
        except Exception as exc:  # the worker disposes of it
            triage.decided[item.index] = exc
            continue
        triage.go_on.append(Priced(item, r.merchant, amount_minor, rate, ledger,
                                   authorisation=r.authorisation, release=r.release))  # fmt: skip
    return triage
